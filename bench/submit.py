"""What a submit costs: CPU-seconds (user+sys) of whole ``cooplab submit`` processes and of the Python
API's submit (:func:`cooplab.api.submit`), each against a real SQLite file and the filesystem broker,
and with ``--database-url``/``--broker-url`` against PostgreSQL and Redis too.

    python -m bench.submit                              # this tree: 7 rounds of each
    python -m bench.submit --baseline /tmp/base         # and another tree, run in turn, compared pair by pair
    git archive <commit> | tar -x -C /tmp/base          # (one way to make that tree)
    python -m bench.submit --database-url postgresql+psycopg2://postgres@127.0.0.1:5432/test \
        --broker-url redis://127.0.0.1:6379             # both paths, side by side

``--database-url`` names a PostgreSQL server (any database on it the URL's user can connect to): the
benchmark creates a scratch database there, migrates it and drops it at the end. ``--broker-url``
names a Redis server: the benchmark takes the first empty database number of 11 down to 1 (the
tests use 12 and up), checks that it holds one message per run stored, and empties it at the end.

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
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
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


@contextmanager
def scratch_database(server_url: str) -> Iterator[str]:
    """A new, empty database on the PostgreSQL server of ``server_url`` (its URL), dropped afterwards."""
    from sqlalchemy import create_engine, text

    from db.engine import resolve_url

    server = resolve_url(server_url)
    name = f"cooplab_bench_{uuid.uuid4().hex[:10]}"
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        try:
            yield server.set(database=name).render_as_string(hide_password=False)
        finally:
            with admin.connect() as conn:
                conn.execute(text(f'DROP DATABASE "{name}" WITH (FORCE)'))
    finally:
        admin.dispose()


@contextmanager
def scratch_redis(server_url: str) -> Iterator[str]:
    """The URL of an empty database number (11 down to 1) on the Redis server of ``server_url``,
    emptied afterwards."""
    from urllib.parse import urlsplit, urlunsplit

    import redis

    parts = urlsplit(server_url)
    for number in range(11, 0, -1):
        url = urlunsplit((parts.scheme, parts.netloc, f"/{number}", "", ""))
        client = redis.Redis.from_url(url)
        if client.dbsize() == 0:
            break
        client.close()
    else:
        raise RuntimeError(f"no empty database number 1-11 on the Redis server {server_url}")
    try:
        yield url
    finally:
        client.flushdb()
        client.close()


def _check_sent(database_url: str, broker_url: str) -> None:
    """Every run stored in the scratch database has its message in the scratch Redis database."""
    import redis
    from sqlalchemy import create_engine, text

    from db.engine import resolve_url

    engine = create_engine(resolve_url(database_url))
    try:
        with engine.connect() as conn:
            stored = conn.execute(text("SELECT count(*) FROM runs")).scalar_one()
    finally:
        engine.dispose()
    client = redis.Redis.from_url(broker_url)
    try:
        queued = client.llen("cpu")
    finally:
        client.close()
    if stored != queued:
        raise RuntimeError(f"{stored} runs stored but {queued} messages in the queue")


def main(argv: list[str] | None = None) -> dict[str, object]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--baseline", type=Path, help="another tree of the project to compare with (run in turn)")
    parser.add_argument("--api-runs", type=int, default=0, help="also time one api.submit of this many configs")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--database-url", help="a PostgreSQL server: also time submits against a scratch database "
                                               "on it (needs --broker-url)")
    parser.add_argument("--broker-url", help="a Redis server: the scratch database number those submits send to")
    args = parser.parse_args(argv)
    if (args.database_url is None) != (args.broker_url is None):
        parser.error("--database-url and --broker-url go together")
    if args.database_url is None:
        return _measure(args, None, None)
    with scratch_database(args.database_url) as database_url, scratch_redis(args.broker_url) as broker_url:
        return _measure(args, database_url, broker_url)


def _measure(args: argparse.Namespace, database_url: str | None, broker_url: str | None) -> dict[str, object]:

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

    envs = {"": env}  # per path: the defaults (a SQLite file, the filesystem broker), then PostgreSQL + Redis
    if database_url is not None and broker_url is not None:
        envs["pg+redis "] = {**env, "COOPLAB_DATABASE_URL": database_url, "COOPLAB_BROKER_URL": broker_url}

    def commands(tree: Path) -> dict[str, tuple[list[str], dict[str, str]]]:
        found = {}
        for path, path_env in envs.items():
            path_env = {**path_env, "PYTHONPATH": str(tree)}
            found[f"{path}cooplab submit"] = ([python, "-m", "cooplab", "submit", str(config)], path_env)
            found[f"{path}api.submit"] = ([python, "-c", _API, str(config)], path_env)
            if many:
                found[f"{path}api.submit x{len(many)}"] = ([python, "-c", _API, *many], path_env)
        return found

    for path_env in envs.values():
        subprocess.run([python, "-m", "cooplab", "db", "upgrade"], cwd=ROOT, env=path_env, check=True,
                       capture_output=True)
    for tree in trees.values():  # untimed: compiles the bytecode, warms the page cache
        for command, command_env in commands(tree).values():
            _cpu_seconds(command, cwd=tree, env=command_env)

    load_before = _load()
    seconds: dict[tuple[str, str], list[float]] = {}
    for _ in range(args.rounds):
        for name, tree in trees.items():
            for what, (command, command_env) in commands(tree).items():
                seconds.setdefault((name, what), []).append(_cpu_seconds(command, cwd=tree, env=command_env))
    load_after = _load()
    if database_url is not None and broker_url is not None:
        _check_sent(database_url, broker_url)

    results: dict[str, object] = {"rounds": args.rounds, "load_before": load_before, "load_after": load_after,
                                  "cpu_s": {}}
    print(f"CPU-seconds (user+sys) per process, {args.rounds} rounds; load average {load_before} before, "
          f"{load_after} after")
    print(f"{'version':10s} {'what':31s} {'median':>7s} {'min':>6s} {'ratio':>18s}")
    for (name, what), values in seconds.items():
        median = statistics.median(values)
        ratio = ""
        if name != "baseline" and ("baseline", what) in seconds:
            pairs = [mine / theirs for mine, theirs in zip(values, seconds[("baseline", what)], strict=True)]
            ratio = f"{statistics.median(pairs):.2f} ({min(pairs):.2f}-{max(pairs):.2f})"
        results["cpu_s"][f"{name}: {what}"] = {"median": median, "min": min(values), "ratio": ratio}  # type: ignore[index]
        print(f"{name:10s} {what:31s} {median:7.2f} {min(values):6.2f} {ratio:>18s}")
        if many and what.endswith(f"api.submit x{len(many)}"):
            one = statistics.median(seconds[(name, what.rsplit(" x", 1)[0])])
            print(f"{'':10s} {'  per run beyond one':31s} {(median - one) / max(1, len(many) - 1):7.3f}")
    if args.json:
        print(json.dumps(results, indent=2))
    return results


if __name__ == "__main__":
    main()
