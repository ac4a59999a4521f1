"""Dashboard benchmark: ``python -m bench.dashboard [--points N] [--turns N] [--runs N] [--keep DIR] [--reuse DIR]``.

Builds a database through the store API like real training would (one ``log_step`` transaction per
step): ``--runs`` runs in all, one of them large, holding ``--points`` metric points (1M by default)
and ``--turns`` transcript turns (100k by default). Then, for every page, it times the page's data
queries alone (the functions in :mod:`app.queries` and the store calls the page makes) and the
whole page run headless through ``AppTest`` (script, queries and figure building; not the browser's
drawing): the first run of a new session (imports and caches warm up; the very first page also pays
the one-off imports) and the median of ``--repeat`` reruns, which is what every click and live
refresh costs. Prints one line per page.
"""

from __future__ import annotations

import argparse
import math
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import app
from app.configdiff import diff_configs
from app.metricgroups import default_charts, group_metrics
from app.queries import chart_data, compare_series, experiment_names, experiments_table, page_cells, runs_rows
from app.run_table import Columns
from bench.timing import median_seconds
from db.store import Store
from engine.transcripts import Episode, TurnRecord

AGENTS = ("writer", "editor")
PER_AGENT = ("loss", "grad_norm", "entropy", "response_len", "kl", "lr", "clip_frac", "adv_mean")


def metric_names(count: int) -> list[str]:
    """``count`` realistic metric keys: team rewards per turn, per-agent stats, perf, eval."""
    names = ["train/reward_mean", "train/reward_std", "turn_1/reward_mean", "turn_2/reward_mean",
             "turn_1/expected_return", "turn_2/expected_return"]
    names += [f"agent/{agent}/{m}" for agent in AGENTS for m in PER_AGENT]
    names += ["perf/step_time_s", "perf/generate_s", "perf/tokens_per_s", "eval/reward_mean"]
    extra = 0
    while len(names) < count:
        names.append(f"reward/term_{extra}")
        extra += 1
    return names[:count]


def _config(name: str, lr: float) -> dict:
    return {"name": name, "agents": [{"name": a, "model": "builtin:tiny-llama"} for a in AGENTS],
            "task": {"name": "quickstart", "params": {}},
            "trainer": {"agent_learning_rate": lr, "max_steps": 1000, "num_turns": 2}}


def _episodes(step: int, per_step: int) -> list[Episode]:
    episodes = []
    for sample in range(per_step):
        turns = tuple(
            TurnRecord(turn=turn, agent_index=i, agent_name=agent,
                       prompt=f"Item {sample}: write the {agent} part of a short story about step {step}. " * 3,
                       completion=f"{agent} reply {sample} at step {step}: " + "lorem ipsum " * 20,
                       reward=math.sin(step / 50 + sample), ret=math.sin(step / 50 + sample) * 2,
                       advantage=(sample - per_step / 2) / per_step)
            for turn in (1, 2) for i, agent in enumerate(AGENTS)
        )
        episodes.append(Episode(sample_index=sample, split="train" if sample % 4 else "eval",
                                item_index=sample, turns=turns))
    return episodes


