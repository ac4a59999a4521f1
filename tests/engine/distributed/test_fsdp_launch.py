"""An fsdp run on gloo ranks, launched as docs/gpu.md describes. Two torchrun launches of one rank each,
meeting at one c10d rendezvous on this machine (two "nodes", the several-node recipe), train two
heterogeneous tiny agents two steps (with the KL to each agent's reference, sharded alike, in the reward,
and the gradient clipped at 1.0); the final weights and metrics equal the same run in one process
(:class:`engine.distributed.trainer.FSDPMAGRPOTrainer` without a process group), and the ranks' sharded
checkpoint of step 1 resumes in one process and, under ``cooplab train --resume`` (torchrun --standalone,
:mod:`cooplab.fsdp_launch`), on three ranks to the same step 2. ``cooplab train`` of two turns on two ranks
equals the one-process run too; a rank killed mid-run ends the launch with a failure naming the rank.
Every launch pays for its ranks importing torch and building the team, so the tests share them: one
launch serves every check that its outputs can answer."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import yaml
from typer.testing import CliRunner

from tests.engine.test_engine_cmd_train import _app

CONFIG = {
    "name": "fsdp-run",
    "agents": [{"name": "first", "model": "builtin:tiny-llama"}, {"name": "second", "model": "builtin:tiny-qwen2"}],
    "task": {"name": "quickstart", "params": {"num_items": 4, "eval_items": 1}},
    "trainer": {"max_steps": 2, "num_generations": 2, "max_new_tokens": 4, "rollout_buffer_size": 4,
                "train_batch_size": 4, "num_turns": 1, "eval_interval": 0, "logging_steps": 1, "seed": 3,
                "agent_learning_rate": 1e-2, "checkpoint_interval": 1,
                "reference_kl_enabled": True, "reference_kl_coef": 0.5,  # the KL to a sharded reference, in the reward
                "parallel_training": "fsdp", "fsdp_ranks": 2},
}


@pytest.fixture
def run_yaml(tmp_path, monkeypatch):
    monkeypatch.setenv("COOPLAB_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("COOPLAB_COLLECTIVE_TIMEOUT_S", "60")
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(CONFIG), encoding="utf-8")
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def two_nodes(tmp_path_factory):
    """docs/gpu.md's several-node recipe, run twice at once on this machine as two "nodes" of one gloo rank
    each: ``torch.distributed.run --nnodes=2 --nproc_per_node=1 --rdzv_backend=c10d
    --rdzv_endpoint=HOST:PORT --rdzv_id=ID -m cooplab.fsdp_rank RUN.yaml OUT``, the same config file and
    output folder given to both. Returns the output folder and each launch's output; both exited 0."""
    folder = tmp_path_factory.mktemp("two-nodes")
    out, port = folder / "out", _free_port()
    path = folder / "run.yaml"
    path.write_text(yaml.safe_dump(CONFIG), encoding="utf-8")
    command = [sys.executable, "-m", "torch.distributed.run", "--nnodes=2", "--nproc_per_node=1",
               "--rdzv_backend=c10d", f"--rdzv_endpoint=127.0.0.1:{port}", "--rdzv_id=two-nodes",
               "-m", "cooplab.fsdp_rank", str(path), str(out)]
    env = {**os.environ, "COOPLAB_HOME": str(folder / "home"), "COOPLAB_COLLECTIVE_TIMEOUT_S": "60"}
    nodes = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              env=env, cwd=Path(__file__).parents[3]) for _ in range(2)]
    outputs = []
    try:
        for node in nodes:
            outputs.append(node.communicate(timeout=240)[0])
    finally:
        for node in nodes:  # each rank dies with its torchrun (cooplab.fsdp_rank)
            if node.poll() is None:
                node.kill()
                node.wait()
    assert [node.returncode for node in nodes] == [0, 0], "\n".join(o[-3000:] for o in outputs)
    return out, outputs


