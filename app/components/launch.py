"""Launch controls shared by the Experiments and Runs pages: device, seed and how many runs.

Every run gets its own seed by default (drawn at launch and stored in the run's config, so it is
recorded and reproducible); "same seed as run #N" repeats an earlier run exactly, and "the config's
seed" uses the one written in the experiment. Launching several runs at once gives the same config
with different seeds: they group together on the Compare page (mean and band).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import streamlit as st

from app import context, control
from app.escape import md_code, md_message
from app.seedgroups import seed_of
from db.store import Store
from engine.schema.run_config import RunConfig

MAX_RUNS = 10


@dataclass(frozen=True)
class LaunchChoice:
    device: str
    seed: int | None  # None: a new random seed for each run
    count: int


def launch_options(store: Store, experiment_id: int, config: dict[str, Any], *, key: str,
                   device: str | None = None) -> LaunchChoice:
    """Device (unless given), seed and count widgets (call inside a container or popover)."""
    if device is None:
        device = st.selectbox("device", context.devices(store), key=f"{key}_device")
    options: dict[str, tuple[str, int | None]] = {"new": ("a new random seed for each run", None)}
    last = store.list_runs(experiment_id, limit=1)
    last_seed = seed_of(last[0].config) if last else None
    if last and last_seed is not None:
        options["last"] = (f"the same seed as run #{last[0].id} ({last_seed})", last_seed)
    config_seed = seed_of(config)
    if config_seed is not None:
        options["config"] = (f"the experiment's seed ({config_seed})", config_seed)
    mode = st.selectbox("seed", list(options), key=f"{key}_seed", format_func=lambda m: options[m][0],
                        help="A run's seed is stored in its config (trainer.seed) and shown on its page; runs "
                             "that differ only by seed group together on the Compare page.")
    count = st.number_input("runs", min_value=1, max_value=MAX_RUNS, value=1, step=1, key=f"{key}_count",
                            help="Launch several runs of this config at once (with new seeds: one per run).")
    return LaunchChoice(device=device, seed=options[mode][1], count=int(count))


def launch_runs(config: RunConfig | dict[str, Any], experiment_id: int, choice: LaunchChoice) -> list[int]:
    """Queue ``choice.count`` runs of ``config`` (a validated config is not parsed again); returns their
    ids (raises ``control.ControlError``)."""
    return [control.launch(config, experiment_id=experiment_id, device=choice.device, seed=choice.seed)
            for _ in range(choice.count)]


def launched_message(run_ids: list[int], device: str) -> str:
    """What a toast or success box says after a launch (markdown: the device, a worker's name, as code),
    and, when the broker could not take the runs yet (``jobs.client.QueuedRun.unsent``), why: they stay
    queued and are sent when it answers."""
    if len(run_ids) == 1:
        said = f"Queued run #{run_ids[0]} on {md_code(device)}."
    else:
        said = f"Queued runs {', '.join(f'#{i}' for i in run_ids)} on {md_code(device)}."
    unsent = next((note for note in (getattr(i, "unsent", None) for i in run_ids) if note), None)
    return f"{said} Not sent yet: {md_message(unsent)}" if unsent else said
