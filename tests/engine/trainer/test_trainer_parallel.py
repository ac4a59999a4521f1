"""Agents in threads on CPU cores (``parallel_training="mp"``, and ``"auto"`` when every agent gets a
core): each computes with its share of torch's intra-op threads, and the run equals a sequential run
with that many threads per agent."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import pytest
import torch

from engine.models.tiny import build_tiny_model
from engine.trainer.agents import map_agents
from engine.trainer.threads import (
    AgentThreads,
    agent_threads,
    draws_while_training,
    runs_concurrently,
    split_cpu_threads,
)
from tests.engine.trainer.trainer_helpers import fast_config, make_trainer


def _final_weights(mode: str, threads: int, *, concurrent: bool | None = None,
                   train: bool = True) -> list[dict[str, torch.Tensor]]:
    m1, t1 = build_tiny_model("llama", "s", seed=0)
    m2, t2 = build_tiny_model("qwen2", "s", seed=1)
    extra = {"agent_devices": ["cpu", "cpu"]} if mode == "mp" else {}
    before = torch.get_num_threads()
    torch.set_num_threads(threads)  # before the trainer: "auto" decides on the threads it is built with
    try:
        trainer = make_trainer(([m1, m2], [t1, t2]), fast_config(parallel_training=mode, max_steps=3, seed=5,
                                                                  **extra))
        if concurrent is not None:
            assert (trainer._pool is not None) is concurrent
        try:
            if train:
                trainer.train()
        finally:
            trainer.close()
    finally:
        torch.set_num_threads(before)
    return [{k: v.clone() for k, v in m.state_dict().items()} for m in (m1, m2)]


def test_mp_on_two_cores_equals_the_sequential_run_on_one_thread_each() -> None:
    parallel = _final_weights("mp", threads=2)  # split into one thread per agent
    sequential = _final_weights("none", threads=1)
    for par_state, seq_state in zip(parallel, sequential, strict=True):
        assert all(torch.equal(par_state[k], seq_state[k]) for k in seq_state)


def test_auto_runs_two_cpu_agents_in_threads_on_two_cores_and_equals_mp() -> None:
    auto = _final_weights("auto", threads=2, concurrent=True)
    mp = _final_weights("mp", threads=2, concurrent=True)
    for auto_state, mp_state in zip(auto, mp, strict=True):
        assert all(torch.equal(auto_state[k], mp_state[k]) for k in mp_state)


def test_auto_on_one_core_runs_the_agents_one_after_another() -> None:
    auto = _final_weights("auto", threads=1, concurrent=False)
    sequential = _final_weights("none", threads=1, concurrent=False)
    for auto_state, seq_state in zip(auto, sequential, strict=True):
        assert all(torch.equal(auto_state[k], seq_state[k]) for k in seq_state)
    # none never starts threads, even with the threads for which auto would (its pool is None)
    _final_weights("none", threads=2, concurrent=False, train=False)


@pytest.mark.parametrize(("mode", "devices", "threads", "expected"), [
    ("auto", ["cpu", "cpu"], 2, True),           # a core per agent
    ("auto", ["cpu", "cpu"], 1, False),          # one core: one after another
    ("auto", ["cpu", "cpu", "cpu"], 2, False),   # three CPU agents, two threads
    ("auto", ["cuda:0", "cuda:1"], 1, True),     # a GPU each (CPU threads do not matter)
    ("auto", ["cuda:0", "cuda:0"], 8, False),    # two agents on one GPU queue on it anyway
    ("auto", ["cuda:0", "cpu"], 1, True),        # one GPU agent, one CPU agent with the CPU to itself
    ("auto", ["cpu"], 4, False),                 # one agent: nothing to overlap
    ("none", ["cpu", "cpu"], 4, False),
    ("none", ["cuda:0", "cuda:1"], 1, False),
    ("mp", ["cuda:0", "cuda:0"], 1, True),       # mp is the user's explicit choice
    ("mp", ["cpu"], 4, False),
])
def test_when_a_team_runs_its_agents_concurrently(mode: str, devices: list[str], threads: int,
                                                  expected: bool) -> None:
    assert runs_concurrently(mode, [torch.device(d) for d in devices], cpu_threads=threads) is expected


def test_dropout_keeps_auto_agents_in_turn_so_seeded_runs_repeat() -> None:
    llama, _ = build_tiny_model("llama", "xs", seed=0)
    gpt2, _ = build_tiny_model("gpt2", "xs", seed=1)  # GPT2Config's dropout defaults: 0.1
    assert not draws_while_training(llama) and draws_while_training(gpt2)
    cpu = [torch.device("cpu")] * 2
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        assert agent_threads("auto", cpu, [llama, gpt2]) is None
        with agent_threads("mp", cpu, [llama, gpt2]) as mp:  # the user's explicit choice stands
            assert mp is not None and not mp.auto
        with agent_threads("auto", cpu, [llama, build_tiny_model("llama", "xs", seed=2)[0]]) as auto:
            assert auto is not None and auto.auto
        assert agent_threads("auto", cpu, [llama, llama]) is None  # one model object: always in turn
        assert agent_threads("mp", cpu, [llama, llama]) is None
    finally:
        torch.set_num_threads(before)


def test_what_counts_as_drawing_while_training() -> None:
    llama, _ = build_tiny_model("llama", "xs", seed=0)
    llama.model.layers[0].mlp.add_module("drop", torch.nn.Dropout(0.0))
    assert not draws_while_training(llama)  # p = 0 draws nothing
    llama.model.layers[0].mlp.drop.p = 0.05
    assert draws_while_training(llama)
    other, _ = build_tiny_model("llama", "xs", seed=0)
    other.config.attention_dropout = 0.1  # applied inside attention, not as a module
    assert draws_while_training(other)


def test_an_auto_pool_steps_aside_when_the_threads_drop_below_the_cpu_agents() -> None:
    agents = [SimpleNamespace(device=torch.device("cpu")) for _ in range(2)]
    before = torch.get_num_threads()
    try:
        with AgentThreads(2, auto=True) as auto, AgentThreads(2, auto=False) as mp:
            torch.set_num_threads(1)
            names = map_agents(lambda agent: threading.current_thread().name, agents, auto)
            assert names == [threading.current_thread().name] * 2  # ran in the caller, one after another
            assert all(n.startswith("agent") for n in map_agents(lambda a: threading.current_thread().name,
                                                                 agents, mp))  # mp keeps its threads
            torch.set_num_threads(2)
            assert all(n.startswith("agent") for n in map_agents(lambda a: threading.current_thread().name,
                                                                 agents, auto))
    finally:
        torch.set_num_threads(before)


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
