"""A tiny training run beside busy processes: torch's default OpenMP threads against the job settings.

    python -m bench.busy_machine [--busy 2] [--steps 2] [--agents 1 2] [--timeout 300] [--quiet]

Each part is a fresh process that trains a tiny team (``builtin:tiny-llama``; one agent: the
``self_refine`` task, two turns; two agents: ``quickstart``) for ``--steps`` steps while ``--busy``
processes spin on the CPU (default: one per core this process may use). ``old`` is torch's defaults
(a waiting OpenMP thread spins about 3 ms before it sleeps, one thread per core); ``new`` is what a
worker's job process and ``cooplab train`` do now (:func:`jobs.cpu_threads.configure_threads`:
waiting threads sleep, the job's share of the cores). Side by side: the seconds of
``run_training`` (the team built, then trained) of each, old / new, and whether both ran the same
numbers (a fingerprint of every logged metric but the timings: same results bit for bit). A part that runs past ``--timeout`` (its process, imports
included) is stopped and shows as more than the seconds it had trained by then.
``--quiet`` also runs both without the busy processes (the machine's own load still counts: the
1-minute load average is printed before and after).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

STARTED = "busy-machine: training from"
OMP_VARIABLES = ("OMP_NUM_THREADS", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "MKL_NUM_THREADS", "COOPLAB_JOB_THREADS")


def run_config(agents: int, steps: int) -> dict:
    """The tiny workload: one agent on self_refine (two turns) or two on quickstart; no evals, no checkpoints."""
    task = "self_refine" if agents == 1 else "quickstart"
    return {"name": "busy-machine", "agents": [{"name": f"a{i}", "model": "builtin:tiny-llama"} for i in range(agents)],
            "task": {"name": task, "params": {}},
            "trainer": {"algorithm": "magrpo", "max_steps": steps, "num_generations": 8, "max_new_tokens": 12,
                        "num_turns": 2 if agents == 1 else 1, "seed": 0, "eval_interval": 0,
                        "checkpoint_interval": 0, "transcripts_per_step": 0}}


def child(settings: str, agents: int, steps: int, output: Path) -> dict:
    """In a fresh process: set the threads (``new``) before torch loads, train, report seconds and a fingerprint."""
    if settings == "new":
        from jobs.cpu_threads import configure_threads

        configure_threads(None)
    import torch

    from engine.build.run import run_training
    from engine.schema.run_config import parse_run_config
    from engine.sinks import MemorySink

    sink = MemorySink()
    print(f"{STARTED} {time.time()}", file=sys.stderr, flush=True)  # a part that times out: its lower bound
    started = time.perf_counter()
    result = run_training(parse_run_config(run_config(agents, steps)), output_dir=output, sink=sink)
    seconds = time.perf_counter() - started
    numbers = [(s.step, sorted((k, v) for k, v in s.metrics.items() if not k.startswith("perf/"))) for s in sink.steps]
    (output / "metrics.json").write_text(json.dumps(numbers, indent=1))  # to compare parts whose results differ
    return {"seconds": seconds, "status": result.status, "threads": torch.get_num_threads(),
            "wait_policy": os.environ.get("OMP_WAIT_POLICY", "(libgomp default)"),
            "fingerprint": hashlib.sha256(repr(numbers).encode()).hexdigest()[:12]}


def run_part(settings: str, agents: int, steps: int, timeout: float, output: Path) -> dict:
    """One part in a fresh process with no OpenMP variables of this shell; ``seconds`` None when it timed out."""
    env = {k: v for k, v in os.environ.items() if k not in OMP_VARIABLES}
    env.update(HF_HUB_DISABLE_PROGRESS_BARS="1", TOKENIZERS_PARALLELISM="false")
    command = [sys.executable, "-m", "bench.busy_machine", "--child", settings, "--agents", str(agents),
               "--steps", str(steps), "--output", str(output)]
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        stderr = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        starts = [float(line.split()[-1]) for line in stderr.splitlines() if line.startswith(STARTED)]
        return {"seconds": None, "at_least": time.time() - starts[0] if starts else 0.0, "fingerprint": "-",
                "threads": "-", "wait_policy": "-"}
    if done.returncode != 0:
        raise RuntimeError(f"the {settings} part failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def start_busy(count: int) -> list[subprocess.Popen[bytes]]:
    """``count`` processes that spin on the CPU until killed."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]


def stop_busy(processes: list[subprocess.Popen[bytes]]) -> None:
    for process in processes:
        process.kill()
        process.wait()


def _seconds(part: dict) -> str:
    """A part's seconds; one that timed out: more than the seconds it had trained by then."""
    return f"{part['seconds']:8.1f}" if part["seconds"] is not None else f"{'>' + format(part['at_least'], '.0f'):>8}"


def _ratio(old: dict, new: dict) -> str:
    if new["seconds"] is None:
        return "     -"
    old_s = old["seconds"] if old["seconds"] is not None else old["at_least"]
    return f"{'>' if old['seconds'] is None else ''}{old_s / new['seconds']:.1f}x"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--busy", type=int, default=None, help="spinning processes beside the run (default: cores)")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--agents", type=int, nargs="+", default=[1], choices=[1, 2])
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds a part may take (process included)")
    parser.add_argument("--quiet", action="store_true", help="also run both parts without the busy processes")
    parser.add_argument("--child", choices=["old", "new"], help=argparse.SUPPRESS)
    parser.add_argument("--output", type=Path, default=Path("/tmp/cooplab-busy-machine"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.agents[0], args.steps, args.output)))
        return

    from jobs.cpu_threads import available_cores

    cores = available_cores()
    busy = cores if args.busy is None else args.busy
    print(f"{cores} core(s); 1-minute load before: {os.getloadavg()[0]:.1f}; {args.steps} step(s) per part; "
          "seconds of run_training (old: torch's defaults; new: jobs.cpu_threads)")
    print(f"{'agents':>6}  {'beside':<20} {'old s':>8} {'new s':>8}  {'old/new':>7}  {'threads old/new':>15}  "
          f"same results")
    loads = [(f"{busy} busy process(es)", busy)] + ([("nothing added", 0)] if args.quiet else [])
    for agents in args.agents:
        for label, count in loads:
            spinners = start_busy(count)
            try:
                old = run_part("old", agents, args.steps, args.timeout, args.output / "old")
                new = run_part("new", agents, args.steps, args.timeout, args.output / "new")
            finally:
                stop_busy(spinners)
            same = ("yes" if old["fingerprint"] == new["fingerprint"] else "NO") if old["seconds"] else "-"
            print(f"{agents:>6}  {label:<20} {_seconds(old)} {_seconds(new)}  "
                  f"{_ratio(old, new):>7}  {str(old['threads']) + '/' + str(new['threads']):>15}  {same}",
                  flush=True)
    print(f"1-minute load after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
