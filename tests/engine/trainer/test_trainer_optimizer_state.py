"""AdamW's state exists when the trainer is built, and training with it equals torch's lazy allocation bit for bit."""

from __future__ import annotations

import pytest
import torch

from engine.models.tiny import build_tiny_model
from engine.trainer.setup import allocate_adam_state
from tests.engine.trainer.trainer_helpers import fast_config, make_trainer, snapshot


def _team():
    m1, t1 = build_tiny_model("llama", "xs", seed=0)
    m2, t2 = build_tiny_model("qwen2", "xs", seed=1)
    return [m1, m2], [t1, t2]


def test_state_is_allocated_at_build_and_training_equals_lazy_allocation() -> None:
    eager = make_trainer(_team(), fast_config(max_steps=2))
    for agent in eager.agents:
        params = agent.trainable_parameters()
        assert set(agent.optimizer.state) == set(params)
        for p in params:
            state = agent.optimizer.state[p]
            assert state["exp_avg"].shape == p.shape and not state["exp_avg"].any() and float(state["step"]) == 0
    lazy = make_trainer(_team(), fast_config(max_steps=2))
    for agent in lazy.agents:
        agent.optimizer.state.clear()  # what torch does by itself: state made in the first step()
    eager.train()
    lazy.train()
    for a, b in zip(eager.agents, lazy.agents, strict=True):
        for (name, x), y in zip(snapshot(a.model).items(), snapshot(b.model).values(), strict=True):
            assert torch.equal(x, y), name
        for p, q in zip(a.trainable_parameters(), b.trainable_parameters(), strict=True):
            sa, sb = a.optimizer.state[p], b.optimizer.state[q]
            assert sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)
            assert sa["step"].dtype == sb["step"].dtype and sa["step"].device == sb["step"].device


@pytest.mark.parametrize("kwargs", [{}, {"fused": True}, {"amsgrad": True}, {"foreach": True}])
def test_allocated_state_matches_torchs_own_for_every_variant(kwargs) -> None:
    weights = [torch.nn.Parameter(torch.randn(3, 2)), torch.nn.Parameter(torch.randn(4))]
    lazy = torch.optim.AdamW(weights, lr=0.1, **kwargs)
    for w in weights:
        w.grad = torch.ones_like(w)
    lazy.step()  # torch's own state after one step, to compare structure with
    eager = torch.optim.AdamW([torch.nn.Parameter(w.detach().clone()) for w in weights], lr=0.1, **kwargs)
    allocate_adam_state(eager)
    for w, e in zip(weights, eager.param_groups[0]["params"], strict=True):
        theirs, ours = lazy.state[w], eager.state[e]
        assert theirs.keys() == ours.keys()
        assert all(theirs[k].dtype == ours[k].dtype and theirs[k].shape == ours[k].shape
                   and theirs[k].device == ours[k].device for k in theirs)
    with pytest.raises(TypeError, match="expected Adam or AdamW, got SGD"):
        allocate_adam_state(torch.optim.SGD(weights, lr=0.1))
