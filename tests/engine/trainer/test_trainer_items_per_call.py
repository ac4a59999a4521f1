"""How many dataset items one sampling call takes: ``items_per_step`` when set, else every item of
the step at once; the items per update do not depend on it."""

from __future__ import annotations

import pytest

import engine.sampling.sampler
from engine.models.tiny import build_tiny_model
from engine.sinks import MemorySink
from engine.trainer.core import items_per_call
from tests.engine.trainer.trainer_helpers import fast_config, make_trainer


@pytest.mark.parametrize(("items_per_step", "buffer", "samples_per_item", "expected"), [
    (None, 2, 1, 2),   # CoMLRL's default buffer, single turn: both items in one call
    (None, 8, 1, 8),
    (None, 2, 5, 1),   # two turns of K=4 aligned (1 + 4 nodes per item) fill a buffer of 2 with one item
    (None, 12, 5, 3),  # ceil(12 / 5)
    (1, 8, 1, 1),      # set: kept as it is
    (3, 2, 1, 3),
])
def test_items_per_call(items_per_step: int | None, buffer: int, samples_per_item: int, expected: int) -> None:
    assert items_per_call(items_per_step, buffer, samples_per_item) == expected


def _sampling_calls(monkeypatch: pytest.MonkeyPatch, **overrides) -> tuple[list[int], int]:
    prompts_per_call: list[int] = []
    original = engine.sampling.sampler.generate_completions

    def sample(model, tokenizer, prompts, *args, **kwargs):
        prompts_per_call.append(len(prompts))
        return original(model, tokenizer, prompts, *args, **kwargs)

    monkeypatch.setattr(engine.sampling.sampler, "generate_completions", sample)
    team = [build_tiny_model("llama", "xs", seed=0), build_tiny_model("llama", "xs", seed=1)]
    trainer = make_trainer(([m for m, _ in team], [t for _, t in team]),
                           fast_config(max_steps=2, rollout_buffer_size=3, parallel_training="none", **overrides))
    trainer.train(sink=MemorySink())
    return prompts_per_call, trainer.items_per_update


def test_by_default_a_step_samples_all_its_items_in_one_call_per_agent(monkeypatch: pytest.MonkeyPatch) -> None:
    calls, per_update = _sampling_calls(monkeypatch)
    assert per_update == 3 and calls == [3, 3] * 2  # 2 steps x 2 agents, each call 3 prompts


def test_one_item_per_step_samples_item_by_item_with_the_same_items_per_update(
        monkeypatch: pytest.MonkeyPatch) -> None:
    calls, per_update = _sampling_calls(monkeypatch, items_per_step=1)
    assert per_update == 3 and calls == [1] * 12  # 2 steps x 3 items x 2 agents
