"""The static-shape decode path (engine.sampling.static_decode) samples what the lean decoder samples."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from engine.models.tiny import build_tiny_model
from engine.sampling import static_decode
from engine.sampling.decoder import Decoding, FastDecoder, static_wanted
from engine.sampling.sampler import generate_completions, left_pad
from engine.sampling.static_decode import StaticDecoder, decode_static, row_bucket
from tests.engine.sampling.sampling_fixtures import PROMPTS, eos_prone

SETTINGS = {
    "greedy": {"do_sample": False, "temperature": 1.0, "top_p": 1.0, "top_k": None},
    "comlrl_defaults": {"do_sample": True, "temperature": 0.6, "top_p": 0.6, "top_k": 50},
    "full_vocabulary": {"do_sample": True, "temperature": 1.0, "top_p": 1.0, "top_k": None},
    "top_k_top_p": {"do_sample": True, "temperature": 1.3, "top_p": 0.9, "top_k": 5},
}


def _sample(model, tokenizer, settings: dict, seed: int, graphs: str, prompts=PROMPTS, n: int = 12):
    return generate_completions(model, tokenizer, prompts, num_generations=3, max_new_tokens=n,
                                generator=torch.Generator().manual_seed(seed), decode_graphs=graphs, **settings)


@pytest.mark.parametrize(("arch", "setting"), [("llama", "greedy"), ("qwen2", "comlrl_defaults"),
                                                ("llama", "full_vocabulary"), ("qwen2", "top_k_top_p")])
def test_static_path_samples_the_lean_decoders_tokens(arch: str, setting: str) -> None:
    """Same seed, same tokens and bit-identical log-probs; EOS reached mid-batch (an EOS-prone head),
    left-padded prompts, several seeds."""
    model, tokenizer = eos_prone(arch, eos_bias=3.0)
    finished_early = 0
    for seed in (0, 1):
        lean = _sample(model, tokenizer, SETTINGS[setting], seed, "off")
        static = _sample(model, tokenizer, SETTINGS[setting], seed, "on")
        assert torch.equal(lean.completion_ids, static.completion_ids), f"seed {seed}"
        assert torch.equal(lean.completion_mask, static.completion_mask), f"seed {seed}"
        assert torch.equal(lean.token_logprobs, static.token_logprobs), f"seed {seed}"
        finished_early += int((lean.completion_lengths < 12).sum())
    assert finished_early > 0  # the comparison covered rows that stopped at EOS before others


def test_static_step_logits_equal_the_fast_step_bit_for_bit() -> None:
    """key_block 1 (the CPU's): the static buffers' step gives the fast step's logits exactly."""
    model, tokenizer = build_tiny_model("qwen2", "xs", seed=3)
    ids, mask = left_pad([[5, 6, 7, 8, 9], [10, 11, 12]], tokenizer.pad_token_id)
    positions = (mask.cumsum(1) - 1).masked_fill(mask == 0, 0)
    steps = 5
    full = torch.cat([mask, torch.ones(2, steps, dtype=mask.dtype)], dim=1)
    model.eval()
    with torch.inference_mode():
        out = model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True, logits_to_keep=1)
        fast = FastDecoder(model, out.cache, 2, ids.shape[1] + steps)
        static = StaticDecoder(model, 2, ids.shape[1] + steps, key_block=1, graphs=False)
        static.load(out.cache, 2, mask, positions[:, -1:])
        tokens = out.logits[:, -1].argmax(-1)
        pos = positions[:, -1:] + 1
        for step in range(steps):
            expected = fast.step(tokens[:, None], pos, full[:, : ids.shape[1] + step + 1])
            got = static.step_tokens(tokens)
            assert torch.equal(expected, got), f"step {step}: max diff {(expected - got).abs().max().item()}"
            tokens, pos = expected.argmax(-1), pos + 1