def _metrics(folder) -> list[dict]:
    return [json.loads(line)["metrics"] for line in (folder / "metrics.jsonl").read_text().splitlines()]


def _max_delta(got: dict, want: dict) -> float:
    return max(float((got[n] - want[n]).abs().max()) for n in want)


def _single_process(config, folder, resume_from=None):
    """:data:`CONFIG` trained in this process, with no process group: one rank, unsharded."""
    from engine.build.run import run_training
    from engine.sinks import JsonlSink

    config = config.model_copy(update={"trainer": config.trainer.model_copy(update={"fsdp_ranks": 1})})
    result = run_training(config, output_dir=folder, sink=JsonlSink(folder), resume_from=resume_from)
    assert (result.status, result.step) == ("completed", 2)


def test_two_ranks_at_one_rendezvous_equal_the_single_process_run(run_yaml, tmp_path, two_nodes):
    from engine.distributed.trainer import final_weights
    from engine.schema.run_config import load_run_config

    two, outputs = two_nodes
    # the rendezvous made one world of two ranks, one on each "node"; rank 0 wrote the outputs
    assert sorted(o.count("[rank 0] completed: step 2") for o in outputs) == [0, 1], outputs
    assert all(("[rank 0] " in o) != ("[rank 1] " in o) for o in outputs)

    one = tmp_path / "one"
    _single_process(load_run_config(run_yaml), one)
    before = final_weights(one / "checkpoints" / "checkpoint-1")
    for a, (got, want) in enumerate(zip(final_weights(two / "checkpoints" / "checkpoint-2"),
                                         final_weights(one / "checkpoints" / "checkpoint-2"), strict=True)):
        moved = _max_delta(want, before[a])  # by the second step
        delta = _max_delta(got, want)
        print(f"agent {a}: max |delta| {delta:.2g} after the second step moved it by {moved:.2g}")
        assert moved > 1e-3 and delta < 1e-4, (a, moved, delta)  # 2.2e-6 and 3.8e-6 seen; AdamW steps of 1e-2
    # rank 0 reported the whole step (both ranks' joint actions), once; the other rank wrote no reports
    got, want = _metrics(two), _metrics(one)
    assert [m["perf/ranks"] for m in got] == [2.0, 2.0]
    for g, w in zip(got, want, strict=True):
        assert g["train/reward_mean"] == w["train/reward_mean"]
        assert abs(g["agent/first/loss"] - w["agent/first/loss"]) < 1e-5
        for name in ("first", "second"):  # the whole gradient's norm over both ranks, before clipping at 1.0
            for key in (f"agent/{name}/grad_norm", f"agent/{name}/kl"):  # and the step's mean KL, both ranks'
                print(f"{key}: two ranks {g[key]:.6g}, one process {w[key]:.6g}")
                assert g[key] == pytest.approx(w[key], rel=1e-4, abs=1e-9)
    # the reference is the agent as it started: no KL at the first step, some once the agents moved
    assert want[0]["agent/second/kl"] == 0.0 and want[1]["agent/second/kl"] > 1e-6
    assert (two / "transcripts.jsonl").read_text().strip()
    assert not (two / ".ranks" / "rank1" / "metrics.jsonl").exists()
    assert (two / "model" / "agent_1" / "model.safetensors").is_file()

    # the checkpoints are sharded: each rank wrote its own shards (about half the bytes each), nothing whole
    shards = sorted((two / "checkpoints" / "checkpoint-2" / "dcp").glob("*.distcp"))
    assert [p.name for p in shards] == ["__0_0.distcp", "__1_0.distcp"]
    sizes = [p.stat().st_size for p in shards]
    print(f"shard bytes per rank: {sizes}")
    assert max(sizes) < 0.6 * sum(sizes)


