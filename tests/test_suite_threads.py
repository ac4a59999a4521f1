"""The suite's own set-up: with two or more pytest-xdist processes each test process computes on one torch
thread, unless ``OMP_NUM_THREADS`` says otherwise; one process keeps torch's default."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import torch

from tests.conftest import THREADS_ENV, one_torch_thread_per_process


@pytest.fixture
def threads_restored() -> Iterator[None]:
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def test_two_test_processes_take_one_torch_thread_each(monkeypatch, threads_restored) -> None:
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "2")
    monkeypatch.delenv(THREADS_ENV, raising=False)
    torch.set_num_threads(2)
    one_torch_thread_per_process()
    assert os.environ[THREADS_ENV] == "1"  # inherited by the workers and servers a test starts
    assert torch.get_num_threads() == 1  # torch was imported before the variable was set


@pytest.mark.parametrize(("workers", "threads_env"), [("", None), ("1", None), ("2", "2")])
def test_one_process_or_a_chosen_thread_count_is_left_alone(monkeypatch, threads_restored, workers: str,
                                                            threads_env: str | None) -> None:
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", workers)
    if threads_env is None:
        monkeypatch.delenv(THREADS_ENV, raising=False)
    else:
        monkeypatch.setenv(THREADS_ENV, threads_env)
    torch.set_num_threads(2)
    one_torch_thread_per_process()
    assert os.environ.get(THREADS_ENV) == threads_env
    assert torch.get_num_threads() == 2
