"""``python -m bench.gpu``: the GPU benchmark of record (see :mod:`bench.gpu`)."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace

EXIT_NO_GPU = 3


def no_gpu_message() -> str | None:
    """Why there is no CUDA device to run on (None when there is one)."""
    import torch

    if torch.cuda.is_available():
        return None
    return (f"gpu bench: no CUDA device: torch.cuda.is_available() is False (torch {torch.__version__}, CUDA build "
            f"{torch.version.cuda or 'none'}). Run it on a GPU machine, or `python -m bench.gpu --device cpu --tiny` "
            f"for the suite's CPU run of the same script.")


def main(argv: list[str] | None = None) -> int:
    from bench.gpu.workload import CPU_TINY, GpuWorkload

    parser = argparse.ArgumentParser(prog="python -m bench.gpu", description="The GPU benchmark of record.")
    parser.add_argument("--device", default="cuda", help="cuda, cuda:1, ... or cpu (with --tiny: the suite's run)")
    parser.add_argument("--tiny", action="store_true", help="the suite's workload: a tiny shape, a few tokens")
    parser.add_argument("--shapes", nargs="+", help="shapes to run, in order (default: the workload's)")
    parser.add_argument("--steps", type=int, help="timed steps (default 3)")
    parser.add_argument("--budget-s", type=float, default=420.0,
                        help="no shape or CoMLRL run starts that would not end before this many seconds (default 420)")
    parser.add_argument("--comlrl-timeout-s", type=float, default=150.0, help="CoMLRL's time limit per shape")
    parser.add_argument("--no-comlrl", action="store_true", help="leave CoMLRL out")
    parser.add_argument("--json", help="write the result to this file (rewritten after every part)")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch CPU threads on --device cpu (default 1: a tiny model's small products only spin "
                             "more threads on a shared machine)")
    args = parser.parse_args(argv)
    if args.device.startswith("cuda"):
        message = no_gpu_message()
        if message is not None:
            print(message)
            return EXIT_NO_GPU
    w = CPU_TINY if args.tiny else GpuWorkload()
    if args.shapes:
        w = replace(w, shapes=tuple(args.shapes))
    if args.steps:
        w = replace(w, steps=args.steps)
    try:
        w.check()
    except ValueError as exc:
        parser.error(str(exc))
    if args.device == "cpu":
        import torch

        torch.set_num_threads(args.threads)
    from bench.gpu.record import run_record
    from bench.gpu.report import format_report

    result = run_record(w, args.device, budget_s=args.budget_s, json_path=args.json, comlrl=not args.no_comlrl,
                        comlrl_timeout_s=args.comlrl_timeout_s, progress=lambda line: print(line, flush=True))
    print(format_report(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
