"""engine.comlrl: ``trainer.train_dataset = ds`` after construction, as CoMLRL allows, trains exactly as
the dataset passed to the constructor would."""

from __future__ import annotations

import pytest
import torch

from engine.comlrl.trainers.reinforce import MAGRPOConfig, MAGRPOTrainer
from engine.models.tiny import build_tiny_model

DATA = [{"prompt": "alpha"}, {"prompt": "beta"}]


def _trainer(**kwargs):
    pair = [build_tiny_model("llama", "xs", seed=s) for s in (0, 1)]
    args = MAGRPOConfig(num_turns=1, num_generations=2, max_new_tokens=3, rollout_buffer_size=1, num_train_epochs=1,
                        eval_interval=0, agent_devices="cpu", seed=0, max_steps=1, logging_steps=1000)
    return MAGRPOTrainer(agents=[m for m, _ in pair], tokenizer=[t for _, t in pair],
                         reward_func=lambda a, b: [float(len(a[0]) - len(b[0]))], args=args, **kwargs)


@pytest.mark.slow  # trains two tiny teams for a step each
def test_a_dataset_set_later_trains_as_one_given_to_the_constructor() -> None:
    given = _trainer(train_dataset=DATA)
    given.train()
    later = _trainer()
    models = later.agents
    later.train_dataset = DATA
    later.train()
    assert later.agents == models and later.step == given.step == 1  # the same model objects, trained
    for a, b in zip(given.agents, later.agents, strict=True):
        assert all(torch.equal(x, y) for x, y in zip(a.parameters(), b.parameters(), strict=True))
    later.train_dataset = list(DATA)
    with pytest.raises(ValueError, match="set after this trainer trained"):
        later.train()
