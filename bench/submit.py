"""What a submit costs: CPU-seconds (user+sys) of whole ``cooplab submit`` processes and of the Python
API's submit (:func:`cooplab.api.submit`), each against a real SQLite file and the filesystem broker.

    python -m bench.submit                              # this tree: 7 rounds of each
    python -m bench.submit --baseline /tmp/base         # and another tree, run in turn, compared pair by pair
    git archive <commit> | tar -x -C /tmp/base          # (one way to make that tree)

Each round runs every version once, in turn (``cooplab submit`` of one two-agent MAGRPO config; a
process that imports :mod:`cooplab.api` and submits the same config; with ``--api-runs N``, one
``api.submit`` of N configs, whose cost per run beyond the first is printed too). A process's cost is
its ``wait4`` rusage, so the benchmark's own work is not counted. Bytecode is cached (under a
temporary ``PYTHONPYCACHEPREFIX``, even where ``PYTHONDONTWRITEBYTECODE`` is set) and every version
runs once untimed first, so what is timed is a warm start, as a script calling ``cooplab submit`` in a
loop sees it. On a shared machine every figure grows with its load: the load average is printed
beside them, and a ratio to the baseline taken round by round is the figure to compare.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CONFIG = {
    "name": "bench-submit",
    "agents": [{"name": "first"}, {"name": "second"}],
    "task": {"name": "quickstart", "params": {"num_items": 4, "eval_items": 0}},
    "trainer": {"max_steps": 3, "num_generations": 2, "max_new_tokens": 8, "eval_interval": 0,
                "checkpoint_interval": 1, "transcripts_per_step": 1},
}

_API = "import sys\nfrom cooplab import api\napi.submit(sys.argv[1:], experiment='bench-submit-api')\n"


def _cpu_seconds(argv: list[str], *, cwd: Path, env: dict[str, str]) -> float:
    """User+sys CPU-seconds of one process (its own rusage, children included: none are started)."""
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    stderr = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if proc.stderr:
        proc.stderr.close()
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} (in {cwd}) exited {proc.returncode}:\n{stderr}")
    return usage.ru_utime + usage.ru_stime


def _load() -> str:
    return " ".join(f"{value:.1f}" for value in os.getloadavg())


def main(argv: list[str] | None = None) -> dict[str, object]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--baseline", type=Path, help="another tree of the project to compare with (run in turn)")
    parser.add_argument("--api-runs", type=int, default=0, help="also time one api.submit of this many configs")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)

    trees = {"this tree": ROOT}
    if args.baseline is not None:
        trees = {"baseline": args.baseline.resolve(), **trees}
    work = Path(tempfile.mkdtemp(prefix="cooplab-bench-submit-"))
    config = work / "run.yaml"
    config.write_text(json.dumps(CONFIG))  # JSON is YAML
    many = [str(config)] * args.api_runs
    env = {k: v for k, v in os.environ.items() if not k.startswith("COOPLAB_") and k != "PYTHONDONTWRITEBYTECODE"}
    env.update(COOPLAB_HOME=str(work / "home"), PYTHONPYCACHEPREFIX=str(work / "pycache"))
    python = sys.executable

    def commands(tree: Path) -> dict[str, list[str]]:
        found = {"cooplab submit": [python, "-m", "cooplab", "submit", str(config)],
                 "api.submit": [python, "-c", _API, str(config)]}
        if many:
            found[f"api.submit x{len(many)}"] = [python, "-c", _API, *many]
        return found

    subprocess.run([python, "-m", "cooplab", "db", "upgrade"], cwd=ROOT, env=env, check=True, capture_output=True)
    for tree in trees.values():  # untimed: compiles the bytecode, warms the page cache
        for command in commands(tree).values():
            _cpu_seconds(command, cwd=tree, env={**env, "PYTHONPATH": str(tree)})

    load_before = _load()
    seconds: dict[tuple[str, str], list[float]] = {}
    for _ in range(args.rounds):
        for name, tree in trees.items():
            for what, command in commands(tree).items():
                seconds.setdefault((name, what), []).append(
                    _cpu_seconds(command, cwd=tree, env={**env, "PYTHONPATH": str(tree)}))
    load_after = _load()

    results: dict[str, object] = {"rounds": args.rounds, "load_before": load_before, "load_after": load_after,
                                  "cpu_s": {}}
    print(f"CPU-seconds (user+sys) per process, {args.rounds} rounds; load average {load_before} before, "
          f"{load_after} after")
    print(f"{'version':10s} {'what':22s} {'median':>7s} {'min':>6s} {'ratio':>18s}")
    for (name, what), values in seconds.items():
        median = statistics.median(values)
        ratio = ""
        if name != "baseline" and ("baseline", what) in seconds:
            pairs = [mine / theirs for mine, theirs in zip(values, seconds[("baseline", what)], strict=True)]
            ratio = f"{statistics.median(pairs):.2f} ({min(pairs):.2f}-{max(pairs):.2f})"
        results["cpu_s"][f"{name}: {what}"] = {"median": median, "min": min(values), "ratio": ratio}  # type: ignore[index]
        print(f"{name:10s} {what:22s} {median:7.2f} {min(values):6.2f} {ratio:>18s}")
        if many and what == f"api.submit x{len(many)}":
            one = statistics.median(seconds[(name, "api.submit")])
            print(f"{'':10s} {'  per run beyond one':22s} {(median - one) / max(1, len(many) - 1):7.3f}")
    if args.json:
        print(json.dumps(results, indent=2))
    return results


if __name__ == "__main__":
    main()
