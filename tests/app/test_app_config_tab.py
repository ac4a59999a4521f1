"""The run's Config tab: the settings its algorithm reads, the ones it does not read folded away."""

from __future__ import annotations

import yaml

from db.store import Store
from engine.schema.algorithms import unused_settings


def test_config_tab_shows_what_the_algorithm_reads_and_folds_the_rest(app, store: Store, experiment: int,
                                                                      seed) -> None:
    run_id = seed(experiment, status="succeeded", steps=1)
    at = app("run_detail", run=run_id, tab="Config")
    assert not at.exception
    unread = unused_settings("magrpo")
    assert "reward_model_name" in unread and "dpo_beta" in unread
    [read] = [yaml.safe_load(c.value) for c in at.code if c.value.startswith("name: demo")]  # what the algorithm reads
    assert read["name"] == "demo" and read["trainer"]["max_steps"] == 5
    assert not set(read["trainer"]) & set(unread)  # none of the ~45 settings MAGRPO never reads
    [folded] = [e for e in at.expander if "not read by magrpo" in e.label]
    assert folded.label == f"{len(unread)} settings not read by magrpo (at their defaults)"
    [rest] = [yaml.safe_load(c.value) for c in folded.code]
    assert sorted(rest["trainer"]) == sorted(unread)
