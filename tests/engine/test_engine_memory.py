"""The memory accounting of FSDP2 training (:mod:`engine.schema.memory`): counts and bytes computed by hand,
the real shapes' parameter counts, docs/gpu.md's table written from the code, and pre-flight's refusal."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.schema.budget import RunLimits
from engine.schema.memory import (
    SHAPES,
    Activations,
    ModelShape,
    activation_bytes,
    gathered_bytes,
    memory_problems,
    memory_table,
    rank_memory,
    reference_bytes,
    shape_from_config,
    state_bytes,
)
from engine.schema.preflight import preflight_problems
from engine.schema.run_config import parse_run_config

# vocab 10, hidden 4, MLP 8, 2 layers, 2 heads / 1 KV head (head dim 2, KV width 2), tied, no biases:
# a layer = q 16 + k 8 + v 8 + o 16 + MLP 3*4*8 = 96 + norms 8 = 152; root = 10*4 + 4 = 44; P = 44 + 2*152 = 348
SMALL = ModelShape(vocab=10, hidden=4, intermediate=8, layers=2, heads=2, kv_heads=1, tied=True, qkv_bias=False)


def test_parameter_counts_by_hand():
    assert (SMALL.layer_parameters(), SMALL.root_parameters(), SMALL.parameters()) == (152, 44, 348)
    biased = ModelShape(vocab=10, hidden=4, intermediate=8, layers=2, heads=2, kv_heads=1, tied=False, qkv_bias=True)
    assert biased.layer_parameters() == 152 + 4 + 2 + 2  # q, k, v biases
    assert biased.root_parameters() == 84  # embeddings and an untied head: 2 * 40 + norm 4


def test_real_shapes_by_hand_and_as_bench_builds_them():
    # Qwen2.5-0.5B: a layer = q 896*896+896 + k,v 2*(896*128+128) + o 896*896 + MLP 3*896*4864 + norms 1792
    assert SHAPES["qwen2.5-0.5b"].layer_parameters() == 14_912_384
    assert SHAPES["qwen2.5-0.5b"].parameters() == 24 * 14_912_384 + 151_936 * 896 + 896 == 494_032_768
    assert SHAPES["qwen2.5-1.5b"].parameters() == 1_543_714_304
    assert round(SHAPES["qwen2.5-3b"].parameters() / 1e6) == 3086
    assert round(SHAPES["qwen2.5-7b"].parameters() / 1e6) == 7616  # Qwen2.5-7B's published 7.61 B
    from bench.shapes import SHAPES as BENCH

    for name in ("qwen2.5-0.5b", "qwen2.5-1.5b", "qwen2.5-3b"):
        assert shape_from_config({**BENCH[name], "model_type": "qwen2"}) == SHAPES[name]


def test_states_are_sixteen_bytes_per_parameter_sharded():
    assert state_bytes(348, 1) == 16 * 348
    assert state_bytes(348, 2) == 16 * 174
    assert state_bytes(348, 3) == 16 * 116
    assert state_bytes(349, 2) == 16 * 175  # the larger shard
    with pytest.raises(ValueError):
        state_bytes(348, 0)


def test_gathered_and_activations_by_hand():
    # root 44 x (bf16 2 + fp32 reduce 4) + two gathered layers 2 x 152 x 2 + one layer's fp32 gradients 152 x 4
    assert gathered_bytes(SMALL) == 264 + 608 + 608
    assert gathered_bytes(SMALL, mixed_precision=False) == 44 * 8 + 2 * 152 * 4 + 152 * 4
    # batch 1, seq 2, hidden 4, 2 heads: a layer 2*1*4*34 + 5*2*2*2*1 = 272 + 40; logits 2*1*10*(2+4) = 120
    full_layer, logits = 312, 120
    assert activation_bytes(SMALL, Activations(1, 2, checkpointing=False)) == 2 * full_layer + logits
    assert activation_bytes(SMALL, Activations(1, 2)) == 2 * (2 * 1 * 4 * 2) + full_layer + logits


def test_offload_moves_the_states_to_the_host():
    on = rank_memory(SMALL, 2)
    off = rank_memory(SMALL, 2, offload=True)
    assert on.gpu == 16 * 174 + 1480 and on.host == 0
    assert off.gpu == 1480 and off.host == 16 * 174


def test_a_reference_sharded_like_its_agent_is_counted_per_rank_by_hand(tmp_path):
    # P = 348: a float32 reference on 2 ranks holds 4 x 174 bytes per rank, on 3 ranks 4 x 116
    assert (reference_bytes(348, 2, 4), reference_bytes(348, 3, 4), reference_bytes(349, 2, 2)) == (696, 464, 350)
    on = rank_memory(SMALL, 2, reference_weight_bytes=4)
    assert (on.reference, on.gpu, on.host) == (696, 2784 + 696 + 1480, 0)
    off = rank_memory(SMALL, 2, offload=True, reference_weight_bytes=4)  # offloaded with the agent's states
    assert (off.gpu, off.host) == (1480, 2784 + 696)
    # pre-flight, float32 (no mixed precision): gathered = root 44 x (4 + 4) + 2 layers 2 x 152 x 4 + 152 x 4
    # = 2176; states 16 x 174 = 2784; reference 4 x 174 = 696: 4960 bytes without the reference, 5656 with
    small = {"coder": SMALL}
    plain = _config(tmp_path, parallel_training="fsdp", fsdp_ranks=2)
    kl = _config(tmp_path, parallel_training="fsdp", fsdp_ranks=2, reference_kl_enabled=True)
    assert memory_problems(plain, 4960, shapes=small) == [] and memory_problems(kl, 5655, shapes=small) != []
    [(field, message)] = memory_problems(kl, 5000, shapes=small)
    assert field == "agents.0.model" and "needs at least 5,656 bytes" in message and "on 2 ranks" in message
    assert "+ reference 0.0 GiB" in message and "fsdp_ranks: 4" in message  # 4 ranks: 1392 + 348 + 2176 fits
    assert memory_problems(kl, 5656, shapes=small) == []
    # bfloat16 weights: the reference 2 x 174 = 348, gathered under mixed precision 1480: 2784 + 348 + 1480
    half = _config(tmp_path, parallel_training="fsdp", fsdp_ranks=2, reference_kl_enabled=True, torch_dtype="bfloat16")
    assert "needs at least 4,612 bytes" in memory_problems(half, 4611, shapes=small)[0][1]
    # without fsdp the reference is whole on the agent's device: (4 x 4 + 4) x 348 = 6960 bytes
    whole = _config(tmp_path, reference_kl_enabled=True)
    assert "needs at least 6,960 bytes" in memory_problems(whole, 6959, shapes=small)[0][1]
    assert memory_problems(whole, 6960, shapes=small) == []
    apart = _config(tmp_path, reference_kl_enabled=True, reference_devices=["cpu"])  # on a device of its own
    assert memory_problems(apart, 16 * 348, shapes=small) == []


def test_a_team_shares_every_rank_so_its_agents_states_add_up_by_hand(tmp_path):
    # two agents of P = 348 on 2 ranks, float32: each 2784 states + 2176 gathered = 4960 alone; together
    # 2 x 2784 + the larger gathered 2176 = 7744 (with float32 references: 2 x (2784 + 696) + 2176 = 9136)
    two = {"coder": SMALL, "small": SMALL}
    config = _config(tmp_path, parallel_training="fsdp", fsdp_ranks=2)
    assert memory_problems(config, 5000, shapes={"coder": SMALL}) == []  # one accounted agent fits alone
    [(field, message)] = memory_problems(config, 5000, shapes=two)
    assert field == "agents" and message.startswith("the team needs at least 7,744 bytes") and "on 2 ranks" in message
    assert "fsdp_ranks: 4)" in message  # 4 ranks: 2 x 16 x 87 + 2176 = 4960
    assert memory_problems(config, 7744, shapes=two) == []
    kl = _config(tmp_path, parallel_training="fsdp", fsdp_ranks=2, reference_kl_enabled=True)
    assert "at least 9,136 bytes" in memory_problems(kl, 9135, shapes=two)[0][1]
    queue = _config(tmp_path, parallel_training="fsdp")  # fsdp_ranks empty: the queue's 2 GPUs, one rank each
    assert "fsdp_ranks: 4 on a worker that owns 4 GPUs" in memory_problems(queue, 5000, shapes=two, ranks=2)[0][1]
    offloaded = _config(tmp_path, parallel_training="fsdp", fsdp_ranks=2, fsdp_cpu_offload=True)
    assert memory_problems(offloaded, 2176, shapes=two) == []  # the states on the host: the gathered peak only


def test_the_table_in_docs_is_the_codes():
    table = memory_table()
    assert "| qwen2.5-7b | 7.62 B |" in table
    assert "| 28.4 / 14.2 / 7.1 / 3.5 |" in table  # the 7B's float32 reference: 4 x 7.62e9 / W bytes per rank
    docs = (Path(__file__).resolve().parents[2] / "docs" / "gpu.md").read_text(encoding="utf-8")
    assert table in docs, "docs/gpu.md's memory table is stale: paste engine.schema.memory.memory_table()"


def _config(tmp_path: Path, **trainer: object):
    folder = tmp_path / "qwen7b"
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(json.dumps({
        "model_type": "qwen2", "vocab_size": 152_064, "hidden_size": 3584, "intermediate_size": 18944,
        "num_hidden_layers": 28, "num_attention_heads": 28, "num_key_value_heads": 4, "tie_word_embeddings": False,
        "max_position_embeddings": 32768}))
    return parse_run_config({"agents": [{"name": "coder", "model": str(folder)}, {"name": "small"}],
                             "task": {"name": "quickstart"}, "trainer": {"num_generations": 2, **trainer}})


def test_a_seven_b_agent_is_refused_on_one_80_gb_device(tmp_path):
    config = _config(tmp_path)  # float32: 4 x 4 bytes per parameter, 121.8 GB
    problems = memory_problems(config, 80 * 10**9)
    assert [f for f, _ in problems] == ["agents.0.model"]  # the tiny built-in agent is not accounted
    message = problems[0][1]
    need = 4 * 4 * SHAPES["qwen2.5-7b"].parameters()
    assert "agent coder" in message and f"{need:,} bytes" in message
    assert "parallel_training: fsdp" in message and "lora_rank" in message
    assert memory_problems(config, need) == []  # exactly enough is enough
    half = _config(tmp_path, torch_dtype="bfloat16")  # 4 x 2 bytes: 60.9 GB fits 80 GB, not 40 GB
    assert memory_problems(half, 80 * 10**9) == []
    assert f"{need // 2:,} bytes" in memory_problems(half, 40 * 10**9)[0][1]
    found = {p.field: p.message for p in preflight_problems(config, hub_cache_dirs=[],
                                                             limits=RunLimits(device_memory_bytes=80 * 10**9))}
    assert found["agents.0.model"] == message
    assert "agents.0.model" not in {p.field for p in preflight_problems(config, hub_cache_dirs=[],
                                                                        limits=RunLimits())}


def test_fsdp_ranks_and_offload_change_the_verdict(tmp_path):
    shape = SHAPES["qwen2.5-7b"]
    one = rank_memory(shape, 1).gpu
    assert rank_memory(shape, 4).gpu < 80 * 10**9 < one
    config = _config(tmp_path, parallel_training="fsdp", fsdp_ranks=1, torch_dtype="bfloat16")
    problems = memory_problems(config, 80 * 10**9)
    assert len(problems) == 1 and f"{one:,} bytes" in problems[0][1]
    assert "fsdp_ranks: 2" in problems[0][1] and "fsdp_cpu_offload: true" in problems[0][1]
    assert memory_problems(_config(tmp_path, parallel_training="fsdp", fsdp_ranks=4), 80 * 10**9) == []
    assert memory_problems(_config(tmp_path, parallel_training="fsdp", fsdp_cpu_offload=True), 80 * 10**9) == []
    assert memory_problems(config, 80 * 10**9, shapes={"coder": SHAPES["qwen2.5-0.5b"]}) == []


def test_lora_agents_are_not_accounted(tmp_path):
    config = _config(tmp_path)
    lora = parse_run_config({**config.model_dump(exclude_defaults=True),
                             "agents": [{"name": "coder", "model": config.agents[0].model, "lora_rank": 8},
                                        {"name": "small"}]})
    assert memory_problems(config, 80 * 10**9) and memory_problems(lora, 80 * 10**9) == []


def test_an_fsdp_run_is_parsed_and_what_it_does_not_train_yet_is_refused_naming_the_fix(tmp_path):
    from engine.schema.configure import trainer_problems

    config = _config(tmp_path, parallel_training="FSDP", fsdp_ranks=2, num_turns=1)
    assert (config.trainer.parallel_training, config.trainer.fsdp_ranks) == ("fsdp", 2)
    assert trainer_problems(config.trainer, config.agents) == []
    turns = _config(tmp_path, parallel_training="fsdp", num_turns=2)
    assert trainer_problems(turns.trainer, turns.agents) == []  # several turns are trained
    two_turns = _config(tmp_path, parallel_training="fsdp", num_turns=2, clip_epsilon=0.2,
                        early_termination_threshold=-0.2)
    problems = trainer_problems(two_turns.trainer, two_turns.agents)
    assert [p.partition(":")[0] for p in problems] == ["trainer.early_termination_threshold", "trainer.clip_epsilon"]
    assert "leave early_termination_threshold empty" in problems[0] and "docs/gpu.md" in problems[0]
    # the reference KL is trained (its reference sharded like the agent), not on devices of its own
    kl = _config(tmp_path, parallel_training="fsdp", reference_kl_enabled=True, reference_kl_mode="loss")
    assert trainer_problems(kl.trainer, kl.agents) == []
    apart = _config(tmp_path, parallel_training="fsdp", reference_kl_enabled=True, reference_devices=["cpu"])
    assert [p.partition(":")[0] for p in trainer_problems(apart.trainer, apart.agents)] == ["trainer.reference_devices"]
    lora = parse_run_config({**config.model_dump(exclude_defaults=True),
                             "agents": [{"name": "coder", "model": config.agents[0].model, "lora_rank": 8},
                                        {"name": "small"}]})
    assert any("LoRA" in p and "remove lora_rank" in p for p in trainer_problems(lora.trainer, lora.agents))
    with pytest.raises(ValueError, match="fsdp_ranks"):
        _config(tmp_path, parallel_training="fsdp", fsdp_ranks=0)
