"""``parallel_training="mp"`` on CPU cores: agents sample and update in threads, with the same results
as one after another, and torch's intra-op threads are shared out instead of oversubscribed."""

from __future__ import annotations

import torch

from engine.models.tiny import build_tiny_model
from engine.trainer.parallel import split_cpu_threads
from tests.engine.trainer.trainer_helpers import fast_config, make_trainer


def _fresh_team():
    m1, t1 = build_tiny_model("llama", "xs", seed=0)
    m2, t2 = build_tiny_model("qwen2", "xs", seed=1)
    return [m1, m2], [t1, t2]


def test_mp_on_cpu_trains_exactly_like_the_sequential_run() -> None:
    before = torch.get_num_threads()
    torch.set_num_threads(1)  # the same kernels either way: one intra-op thread per agent
    try:
        finals = []
        for mode in ("none", "mp"):
            team = _fresh_team()
            extra = {"agent_devices": ["cpu", "cpu"]} if mode == "mp" else {}
            trainer = make_trainer(team, fast_config(parallel_training=mode, max_steps=3, seed=5, **extra))
            try:
                trainer.train()
            finally:
                trainer.close()
            finals.append([{k: v.clone() for k, v in m.state_dict().items()} for m in team[0]])
    finally:
        torch.set_num_threads(before)
    sequential, parallel = finals
    for seq_state, par_state in zip(sequential, parallel, strict=True):
        assert all(torch.equal(seq_state[k], par_state[k]) for k in seq_state)


def test_concurrent_cpu_agents_share_the_intra_op_threads() -> None:
    before = torch.get_num_threads()
    torch.set_num_threads(4)
    try:
        with split_cpu_threads(2):
            assert torch.get_num_threads() == 2
        assert torch.get_num_threads() == 4
        with split_cpu_threads(8):
            assert torch.get_num_threads() == 1  # never below one
        with split_cpu_threads(1):
            assert torch.get_num_threads() == 4  # one agent keeps them all
    finally:
        torch.set_num_threads(before)
