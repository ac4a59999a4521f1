"""Fixtures for the dashboard tests: a fresh data directory (SQLite file, broker folders) per test,
a store on it (a copy of the suite's migrated template), a helper that fills it with runs, metrics and
transcripts, and an AppTest factory."""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from streamlit import config
from streamlit.testing.v1 import AppTest

from db.store import Store
from engine.schema.run_config import RunConfig
from engine.transcripts import Episode, TurnRecord

MAIN = str(Path(__file__).resolve().parents[2] / "app" / "main.py")


def two_agent_config(name: str = "demo", **trainer: Any) -> dict[str, Any]:
    """A small valid run config (two tiny agents on the quickstart task)."""
    config = {
        "name": name,
        "agents": [{"name": "writer", "model": "builtin:tiny-llama"},
                   {"name": "editor", "model": "builtin:tiny-llama"}],
        "task": {"name": "quickstart", "params": {}},
        "trainer": {"max_steps": 5, "num_generations": 2, **trainer},
    }
    return RunConfig.model_validate(config).model_dump(mode="json")


@pytest.fixture(autouse=True, scope="session")
def _components_discovered_once() -> Iterator[None]:
    """Each ``AppTest`` scans every installed distribution's metadata for Streamlit components on its first
    run (``scan_component_manifests``: ~0.2 s of CPU, a fifth of a small page's test); a dashboard server
    scans once at start. The installed packages do not change during the suite, so this process scans once
    too and every ``AppTest`` gets that answer."""
    from streamlit.components.v2 import manifest_scanner

    scan = manifest_scanner.scan_component_manifests
    manifest_scanner.scan_component_manifests = functools.cache(scan)
    yield
    manifest_scanner.scan_component_manifests = scan


@pytest.fixture(autouse=True, scope="session")
def _served_options() -> Iterator[None]:
    """The pages run with the options the dashboard is served with (``jobs.supervisor.SERVED_OPTIONS``).
    Streamlit's defaults differ in cost, not in what a page shows: ``runner.postScriptGC`` collects the
    whole heap after every run (0.1-0.25 s of CPU in a test process that has torch loaded), and usage
    statistics describe every element call."""
    from jobs.supervisor import SERVED_OPTIONS

    previous = {name: config.get_option(name) for name in SERVED_OPTIONS}
    for name, value in SERVED_OPTIONS.items():
        config.set_option(name, value)
    yield
    for name, value in previous.items():
        config.set_option(name, value)


@pytest.fixture(autouse=True, scope="session")
def _scripts_compiled_once() -> Iterator[None]:
    """Each ``AppTest`` has a script cache of its own, so every test compiled ``app/main.py`` and its page
    again (with Streamlit's magic rewrite of the syntax tree); a server compiles each once. This process
    keeps the bytecode of each script by its path, size and modification time."""
    from streamlit.runtime.scriptrunner import script_cache

    compiled: dict[tuple[str, int, int], Any] = {}
    get_bytecode = script_cache.ScriptCache.get_bytecode

    def cached(self: Any, script_path: str) -> Any:
        stat = os.stat(script_path)
        key = (os.path.abspath(script_path), stat.st_size, stat.st_mtime_ns)
        if key not in compiled:
            compiled[key] = get_bytecode(self, script_path)
        return compiled[key]

    script_cache.ScriptCache.get_bytecode = cached
    yield
    script_cache.ScriptCache.get_bytecode = get_bytecode


