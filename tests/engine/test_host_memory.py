"""Freed host memory is reused, not faulted in again (engine.trainer.host_memory).

Each case runs in a fresh interpreter: the policy is process-wide, and the page-fault counts must
not depend on what the test process allocated before.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

HOST_MEMORY = Path(__file__).resolve().parents[2] / "engine" / "trainer" / "host_memory.py"

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's; this C library has none")

# Like a training step, each round allocates, touches and frees a 64 MiB tensor while small objects
# come and go around it; reports the minor page faults of the last four of 16 rounds (the heap
# takes a few rounds to hold enough free blocks of that size: posix_memalign asks for a little
# more than a block freed at the same size).
PROBE = textwrap.dedent("""
    import importlib.util, json, resource, sys
    import torch

    # The module alone, by its file: importing the engine.trainer package would load the whole trainer
    # (transformers included, seconds per case); registered under its name, so a trainer built later
    # (the "trainer" case) uses this same module and its process-wide state.
    spec = importlib.util.spec_from_file_location("engine.trainer.host_memory", sys.argv[2])
    host_memory = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = host_memory
    spec.loader.exec_module(host_memory)

    def faults_of_round():
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        block = torch.empty(block_floats, dtype=torch.float32)
        block.fill_(1.0)
        small = [str(i) for i in range(100)]
        del block
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before, small

    action = sys.argv[1]
    block_floats = 16 * 1024 * 1024
    kept = host_memory.keep_freed_memory() if action in ("keep", "keep_then_release") else False
    if action == "keep_then_release":
        host_memory.release_freed_memory()
    if action == "turned_off":  # what a process owner does under COOPLAB_KEEP_FREED_MEMORY=0
        host_memory.set_policy(keep=False)
        kept = host_memory.keep_freed_memory()
    if action == "kept_then_turned_off":
        host_memory.keep_freed_memory()
        host_memory.set_policy(keep=False)
    if action == "trainer":
        from engine import MAGRPOConfig, MAGRPOTrainer
        from engine.models.tiny import build_tiny_model
        model, tok = build_tiny_model("llama", "xs", seed=0)
        MAGRPOTrainer(agents=[model], tokenizer=[tok], train_dataset=[{"prompt": "a"}],
                      reward_func=lambda c: [0.0], args=MAGRPOConfig(num_agents=1, num_turns=1, max_steps=1))
    if action == "keep_in_thread":  # agents sample and update in threads; 100 MiB > a thread arena's heap
        import threading
        kept = host_memory.keep_freed_memory()
        block_floats = 25 * 1024 * 1024
        rounds = []
        worker = threading.Thread(target=lambda: rounds.extend(faults_of_round()[0] for _ in range(16)))
        worker.start()
        worker.join()
    else:
        rounds = [faults_of_round()[0] for _ in range(16)]
    print(json.dumps({"kept": kept, "is_kept": host_memory.is_kept(), "faults": rounds[-4:]}))
""")
# Without the policy every round faults its block in again: 64 MiB of 4 KiB pages here, far fewer
# where transparent huge pages are "always" on, so the control only asks for a fault in each round.


def probe(action: str, **env: str) -> dict:
    run = subprocess.run([sys.executable, "-c", PROBE, action, str(HOST_MEMORY)], capture_output=True, text=True,
                         timeout=120, env={**os.environ, **env})
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_malloc_default_faults_a_freed_block_in_again() -> None:
    """The control: without the policy a 64 MiB block goes back to the kernel when freed."""
    out = probe("none")
    assert not out["is_kept"]
    assert min(out["faults"]) > 0


def test_kept_memory_is_reused_without_page_faults() -> None:
    out = probe("keep")
    assert out["kept"] and out["is_kept"]
    assert sum(out["faults"]) == 0


def test_release_restores_mallocs_defaults() -> None:
    out = probe("keep_then_release")
    assert not out["is_kept"]
    assert min(out["faults"]) > 0


def test_the_process_owner_can_turn_it_off() -> None:
    out = probe("turned_off")
    assert not out["kept"] and not out["is_kept"]
    assert min(out["faults"]) > 0


def test_turning_it_off_hands_back_what_was_kept() -> None:
    out = probe("kept_then_turned_off")
    assert not out["is_kept"]
    assert min(out["faults"]) > 0


def test_the_engine_reads_no_environment_variable() -> None:
    """``COOPLAB_KEEP_FREED_MEMORY`` is the job's and the CLI's setting (jobs.settings); the engine keeps its default."""
    out = probe("keep", COOPLAB_KEEP_FREED_MEMORY="0")
    assert out["kept"] and out["is_kept"]
    assert sum(out["faults"]) == 0


def test_a_trainer_with_an_agent_on_the_cpu_keeps_freed_memory() -> None:
    out = probe("trainer")
    assert out["is_kept"]
    assert sum(out["faults"]) == 0


def test_threads_reuse_freed_blocks_larger_than_a_thread_arena() -> None:
    out = probe("keep_in_thread")
    assert out["kept"] and out["is_kept"]
    assert sum(out["faults"]) == 0
