"""One run of the user script in this process: ``python -m bench.training.script_ratio_child``.

Started by :mod:`bench.training.script_ratio` under ``taskset`` (pinned to its cores, with as many
torch threads); prints one JSON line: :func:`bench.training.script_ratio_user.train_team`'s timings
and counts, plus this process's peak resident memory.
"""

from __future__ import annotations

import argparse
import json
import resource


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.training.script_ratio_child")
    parser.add_argument("--package", required=True, help="where MAGRPOConfig/MAGRPOTrainer are imported from")
    parser.add_argument("--model", required=True, help="a model folder (save_pretrained layout)")
    parser.add_argument("--cores", type=int, required=True, help="torch threads")
    parser.add_argument("--num-generations", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--settings", default="{}", help="extra MAGRPOConfig fields, as JSON")
    args = parser.parse_args(argv)

    import torch

    torch.set_num_threads(args.cores)
    from bench.training.script_ratio_user import train_team

    result = train_team(args.package, args.model, num_generations=args.num_generations,
                        max_new_tokens=args.max_new_tokens, settings=json.loads(args.settings))
    result["peak_mem_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