def test_the_ranks_checkpoint_resumes_in_one_process_and_on_three_ranks(run_yaml, tmp_path, two_nodes):
    """The two ranks' checkpoint of step 1 resumes in one process, and its step 2 equals the ranks' step 2
    (the AdamW moments came along: a fresh optimizer's second step would differ by about the learning
    rate); and on three ranks under ``cooplab train --resume`` (torchrun --standalone on this machine), where
    DCP reshards the two ranks' shards into thirds."""
    from engine.distributed.trainer import final_weights
    from engine.schema.run_config import load_run_config

    two, _ = two_nodes
    ranks = final_weights(two / "checkpoints" / "checkpoint-2")
    one = tmp_path / "resumed"
    _single_process(load_run_config(run_yaml), one, resume_from=two / "checkpoints" / "checkpoint-1")
    for a, (got, want) in enumerate(zip(final_weights(one / "checkpoints" / "checkpoint-2"), ranks, strict=True)):
        delta = _max_delta(got, want)
        print(f"agent {a}: resumed at world size 1 from world size 2, max |delta| {delta:.2g} after step 2")
        assert delta < 1e-4, (a, delta)
    three_yaml = tmp_path / "three.yaml"
    three_yaml.write_text(yaml.safe_dump({**CONFIG, "trainer": {**CONFIG["trainer"], "fsdp_ranks": 3}}))
    result = CliRunner().invoke(_app(), ["train", str(three_yaml), "--output", str(tmp_path / "three"),
                                         "--resume", str(two / "checkpoints" / "checkpoint-1")])
    assert result.exit_code == 0, result.output[-3000:]
    assert "torchrun --standalone --nproc_per_node=3" in result.output
    assert "[rank 2] " in result.output and "[rank 0] completed: step 2" in result.output
    for a, (got, want) in enumerate(zip(final_weights(tmp_path / "three" / "checkpoints" / "checkpoint-2"), ranks,
                                        strict=True)):
        delta = _max_delta(got, want)
        print(f"agent {a}: resumed at world size 3 from world size 2, max |delta| {delta:.2g} after step 2")
        assert delta < 1e-4, (a, delta)


@pytest.mark.slow
def test_two_turns_on_two_ranks_equal_the_single_process_run(tmp_path, monkeypatch):
    """``num_turns: 2`` under fsdp: every rank grows its items' trees through both turns (each node of the
    second turn seeded by its item, turn and place, not by the rank) and takes one optimizer step per
    agent per turn, as the MAGRPO trainer's mini-batches never mix turns; the weights and metrics equal
    the same run in one process. The task is the quickstart with a revise-your-answer transition
    (:mod:`tests.engine.distributed.turn_tasks`, allowed as an operator allows a task module). The launch is
    ``cooplab train``'s of one node (torchrun --standalone, two ranks): every rank's lines come prefixed and
    only rank 0 reports."""
    import safetensors.torch

    from engine.build.run import run_training
    from engine.schema.run_config import load_run_config
    from engine.sinks import JsonlSink
    from jobs.settings import get_settings, operator_permissions

    module = "tests.engine.distributed.turn_tasks"
    monkeypatch.setenv("COOPLAB_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("COOPLAB_COLLECTIVE_TIMEOUT_S", "60")
    monkeypatch.setenv("COOPLAB_TASK_MODULES", module)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(Path(__file__).parents[3]),
                                                      *filter(None, [os.environ.get("PYTHONPATH")])]))
    turns = {**CONFIG, "task": {"name": f"{module}:quickstart_turns", "params": {"num_items": 4}},
             "trainer": {**CONFIG["trainer"], "num_turns": 2, "external_prompt_passthrough": True,
                         "rollout_buffer_size": 12, "train_batch_size": 8, "checkpoint_interval": 0,
                         "reference_kl_enabled": False}}
    path = tmp_path / "turns.yaml"
    path.write_text(yaml.safe_dump(turns), encoding="utf-8")
    permissions = operator_permissions(get_settings(), os.environ)
    config = load_run_config(path, task_modules=permissions.task_modules)
    config = config.model_copy(update={"trainer": config.trainer.model_copy(update={"fsdp_ranks": 1})})
    one = tmp_path / "one"
    assert run_training(config, output_dir=one, sink=JsonlSink(one), permissions=permissions).step == 2
    two = tmp_path / "two"
    result = CliRunner().invoke(_app(), ["train", str(path), "--output", str(two)])
    assert result.exit_code == 0, result.output[-3000:]
    assert "torchrun --standalone --nproc_per_node=2" in result.output
    assert "[rank 1] " in result.output and "[rank 0] completed: step 2" in result.output
    assert not (two / ".ranks" / "rank1" / "metrics.jsonl").exists()
    for a in range(2):
        got, want = (safetensors.torch.load_file(folder / "model" / f"agent_{a}" / "model.safetensors")
                     for folder in (two, one))
        delta = max(float((got[n] - want[n]).abs().max()) for n in want)
        print(f"agent {a}: two turns on two ranks against one process, max |delta| {delta:.2g}")
        assert delta < 1e-4, (a, delta)  # 3.4e-6 and 9.0e-6 seen; AdamW steps of 1e-2, two per step
    for g, w in zip(_metrics(two), _metrics(one), strict=True):
        assert g["turn_2/reward_mean"] == w["turn_2/reward_mean"] and g["train/return_mean"] == w["train/return_mean"]
        for name in ("first", "second"):
            assert g[f"agent/{name}/grad_norm"] == pytest.approx(w[f"agent/{name}/grad_norm"], rel=1e-4)
            assert g[f"agent/{name}/loss"] == pytest.approx(w[f"agent/{name}/loss"], abs=1e-5)


