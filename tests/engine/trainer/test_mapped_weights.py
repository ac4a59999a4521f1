"""Trainable weights still in a checkpoint file's mapping get memory of their own when the trainer is built
(engine/trainer/setup.py)."""

from __future__ import annotations

import resource

import torch
from transformers import AutoModelForCausalLM

from engine.models.tiny import build_tiny_model
from engine.trainer.setup import MAPS, file_mapped_ranges, in_ranges, own_mapped_weights
from tests.engine.trainer.trainer_helpers import fast_config, make_trainer, snapshot

MAPS_TEXT = """\
55d0c0000000-55d0c0021000 rw-p 00000000 00:00 0                          [heap]
7f0000000000-7f0000400000 r--p 00000000 fd:01 1234                       /models/a/model.safetensors
7f0000400000-7f0000500000 rw-p 00000000 00:00 0
7f0000500000-7f0000600000 r-xp 00001000 fd:01 99                         /usr/lib/libc.so.6
7ffc00000000-7ffc00021000 rw-p 00000000 00:00 0                          [stack]
"""


def test_only_lines_that_map_a_file_are_ranges_and_the_end_is_excluded():
    ranges = file_mapped_ranges(MAPS_TEXT)
    assert ranges == [(0x7F0000000000, 0x7F0000400000), (0x7F0000500000, 0x7F0000600000)]
    assert in_ranges(0x7F0000000000, ranges) and in_ranges(0x7F00003FFFFF, ranges)
    assert not in_ranges(0x7F0000400000, ranges)  # anonymous memory between the two files
    assert in_ranges(0x7F0000500010, ranges)
    assert not in_ranges(0x55D0C0000010, ranges) and not in_ranges(0x7FFC00000010, ranges)  # heap, stack
    assert not in_ranges(0x10, ranges) and not in_ranges(0x7F0000600000, ranges)


def _loaded_from_file(tmp_path, tie: bool):
    model, tokenizer = build_tiny_model("llama", "xs", seed=0)
    model.config.tie_word_embeddings = tie
    if tie:
        model.lm_head.weight = model.model.embed_tokens.weight
    model.save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    return AutoModelForCausalLM.from_pretrained(tmp_path / "model", dtype=torch.float32), tokenizer


def _mapped(params) -> list[bool]:
    ranges = file_mapped_ranges(MAPS.read_text())
    return [in_ranges(p.data_ptr(), ranges) for p in params]


def test_weights_loaded_from_safetensors_are_copied_exactly_once_and_others_are_left_alone(tmp_path):
    model, _ = _loaded_from_file(tmp_path, tie=False)
    params = list(model.parameters())
    mapped = _mapped(params)
    assert sum(mapped) >= len(params) - 2, "from_pretrained no longer maps the file: this module has nothing to do"
    before = snapshot(model)
    expected = sum(p.numel() * p.element_size() for p, m in zip(params, mapped, strict=True) if m)
    assert own_mapped_weights(params) == expected
    assert not any(_mapped(params))
    after = snapshot(model)
    assert all(torch.equal(before[k], after[k]) for k in before)  # exact copies
    assert own_mapped_weights(params) == 0  # nothing left to copy
    built, _ = build_tiny_model("qwen2", "xs", seed=1)
    assert own_mapped_weights(built.parameters()) == 0  # built in memory: untouched


def test_tied_weights_stay_one_parameter(tmp_path):
    model, _ = _loaded_from_file(tmp_path, tie=True)
    assert model.lm_head.weight is model.model.embed_tokens.weight
    own_mapped_weights(model.parameters())
    assert model.lm_head.weight is model.model.embed_tokens.weight
    assert not any(_mapped(model.parameters()))


def test_a_trainer_built_on_file_loaded_agents_writes_no_mapped_page_in_its_first_step(tmp_path):
    first, t1 = _loaded_from_file(tmp_path / "a", tie=False)
    second, t2 = _loaded_from_file(tmp_path / "b", tie=False)
    trainer = make_trainer(([first, second], [t1, t2]), fast_config(max_steps=1))
    for agent in trainer.agents:
        assert not any(_mapped(agent.trainable_parameters())), agent.name
    for agent in trainer.agents:  # an optimizer step that writes every weight
        for p in agent.trainable_parameters():
            p.grad = torch.zeros_like(p)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for agent in trainer.agents:
        agent.optimizer.step()
    pages = sum(p.numel() * p.element_size() for a in trainer.agents for p in a.trainable_parameters()) // 4096
    assert resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults < pages // 4
