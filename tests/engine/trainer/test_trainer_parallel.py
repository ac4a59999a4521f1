"""``parallel_training="mp"`` on CPU cores: agents sample and update in threads, each with its share
of torch's intra-op threads, and the run equals a sequential run with that many threads per agent."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import torch

from engine.models.tiny import build_tiny_model
from engine.trainer.parallel import map_agents, split_cpu_threads
from tests.engine.trainer.trainer_helpers import fast_config, make_trainer


def _final_weights(mode: str, threads: int) -> list[dict[str, torch.Tensor]]:
    m1, t1 = build_tiny_model("llama", "s", seed=0)
    m2, t2 = build_tiny_model("qwen2", "s", seed=1)
    extra = {"agent_devices": ["cpu", "cpu"]} if mode == "mp" else {}
    trainer = make_trainer(([m1, m2], [t1, t2]), fast_config(parallel_training=mode, max_steps=3, seed=5, **extra))
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        trainer.train()
    finally:
        torch.set_num_threads(before)
        trainer.close()
    return [{k: v.clone() for k, v in m.state_dict().items()} for m in (m1, m2)]


def test_mp_on_two_cores_equals_the_sequential_run_on_one_thread_each() -> None:
    parallel = _final_weights("mp", threads=2)  # split into one thread per agent
    sequential = _final_weights("none", threads=1)
    for par_state, seq_state in zip(parallel, sequential, strict=True):
        assert all(torch.equal(par_state[k], seq_state[k]) for k in seq_state)


def test_each_worker_computes_with_its_share_of_the_threads() -> None:
    agents = [SimpleNamespace(device=torch.device("cpu")) for _ in range(2)]
    before = torch.get_num_threads()
    torch.set_num_threads(4)
    try:
        with ThreadPoolExecutor(max_workers=2) as pool:
            seen = map_agents(lambda agent: torch.get_num_threads(), agents, pool)
            assert seen == [2, 2]
            assert torch.get_num_threads() == 4  # the caller's setting is back
            torch.set_num_threads(2)
            assert map_agents(lambda agent: torch.get_num_threads(), agents, pool) == [1, 1]  # follows changes
        assert map_agents(lambda agent: torch.get_num_threads(), agents, None) == [2, 2]  # no pool: untouched
    finally:
        torch.set_num_threads(before)


def test_concurrent_cpu_agents_share_the_intra_op_threads() -> None:
    before = torch.get_num_threads()
    torch.set_num_threads(4)
    try:
        with split_cpu_threads(2) as share:
            assert share == 2 and torch.get_num_threads() == 2
        assert torch.get_num_threads() == 4
        with split_cpu_threads(8) as share:
            assert share == 1  # never below one
        with split_cpu_threads(1) as share:
            assert share == 4 and torch.get_num_threads() == 4  # one agent keeps them all
    finally:
        torch.set_num_threads(before)