def test_a_killed_rank_fails_the_launch_naming_it(run_yaml, tmp_path, monkeypatch):
    monkeypatch.setenv("COOPLAB_FSDP_FAULT", "1:0:kill")  # rank 1 kills itself before its first step
    started = time.monotonic()
    result = CliRunner().invoke(_app(), ["train", str(run_yaml), "--output", str(tmp_path / "out")])
    elapsed = time.monotonic() - started
    assert result.exit_code == 1, result.output
    assert "failed: rank 1 failed: exit code -9" in result.output, result.output[-3000:]
    assert elapsed < 240
    print(f"killed rank: the launch failed after {elapsed:.1f} s")
    out = str(tmp_path / "out")
    left = [p.pid for p in psutil.process_iter() if _cmdline_has(p, out)]
    assert not left, f"processes of the launch left behind: {left}"  # torchrun stopped rank 0, then exited


def _cmdline_has(proc, text: str) -> bool:
    try:
        return any(text in arg for arg in proc.cmdline())
    except psutil.Error:
        return False


FROZEN_REPORT = """\
Failures:
[1]:
  time      : 2026-12-06_22:57:55
  rank      : 1 (local_rank: 1)
  exitcode  : -9 (pid: 23186)  (SIGKILL)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 23186
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-12-06_22:57:14
  rank      : 0 (local_rank: 0)
  exitcode  : 1 (pid: 23182)
  error_file: /tmp/torchelastic_x/error.json
  traceback : Traceback (most recent call last):
    File "/work/main/engine/distributed/sink.py", line 48, in should_stop
      dist.broadcast_object_list(answer, src=0)
      ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  RuntimeError: [gloo/transport/tcp/unbound_buffer.cc:129] Timed out waiting 10000ms for send operation to complete

============================================================"""


def test_the_report_of_a_frozen_rank_names_the_timeout_and_the_rank_stopped_after_it():
    """torchrun's report when rank 1 was frozen (SIGSTOP, COOPLAB_FSDP_FAULT=1:1:freeze) under a 10 s
    collective timeout, as seen on this machine: rank 0's collective timed out first, then torchrun
    killed the frozen rank 1."""
    from cooplab.fsdp_launch import failure_of

    rank, cause = failure_of(FROZEN_REPORT.splitlines())
    assert rank == 0
    assert cause.startswith("exit code 1 (RuntimeError: ") and "Timed out waiting 10000ms" in cause
    assert "a collective timed out" in cause and cause.endswith("then rank 1 exit code -9")