def build(store: Store, *, runs: int, points: int, turns: int, keys: int = 40) -> int:
    """Fill ``store``; return the id of the large run."""
    small_exp = store.create_experiment("bench-sweep", tags=["bench"], config=_config("bench-sweep", 1e-5))
    big_exp = store.create_experiment("bench-large", tags=["bench"], config=_config("bench-large", 5e-6))
    names = metric_names(keys)
    for index in range(runs - 1):
        run = store.create_run(small_exp.id, _config("bench-sweep", 1e-5 * (index + 1)), "cpu", total_steps=20)
        store.transition(run.id, "starting")
        store.transition(run.id, "running")
        for step in range(1, 21):
            store.log_step(run.id, step, 4 * step, {k: math.cos(step / 5 + index) for k in names[:6]},
                           wall_time=1.7e9 + step)
        store.transition(run.id, "succeeded" if index % 3 else "stopping")
    big = store.create_run(big_exp.id, _config("bench-large", 5e-6), "cpu", total_steps=points // keys)
    store.transition(big.id, "starting")
    store.transition(big.id, "running")
    steps = max(1, points // keys)
    turns_per_step = 2 * len(AGENTS) * 5  # 5 episodes of 2 turns by 2 agents
    steps_with_episodes = max(1, turns // turns_per_step)
    every = max(1, steps // steps_with_episodes)
    for step in range(1, steps + 1):
        spike = 25.0 if step == steps // 3 else 0.0
        metrics = {k: math.sin(step / 200 + j) + spike for j, k in enumerate(names)}
        episodes = _episodes(step, 5) if step % every == 0 and step // every <= steps_with_episodes else []
        store.log_step(big.id, step, 4 * step, metrics, episodes, wall_time=1.7e9 + step * 0.5)
    store.upsert_worker("cpu@bench", host="bench", devices=["cpu"], queues=["cpu"], current_run_id=big.id)
    return big.id


@dataclass(frozen=True)
class Timing:
    """Seconds one page takes: its data queries alone, its first run in a session, a rerun."""

    page: str
    queries_s: float
    first_s: float
    rerun_s: float


def page_queries(store: Store, big: int) -> dict[str, Callable[[], object]]:
    """The data each page reads, as the page reads it (first screen, default controls)."""

    def experiments() -> object:
        return experiments_table(store.list_experiments())

    def runs() -> object:
        names = experiment_names(store)
        store.run_counts_by_status()
        return page_cells(store, runs_rows(store, names, Columns())[:25])

    def run_detail() -> object:
        history = store.lineage(big)
        charts = {c.title: c for c in group_metrics(store.metric_keys(big))}
        return [chart_data(store, big, charts[t].curves, history=history)
                for t in default_charts(list(charts.values()))]

    def transcripts() -> object:
        store.lineage(big)
        steps = store.episode_steps(big)
        return store.episodes(big, step=steps[-1], limit=10)

    def transcripts_search() -> object:
        return store.episodes(big, text="reply 3 at step 9", limit=10)

    def compare() -> object:
        other = store.list_runs(limit=2)[-1].id
        series = compare_series(store, [big, other], "train/reward_mean")
        return series, diff_configs({str(r): dict(store.get_run(r).config) for r in (big, other)})

    def workers() -> object:
        return store.list_workers(), store.list_runs(statuses=["queued"], limit=500)

    return {"experiments": experiments, "runs": runs, "run_detail": run_detail, "transcripts": transcripts,
            "transcripts (text search)": transcripts_search, "compare": compare, "workers": workers}


def render_time(page: str, big: int, repeat: int) -> tuple[float, float]:
    """A headless page run (AppTest) with the large run selected: the first run of a new session
    and the median of ``repeat`` reruns (what each click or live refresh costs)."""
    from streamlit import config
    from streamlit.testing.v1 import AppTest

    config.set_option("server.address", "127.0.0.1")  # as `cooplab ui` serves it: no sign-in
    main = str(Path(app.__file__).resolve().parent / "main.py")
    at = AppTest.from_file(main, default_timeout=120)
    at.query_params["run"] = str(big)
    at.switch_page(f"app_pages/{page}.py")

    def once() -> None:
        at.run()
        if at.exception:
            raise RuntimeError(f"page {page} failed: {at.exception[0].value}")

    start = time.perf_counter()
    once()
    first = time.perf_counter() - start
    return first, median_seconds(once, repeat)


def run_bench(*, runs: int, points: int, turns: int, repeat: int, home: Path,
              reuse: bool = False) -> tuple[int, list[Timing]]:
    """Build the database under ``home`` (or, with ``reuse``, time the one already there: the run with
    the most steps is the large one) and time every page; returns the large run id and timings."""
    os.environ["COOPLAB_HOME"] = str(home)
    os.environ.pop("COOPLAB_DATABASE_URL", None)
    home.mkdir(parents=True, exist_ok=True)
    store = Store(f"sqlite:///{home / 'cooplab.db'}", migrate=True)
    start = time.perf_counter()
    if reuse:
        big = max(store.list_runs(limit=100_000), key=lambda r: r.step).id
        print(f"timing the database in {home} (large run #{big})")
    else:
        big = build(store, runs=runs, points=points, turns=turns)
        print(f"built {runs} runs, {points:,} points and {turns:,} turns in the large run "
              f"in {time.perf_counter() - start:.1f} s")
    timings = []
    for page, func in page_queries(store, big).items():
        queries = median_seconds(func, repeat)
        script = page.split(" ")[0]
        first, rerun = render_time(script, big, repeat) if script == page else (math.nan, math.nan)
        timings.append(Timing(page, queries, first, rerun))
    store.close()
    return big, timings


def main(argv: list[str] | None = None) -> list[Timing]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--points", type=int, default=1_000_000)
    parser.add_argument("--turns", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", type=Path, default=None, help="build the database in this folder and keep it")
    parser.add_argument("--reuse", type=Path, default=None,
                        help="time the database a previous --keep left in this folder instead of building one")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        home = args.reuse or args.keep or Path(tmp) / "home"
        _, timings = run_bench(runs=args.runs, points=args.points, turns=args.turns, repeat=args.repeat, home=home,
                               reuse=args.reuse is not None)
    print(f"{'page':28} {'queries':>10} {'first run':>11} {'rerun':>10}")
    for t in timings:
        first = "" if math.isnan(t.first_s) else f"{t.first_s * 1000:8.0f} ms"
        rerun = "" if math.isnan(t.rerun_s) else f"{t.rerun_s * 1000:8.0f} ms"
        print(f"{t.page:28} {t.queries_s * 1000:8.0f} ms {first:>11} {rerun:>10}")
    return timings


if __name__ == "__main__":
    main()