@pytest.fixture(autouse=True)
def server_address() -> Iterator[Callable[[str | None], None]]:
    """The address the dashboard "listens on" (``server.address``): 127.0.0.1 unless a test calls
    ``server_address("0.0.0.0")``, so pages open without sign-in as under ``cooplab ui``."""
    previous = config.get_option("server.address")
    config.set_option("server.address", "127.0.0.1")
    yield lambda address: config.set_option("server.address", address)
    config.set_option("server.address", previous)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private COOPLAB_HOME: the app, the store and the job client all use it."""
    monkeypatch.setenv("COOPLAB_HOME", str(tmp_path / "home"))
    for var in ("COOPLAB_DATABASE_URL", "COOPLAB_BROKER_URL", "COOPLAB_RESULT_BACKEND"):
        monkeypatch.delenv(var, raising=False)
    return tmp_path / "home"


@pytest.fixture
def store(home: Path, migrated_sqlite: Callable[[Path], str]) -> Store:
    """A store on the test's SQLite file (a copy of the suite's migrated template)."""
    home.mkdir(parents=True, exist_ok=True)
    st = Store(migrated_sqlite(home / "cooplab.db"))
    yield st
    st.close()


def add_run(
    store: Store,
    experiment_id: int,
    *,
    status: str = "running",
    steps: int = 0,
    agents: tuple[str, ...] = ("writer", "editor"),
    episodes_per_step: int = 0,
    config: dict[str, Any] | None = None,
    reward: Callable[[int], float] = lambda step: 0.1 * step,
) -> int:
    """A run moved through the real state machine to ``status`` with ``steps`` logged steps."""
    config = config or dict(store.get_experiment(experiment_id).config)
    run = store.create_run(experiment_id, config, "cpu", total_steps=max(steps, 1) * 2, device="cpu")
    path = {"queued": [], "cancelled": ["cancelled"], "running": ["starting", "running"],
            "stopping": ["starting", "running", "stopping"],
            "succeeded": ["starting", "running", "succeeded"], "failed": ["starting", "running", "failed"],
            "stopped": ["starting", "running", "stopping", "stopped"]}[status]
    for index, state in enumerate(path):
        if state == "stopping":
            store.request_stop(run.id)
        else:
            store.transition(run.id, state, error="boom: a test failure" if state == "failed" else None)
        if state == "running":
            for step in range(1, steps + 1):
                metrics = {"train/reward_mean": reward(step), "turn_1/reward_mean": reward(step),
                           "turn_1/expected_return": 2 * reward(step)}
                for agent in agents:
                    metrics[f"agent/{agent}/loss"] = 1.0 / (step + 1)
                episodes = [
                    Episode(sample_index=k, split="train", item_index=k, turns=tuple(
                        TurnRecord(turn=1, agent_index=i, agent_name=agent, prompt=f"prompt of {agent} item {k}",
                                   completion=f"reply of {agent} at step {step}", reward=reward(step),
                                   ret=reward(step), advantage=0.5 - k)
                        for i, agent in enumerate(agents)))
                    for k in range(episodes_per_step)
                ]
                store.log_step(run.id, step, step * 4, metrics, episodes, wall_time=1.7e9 + step)
        del index
    return run.id


@pytest.fixture
def app(home: Path) -> Callable[..., AppTest]:
    """Run the dashboard headless on one page: ``app("runs", run=3)`` (query params optional)."""

    def start(page: str | None = None, **query: Any) -> AppTest:
        at = AppTest.from_file(MAIN, default_timeout=30)
        for key, value in query.items():
            at.query_params[key] = str(value)
        if page:
            at.switch_page(f"app_pages/{page}.py")
        return at.run()

    return start


def plotly_figures(at: AppTest) -> list[dict[str, Any]]:
    """The Plotly figures on the page, as dicts (``data``, ``layout``): those of ``st.plotly_chart``, then
    those of the live charts that append (``app.components.live_chart``, all in one frame), each the
    whole figure the frame holds (what the server recorded sending it: the first message, then only
    new points)."""
    import plotly.io.json as pio_json

    figures = [json.loads(el.proto.spec) for el in at.get("plotly_chart")]
    for el in at.get("component_instance"):
        if not el.proto.component_name.endswith(".live_chart"):
            continue
        for sent in json.loads(el.proto.json_args)["charts"]:
            figures.append(json.loads(pio_json.to_json_plotly(at.session_state[f"live_chart.{sent['chart']}"].spec)))
    return figures


@pytest.fixture
def figures() -> Callable[[AppTest], list[dict[str, Any]]]:
    """``figures(at)``: the Plotly figures an AppTest page drew."""
    return plotly_figures


@pytest.fixture
def seed(store: Store) -> Callable[..., int]:
    """``seed(experiment_id, status=..., steps=..., episodes_per_step=...)`` → run id (see ``add_run``)."""
    return lambda experiment_id, **kw: add_run(store, experiment_id, **kw)


@pytest.fixture
def experiment(store: Store) -> int:
    """An experiment with a valid two-agent config."""
    return store.create_experiment("demo", config=two_agent_config()).id


@pytest.fixture
def make_config() -> Callable[..., dict[str, Any]]:
    """``make_config(name, **trainer_overrides)``: a valid two-agent run config dict."""
    return two_agent_config
