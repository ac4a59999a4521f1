"""What watching costs, in a real browser: ``python -m bench.dashboard_live [--steps N] [--ab-steps N]
[--pairs N] [--window S] [--steady S] [--save FILE] [--baseline FILE] [--keep DIR | --reuse DIR]``.

Starts the dashboard (``cooplab ui``) and a CPU worker (``cooplab worker``) in a fresh data directory,
and a headless Chromium driven over CDP by Playwright. Then, with ``psutil`` on the Streamlit process
(server CPU) and on Chromium's process tree (browser CPU):

1. trains the quick start for ``--ab-steps`` steps with no page open, then with the run's page open
   (live), then closed again, ``--pairs`` times interleaved (closed, open, closed, open, ..., closed):
   training steps/s open vs closed (each open run against the mean of the closed runs beside it; the
   ratio reported is the median over the pairs), and the server and browser CPU per live poll while it
   trained (CPU seconds, comparable on a shared machine where wall-clock speed is not); the load
   average at each run is printed beside it;
2. opens the page of a finished ``--steps`` run (the first run's metrics repeated to that length):
   seconds until it is usable (script done, status and every chart drawn), server and browser CPU of
   that load;
3. leaves that page open ``--window`` seconds: server and browser CPU share of a core; the same for
   the Runs page;
4. (``--steady S``, before the rest) what a live page costs per poll with nothing else going on: a
   running run written through the store (100 steps, then one more a second, with heartbeats; nothing
   trains), its page opened and settled, then ``S`` seconds measured: server and browser CPU per poll,
   and the browser's split between its processes (the page's renderer, the GPU process, the rest).

``--save`` writes the numbers as JSON; ``--baseline`` prints a saved file's numbers beside the new ones
with their ratio (new / baseline). The budget (issue 45): training with the page open within 10 % of
closed, the run page usable in <= 3 s, a finished run's open page <= 2 % of a core.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
                 "--window-size=1400,1000"]
TERMINAL = ("succeeded", "failed", "stopped", "lost", "cancelled")
REFRESH_S = 2.0
# usable: the script has finished, the status is shown and every chart on the page is drawn
USABLE_JS = """() => {
  const app = document.querySelector('[data-testid="stApp"]');
  if (!app || app.getAttribute('data-test-script-state') !== 'notRunning') return false;
  if (!document.querySelector('[data-testid="stMetricValue"]')) return false;
  const charts = [...document.querySelectorAll('.js-plotly-plot')];
  return charts.length > 0 && charts.every(c => c._fullLayout && c.querySelector('.main-svg'));
}"""
# (what, unit, lower is better)
ROWS = [
    ("steps_s_closed", "steps/s", False), ("steps_s_open", "steps/s", False), ("open_vs_closed", "ratio", False),
    ("live_server_cpu_per_poll_s", "s", True), ("live_browser_cpu_per_poll_s", "s", True),
    ("steady_server_cpu_per_poll_s", "s", True), ("steady_browser_cpu_per_poll_s", "s", True),
    ("steady_renderer_cpu_per_poll_s", "s", True),
    ("usable_s", "s", True), ("load_server_cpu_s", "s", True), ("load_browser_cpu_s", "s", True),
    ("finished_server_share", "core", True), ("finished_browser_share", "core", True),
    ("runs_server_share", "core", True), ("runs_browser_share", "core", True),
]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _cpu(process: psutil.Process | None) -> float:
    """CPU seconds of ``process`` and its descendants: the live ones, and those that ended and were
    reaped by a live one (a browser's renderers come and go with the pages)."""
    if process is None:
        return 0.0
    total = 0.0
    with contextlib.suppress(psutil.NoSuchProcess):
        for p in [process, *process.children(recursive=True)]:
            with contextlib.suppress(psutil.NoSuchProcess):
                times = p.cpu_times()
                total += times.user + times.system + times.children_user + times.children_system
    return total


class Meter:
    """CPU seconds of the Streamlit server and of the browser over a stretch of time."""

    def __init__(self, server: psutil.Process, browser: psutil.Process) -> None:
        self.server, self.browser = server, browser

    @contextlib.contextmanager
    def measure(self) -> Iterator[dict[str, float]]:
        out: dict[str, float] = {}
        s0, b0, t0 = _cpu(self.server), _cpu(self.browser), time.perf_counter()
        yield out
        out.update(server=_cpu(self.server) - s0, browser=_cpu(self.browser) - b0, wall=time.perf_counter() - t0)


def _start(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    with log.open("ab") as out:
        return subprocess.Popen(args, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def _stop(proc: subprocess.Popen) -> None:
    with contextlib.suppress(psutil.NoSuchProcess):
        children = psutil.Process(proc.pid).children(recursive=True)
        for p in [psutil.Process(proc.pid), *children]:
            with contextlib.suppress(psutil.NoSuchProcess):
                p.kill()
    proc.wait(timeout=20)


def _wait(predicate: Callable[[], object], timeout: float, what: str, every: float = 0.25) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
            return response.read().strip() == b"ok"
    except OSError:
        return False


def _streamlit_process(ui: subprocess.Popen) -> psutil.Process:
    for p in [psutil.Process(ui.pid), *psutil.Process(ui.pid).children(recursive=True)]:
        if any("streamlit" in part for part in p.cmdline()):
            return p
    raise RuntimeError("no streamlit process under `cooplab ui`")


def steps_per_s(store, run_id: int, skip: int = 5) -> float:
    """Training speed of a finished run from its metrics' wall times (the first ``skip`` steps left out)."""
    series = store.series(run_id, "train/reward_mean", x="wall_time", max_points=1_000_000, step_min=skip + 1)
    times = sorted(series.xs)
    return (len(times) - 1) / (times[-1] - times[0]) if len(times) > 1 and times[-1] > times[0] else float("nan")


def tiled_run(store, source: int, steps: int) -> int:
    """A finished run of ``steps`` steps holding ``source``'s metrics repeated (as if it had trained that
    long): the page of a long run without training one on a loaded machine."""
    run = store.get_run(source)
    by_step: dict[int, dict[str, float]] = {}
    for point in store.iter_metrics(source):
        by_step.setdefault(point.step, {})[point.key] = point.value
    logged = sorted(by_step)
    tiled = store.create_run(run.experiment_id, dict(run.config), run.queue, total_steps=steps)
    store.transition(tiled.id, "starting")
    store.transition(tiled.id, "running")
    start = time.time() - steps * 0.1
    for step in range(1, steps + 1):
        store.log_step(tiled.id, step, 4 * step, by_step[logged[(step - 1) % len(logged)]],
                       wall_time=start + step * 0.1)
    store.transition(tiled.id, "succeeded")
    return tiled.id


STEADY_KEYS = ("train/reward_mean", "turn_1/reward_mean", "turn_2/reward_mean", "turn_1/expected_return",
               "agent/writer/loss", "agent/editor/loss")


def _by_kind(browser: psutil.Process) -> dict[str, float]:
    """CPU seconds of the browser's processes by kind (``renderer``, ``gpu-process``, ``browser``, ...)."""
    out: dict[str, float] = {}
    with contextlib.suppress(psutil.NoSuchProcess):
        for p in [browser, *browser.children(recursive=True)]:
            with contextlib.suppress(psutil.NoSuchProcess):
                kind = next((a.split("=", 1)[1] for a in p.cmdline() if a.startswith("--type=")), "browser")
                times = p.cpu_times()
                out[kind] = out.get(kind, 0.0) + times.user + times.system
    return out


def steady(store, page, meter: Meter, url: str, window: float) -> dict[str, float]:
    """Server and browser CPU per poll of a live run's open page, the run written through the store (a
    step a second), nothing training: what watching costs by itself."""
    from app.commands import create_experiment
    from engine.schema.presets import preset_config

    experiment = create_experiment(store, {**preset_config("quickstart"), "name": f"bench-steady-{time.time():.0f}"}).id
    run_id = store.create_run(experiment, dict(store.get_experiment(experiment).config), "cpu", total_steps=100_000).id
    store.transition(run_id, "starting")
    store.transition(run_id, "running")
    step = 0

    def log() -> None:
        nonlocal step
        step += 1
        store.log_step(run_id, step, 4 * step, {k: 0.01 * step + 0.001 * i for i, k in enumerate(STEADY_KEYS)},
                       wall_time=time.time())
        store.heartbeat(run_id)

    for _ in range(100):
        log()
    page.goto(f"{url}/run_detail?run={run_id}")
    page.wait_for_selector('[data-testid="stApp"][data-test-script-state="notRunning"]')
    settle = time.monotonic() + 15  # first draws, the charts' scripts loaded
    while time.monotonic() < settle:
        log()
        time.sleep(1)
    kinds = _by_kind(meter.browser)
    with meter.measure() as cost:
        end = time.monotonic() + window
        while time.monotonic() < end:
            log()
            time.sleep(1)
    after = _by_kind(meter.browser)
    polls = cost["wall"] / REFRESH_S
    split = {k: (after[k] - kinds.get(k, 0.0)) / polls for k in after}
    page.goto("about:blank")
    store.transition(run_id, "succeeded")
    print(f"steady live page: per poll server {cost['server'] / polls:.3f} s, browser {cost['browser'] / polls:.3f} s "
          f"CPU ({', '.join(f'{k} {v:.3f}' for k, v in sorted(split.items()) if v >= 0.001)}); "
          f"load average {_load()}", flush=True)
    return {"steady_server_cpu_per_poll_s": cost["server"] / polls,
            "steady_browser_cpu_per_poll_s": cost["browser"] / polls,
            "steady_renderer_cpu_per_poll_s": split.get("renderer", 0.0)}


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def measure(*, steps: int, ab_steps: int, window: float, home: Path, reuse: bool = False,
            pairs: int = 1, steady_s: float = 0.0) -> dict[str, float]:
    from playwright.sync_api import sync_playwright

    from db.store import Store
    from engine.schema.presets import preset_config
    from jobs.client import submit_to_experiment

    env = {k: v for k, v in os.environ.items() if not k.startswith("COOPLAB_")}
    env.update({"COOPLAB_HOME": str(home), "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)})
    for key in [k for k in os.environ if k.startswith("COOPLAB_")]:
        del os.environ[key]
    os.environ["COOPLAB_HOME"] = str(home)
    store = Store(f"sqlite:///{home / 'cooplab.db'}", migrate=True)
    port, cdp = _free_port(), _free_port()
    url = f"http://127.0.0.1:{port}"
    log = home / "bench.log"
    ui = _start([sys.executable, "-m", "cooplab", "ui", "--port", str(port)], env, log)
    worker = _start([sys.executable, "-m", "cooplab", "worker", "--device", "cpu"], env, log)
    chromium = _start([os.environ.get("COOPLAB_CHROMIUM", "/usr/bin/chromium"), *CHROMIUM_ARGS,
                       f"--remote-debugging-port={cdp}", f"--user-data-dir={home / 'chromium'}", "about:blank"],
                      env, home / "chromium.log")
    out: dict[str, float] = {}
    try:
        _wait(lambda: _healthy(url), 120, "the dashboard")
        meter = Meter(_streamlit_process(ui), psutil.Process(chromium.pid))
        with sync_playwright() as playwright:
            browser = _wait(lambda: _connect(playwright, cdp), 60, "Chromium's debugging port")
            page = browser.contexts[0].pages[0] if browser.contexts[0].pages else browser.contexts[0].new_page()
            page.set_default_timeout(120_000)

            def usable(path: str) -> dict[str, float]:
                page.goto("about:blank")
                with meter.measure() as load:
                    page.goto(f"{url}{path}")
                    page.wait_for_function(USABLE_JS, timeout=120_000, polling=100)
                return load

            page.goto(f"{url}/runs")  # warm up: the server's one-off imports, the browser's caches
            page.wait_for_selector('[data-testid="stApp"][data-test-script-state="notRunning"]')
            if steady_s > 0:
                out.update(steady(store, page, meter, url, steady_s))

            def train(max_steps: int, watch: bool) -> tuple[int, dict[str, float]]:
                config = preset_config("quickstart")
                config["trainer"] = {**config["trainer"], "max_steps": max_steps}
                run_id, _ = submit_to_experiment(config, experiment="bench-live")
                page.goto(f"{url}/run_detail?run={run_id}" if watch else "about:blank")
                _wait(lambda: store.get_run(run_id).status in ("running", *TERMINAL), 300, "the run to start")
                with meter.measure() as cost:
                    _wait(lambda: store.get_run(run_id).status in TERMINAL, 1800, "the run to end", every=0.5)
                if store.get_run(run_id).status != "succeeded":
                    raise RuntimeError(f"run {run_id} ended {store.get_run(run_id).status}; see {log}")
                return run_id, cost

            if reuse:  # pages only: the run with the most steps is the finished one
                finished = max(store.list_runs(limit=10_000), key=lambda r: r.step).id
            else:
                closed = [train(ab_steps, watch=False)[0]]
                ratios, server_cpu, browser_cpu, walls = [], 0.0, 0.0, 0.0
                for pair in range(pairs):
                    opened, live = train(ab_steps, watch=True)
                    closed.append(train(ab_steps, watch=False)[0])
                    around = (steps_per_s(store, closed[-2]) + steps_per_s(store, closed[-1])) / 2
                    ratios.append(steps_per_s(store, opened) / around)
                    server_cpu, browser_cpu = server_cpu + live["server"], browser_cpu + live["browser"]
                    walls += live["wall"]
                    polls = max(1.0, live["wall"] / REFRESH_S)
                    print(f"pair {pair + 1}: closed {steps_per_s(store, closed[-2]):.2f} / open "
                          f"{steps_per_s(store, opened):.2f} / closed {steps_per_s(store, closed[-1]):.2f} steps/s "
                          f"(ratio {ratios[-1]:.3f}); per poll server {live['server'] / polls:.3f} s, browser "
                          f"{live['browser'] / polls:.3f} s CPU; load average {_load()}", flush=True)
                finished = tiled_run(store, closed[0], steps)
                out["steps_s_closed"] = statistics.mean(steps_per_s(store, run) for run in closed)
                out["steps_s_open"] = out["steps_s_closed"] * statistics.median(ratios)
                out["open_vs_closed"] = statistics.median(ratios)
                polls = max(1.0, walls / REFRESH_S)
                out["live_server_cpu_per_poll_s"] = server_cpu / polls
                out["live_browser_cpu_per_poll_s"] = browser_cpu / polls

            load = usable(f"/run_detail?run={finished}")
            out.update(usable_s=load["wall"], load_server_cpu_s=load["server"], load_browser_cpu_s=load["browser"])
            print(f"page of the {steps}-step run usable after {load['wall']:.2f} s (server {load['server']:.2f} s, "
                  f"browser {load['browser']:.2f} s CPU); load average {_load()}", flush=True)
            for name, path in (("finished", None), ("runs", "/runs")):
                if path:
                    page.goto(f"{url}{path}")
                    page.wait_for_selector('[data-testid="stApp"][data-test-script-state="notRunning"]')
                time.sleep(3)  # let the load settle
                with meter.measure() as idle:
                    time.sleep(window)
                out[f"{name}_server_share"] = idle["server"] / idle["wall"]
                out[f"{name}_browser_share"] = idle["browser"] / idle["wall"]
            browser.close()
    finally:
        for proc in (chromium, worker, ui):
            _stop(proc)
        store.close()
    return out


def _connect(playwright, port: int):
    try:
        return playwright.chromium.connect_over_cdp(f"http://127.0.0.1:{port}")
    except Exception:  # noqa: BLE001 - not listening yet
        return None


def report(numbers: dict[str, float], baseline: dict[str, float] | None = None) -> str:
    """One line per number; with a baseline, its value and the ratio new / baseline beside it."""
    head = f"{'measure':30} {'unit':>8} {'now':>10}"
    if baseline:
        head += f" {'baseline':>10} {'ratio':>8}"
    lines = [head]
    for name, unit, _ in ROWS:
        if name not in numbers:
            continue
        line = f"{name:30} {unit:>8} {numbers[name]:10.3f}"
        if baseline and name in baseline:
            ratio = numbers[name] / baseline[name] if baseline[name] else float("nan")
            line += f" {baseline[name]:10.3f} {ratio:7.2f}x"
        lines.append(line)
    budget = [("open_vs_closed", ">=", 0.9), ("usable_s", "<=", 3.0), ("finished_server_share", "<=", 0.02)]
    for name, op, limit in budget:
        if name in numbers:
            ok = numbers[name] >= limit if op == ">=" else numbers[name] <= limit
            lines.append(f"budget {name} {op} {limit}: {'met' if ok else 'MISSED'} ({numbers[name]:.3f})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=800, help="steps of the finished run whose page is timed")
    parser.add_argument("--ab-steps", type=int, default=150, help="steps of each run trained with the page open/closed")
    parser.add_argument("--pairs", type=int, default=1, help="open/closed training pairs, interleaved")
    parser.add_argument("--window", type=float, default=30.0, help="seconds an open page is watched idle")
    parser.add_argument("--steady", type=float, default=40.0,
                        help="seconds a live page is measured with nothing training (0: skip)")
    parser.add_argument("--save", type=Path, default=None, help="write the numbers to this JSON file")
    parser.add_argument("--baseline", type=Path, default=None, help="a JSON file --save wrote, to compare with")
    parser.add_argument("--keep", type=Path, default=None, help="keep the data directory here")
    parser.add_argument("--reuse", type=Path, default=None,
                        help="time only the pages of the data directory a previous --keep left here (no training)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        home = args.reuse or args.keep or Path(tmp) / "home"
        home.mkdir(parents=True, exist_ok=True)
        numbers = measure(steps=args.steps, ab_steps=args.ab_steps, window=args.window, home=home,
                          reuse=args.reuse is not None, pairs=args.pairs, steady_s=args.steady)
    if args.save:
        args.save.write_text(json.dumps(numbers, indent=1))
    baseline = json.loads(args.baseline.read_text()) if args.baseline else None
    print(report(numbers, baseline))
    print(f"load average (1, 5, 15 min) at the end: {_load()}")
    return numbers


if __name__ == "__main__":
    main()