def test_key_blocks_and_spare_rows_keep_the_tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CUDA-shaped step on the CPU: keys attended in blocks of 8 under a mask, rows rounded up to a
    power of two (a spare row). Tokens equal; log-probs within float32 rounding of the reduction."""
    model, tokenizer = eos_prone("llama", eos_bias=3.0)
    ids, mask = left_pad([tokenizer(p)["input_ids"] for p in PROMPTS], tokenizer.pad_token_id)
    how = Decoding(max_new_tokens=14, do_sample=True, temperature=1.0, top_p=0.95, top_k=None,
                   eos_ids=[tokenizer.eos_token_id], pad_id=tokenizer.pad_token_id, seed=11)
    model.eval()
    with torch.inference_mode():
        reference = decode_static(model, ids, mask, 3, how, key_block=1)
        monkeypatch.setattr(static_decode, "row_bucket", lambda rows, device: 1 << (rows - 1).bit_length())
        blocked = decode_static(model, ids, mask, 3, how, key_block=8)
    assert static_decode.last_decode_stats(model).bucket == 16  # 9 rows in a bucket of 16
    assert torch.equal(reference[0], blocked[0])
    assert torch.allclose(reference[1], blocked[1], atol=1e-5, rtol=0)


def test_the_host_waits_every_check_every_tokens_not_every_token(monkeypatch: pytest.MonkeyPatch) -> None:
    """No bool() of a device tensor per token: 24 tokens, checks every 8 -> at most 3 in the loop
    (plus the prompt's padding test before it); the lean loop asks once per token."""
    model, tokenizer = build_tiny_model("llama", "xs", seed=1)
    ids, mask = left_pad([[5, 6, 7], [8, 9]], tokenizer.pad_token_id)
    how = Decoding(max_new_tokens=24, do_sample=True, temperature=1.0, top_p=1.0, top_k=None,
                   eos_ids=[tokenizer.eos_token_id], pad_id=tokenizer.pad_token_id, seed=3)
    calls = []
    original = torch.Tensor.__bool__

    def counting(self):  # noqa: ANN001, ANN202
        calls.append(1)
        return original(self)

    model.eval()
    with torch.inference_mode():
        monkeypatch.setattr(torch.Tensor, "__bool__", counting)
        tokens, _ = decode_static(model, ids, mask, 2, how, check_every=8)
        monkeypatch.setattr(torch.Tensor, "__bool__", original)
    assert tokens.shape == (4, 24)
    assert len(calls) <= 6, f"{len(calls)} host checks for 24 tokens"


def test_steps_past_the_last_eos_are_cut_off() -> None:
    """Checking rarely runs steps after every row finished; the result is the lean loop's width."""
    model, tokenizer = eos_prone("qwen2", eos_bias=6.0)
    ids, mask = left_pad([tokenizer(p)["input_ids"] for p in PROMPTS], tokenizer.pad_token_id)
    how = Decoding(max_new_tokens=40, do_sample=True, temperature=1.0, top_p=1.0, top_k=None,
                   eos_ids=[tokenizer.eos_token_id], pad_id=tokenizer.pad_token_id, seed=5)
    model.eval()
    with torch.inference_mode():
        every = decode_static(model, ids, mask, 2, how, check_every=1)
        rarely = decode_static(model, ids, mask, 2, how, check_every=32)
    assert every[0].shape[1] < 40  # every row stopped early
    assert torch.equal(every[0], rarely[0]) and torch.equal(every[1], rarely[1])
    assert static_decode.last_decode_stats(model).steps == every[0].shape[1]


def test_static_wanted_and_row_buckets() -> None:
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert [static_wanted(s, cpu) for s in ("auto", "on", "off")] == [False, True, False]
    assert [static_wanted(s, cuda) for s in ("auto", "on", "off")] == [True, True, False]
    with pytest.raises(ValueError, match="decode_graphs must be auto, on or off"):
        static_wanted("yes", cpu)
    assert [row_bucket(n, cuda) for n in (1, 2, 3, 8, 9, 128, 129)] == [1, 2, 4, 8, 16, 128, 256]
    assert row_bucket(9, cpu) == 9
    # graphs: CUDA, asked for, and the main thread (agents in worker threads step eagerly)
    assert static_decode._graphs_here(True, cuda) and not static_decode._graphs_here(False, cuda)
    assert not static_decode._graphs_here(True, cpu)
    with ThreadPoolExecutor(1) as pool:
        assert pool.submit(static_decode._graphs_here, True, cuda).result() is False


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (CUDA graph capture)")
def test_cuda_graphs_replay_the_eager_static_step() -> None:
    model, tokenizer = build_tiny_model("qwen2", "xs", seed=3)
    model = model.to("cuda")
    settings = SETTINGS["comlrl_defaults"]
    ids, mask = left_pad([tokenizer(p)["input_ids"] for p in PROMPTS], tokenizer.pad_token_id)
    ids, mask = ids.to("cuda"), mask.to("cuda")
    how = Decoding(max_new_tokens=20, eos_ids=[tokenizer.eos_token_id],
                   pad_id=tokenizer.pad_token_id, seed=0, **settings)
    model.eval()
    with torch.inference_mode():
        eager = decode_static(model, ids, mask, 2, how, graphs=False)
        replayed = decode_static(model, ids, mask, 2, how, graphs=True)
        assert static_decode.last_decode_stats(model).graphs_captured >= 1
        again = decode_static(model, ids, mask, 2, how, graphs=True)  # the kept graphs, replayed
    assert static_decode.last_decode_stats(model).graphs_captured == 0
    assert torch.equal(eager[0], replayed[0]) and torch.equal(eager[0], again[0])
