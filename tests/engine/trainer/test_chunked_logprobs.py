"""Log-probs and entropy from the final hidden states in chunks of positions: the same numbers and
gradients as the full-logits path, checked by hand, against that path, per architecture, and for the
memory they need (no tensor as wide as the vocabulary has more rows than a chunk)."""

from __future__ import annotations

import contextlib
import functools
import math

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode
from transformers import AutoConfig, AutoModelForCausalLM

from engine.trainer.agents import (
    AgentRuntime,
    GenerationSettings,
    completion_hidden,
    completion_logits,
    pack_sequences,
)
from engine.trainer.losses import (
    LinearHead,
    head_logprobs,
    linear_head,
    logits_chunk_rows,
    token_entropy,
    token_logprobs,
)

BIG_VOCAB = 151_936  # Qwen2/Qwen3's vocabulary
VOCAB = 32_768  # the models below: 16 positions' float32 logits are 2 MiB, so a 1 MiB budget takes 8 a chunk


def _hand_logsoftmax(row: list[float]) -> list[float]:
    lse = math.log(sum(math.exp(x) for x in row))
    return [x - lse for x in row]


def test_two_positions_by_hand_in_chunks_of_one() -> None:
    hidden = torch.tensor([[[1.0, 0.0], [0.0, 2.0]]], requires_grad=True)  # (1, 2, 2)
    weight = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], requires_grad=True)  # (3, 2): logits h @ W^T
    targets = torch.tensor([[0, 1]])
    logps, entropy = head_logprobs(hidden, LinearHead(weight), targets, rows=1, with_entropy=True)
    logits = [[1.0, 0.0, 1.0], [0.0, 2.0, 2.0]]
    want = [_hand_logsoftmax(row) for row in logits]
    assert logps[0].tolist() == pytest.approx([want[0][0], want[1][1]], abs=1e-6)
    assert entropy[0].tolist() == pytest.approx([-sum(math.exp(v) * v for v in w) for w in want], abs=1e-6)
    logps.sum().backward()
    # d log p(t) / d logit_j = onehot_j - p_j; d logit_j / d h = W_j; d logit_j / d W_j = h
    coef = [[(1.0 if j == t else 0.0) - math.exp(w[j]) for j in range(3)] for w, t in zip(want, (0, 1), strict=True)]
    w_rows = weight.detach().tolist()
    grad_h = [[sum(c[j] * w_rows[j][k] for j in range(3)) for k in range(2)] for c in coef]
    h_rows = [[1.0, 0.0], [0.0, 2.0]]
    grad_w = [[sum(coef[r][j] * h_rows[r][k] for r in range(2)) for k in range(2)] for j in range(3)]
    assert hidden.grad[0].tolist() == [pytest.approx(g, abs=1e-6) for g in grad_h]
    assert weight.grad.tolist() == [pytest.approx(g, abs=1e-6) for g in grad_w]


def _todays_path(hidden, weight, bias, targets, post=None):
    logits = F.linear(hidden, weight, bias)
    if post is not None:
        logits = post(logits)
    return token_logprobs(logits, targets), token_entropy(logits.detach())


def _leaves(dtype: torch.dtype, with_bias: bool, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    hidden = torch.randn(3, 5, 8, generator=g).to(dtype).requires_grad_()
    weight = (torch.randn(13, 8, generator=g) * 0.5).to(dtype).requires_grad_()
    bias = (torch.randn(13, generator=g) * 0.1).to(dtype).requires_grad_() if with_bias else None
    targets = torch.randint(0, 13, (3, 5), generator=g)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 0, 0, 0, 0]])
    return hidden, weight, bias, targets, mask


def _run(path, dtype, with_bias):
    hidden, weight, bias, targets, mask = _leaves(dtype, with_bias)
    logps, entropy = path(hidden, weight, bias, targets)
    (-(logps * mask).sum()).backward()
    grads = [t.grad.float() for t in (hidden, weight, bias) if t is not None]
    return logps.detach(), entropy, grads


def _close(got: torch.Tensor, want: torch.Tensor, dtype: torch.dtype) -> bool:
    """float32: within 1e-5; bfloat16 (8 significant bits, rounded at other steps by the two paths):
    within 2% of the largest value."""
    if dtype == torch.float32:
        return torch.allclose(got, want, atol=1e-5, rtol=1e-5)
    return float((got - want).abs().max()) <= 2e-2 * (1.0 + float(want.abs().max()))


@pytest.mark.parametrize("rows", [1, 4, 64])
@pytest.mark.parametrize("with_bias", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_chunks_equal_the_full_logits_path(dtype: torch.dtype, with_bias: bool, rows: int) -> None:
    want = _run(_todays_path, dtype, with_bias)
    got = _run(lambda h, w, b, t: head_logprobs(h, LinearHead(w, b), t, rows=rows, with_entropy=True),
               dtype, with_bias)
    assert got[0].dtype == torch.float32 and got[1].dtype == torch.float32
    assert _close(got[0], want[0], dtype) and _close(got[1], want[1], dtype)
    assert len(got[2]) == len(want[2]) == (3 if with_bias else 2)
    for a, b in zip(got[2], want[2], strict=True):
        assert _close(a, b, dtype), (a - b).abs().max()


POSTS = {  # how Granite, Cohere and Gemma 2/3 turn the output layer's result into logits
    "divide": (dict(divide_by=8.0), lambda z: z / 8.0),
    "multiply": (dict(multiply_by=0.0625), lambda z: z * 0.0625),
    "softcap": (dict(softcap=2.5), lambda z: torch.tanh(z / 2.5) * 2.5),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("post", sorted(POSTS))
def test_scaled_and_softcapped_logits(post: str, dtype: torch.dtype) -> None:
    spec, fn = POSTS[post]
    want = _run(lambda h, w, b, t: _todays_path(h, w * 4, b, t, fn), dtype, True)
    got = _run(lambda h, w, b, t: head_logprobs(h, LinearHead(w * 4, b, **spec), t, rows=2, with_entropy=True),
               dtype, True)
    for a, b in zip((got[0], got[1], *got[2]), (want[0], want[1], *want[2]), strict=True):
        assert _close(a, b, dtype), (post, (a - b).abs().max())


def test_budget_decides_the_rows_of_a_chunk() -> None:
    assert logits_chunk_rows(64 * 256, BIG_VOCAB, 512) == 883  # 512 MiB of float32 logits: 883 positions
    assert logits_chunk_rows(800, BIG_VOCAB, 512) is None  # the full logits fit: today's exact path
    assert logits_chunk_rows(64 * 256, BIG_VOCAB, 0) is None  # 0: never chunk
    assert logits_chunk_rows(64, BIG_VOCAB, 1) == 1  # a budget below one row still takes one row
    with pytest.raises(ValueError, match="logits_chunk_mib must be >= 0"):
        logits_chunk_rows(10, 10, -1)


def _near(got: torch.Tensor, want: torch.Tensor) -> bool:
    """float32 gradients through a network: a position's gradient sums 151,936 vocabulary terms, in
    another order when a chunk is one row than when it is the whole batch."""
    return float((got - want).abs().max()) <= 1e-4 * float(want.abs().max()) + 1e-8


@functools.cache
def _big_vocab_model(tied: bool = True, dtype: torch.dtype = torch.float32):
    """One model per variant for the module (each test zeroes its gradients first)."""
    config = AutoConfig.for_model("qwen2", vocab_size=VOCAB, hidden_size=16, intermediate_size=32,
                                  num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
                                  tie_word_embeddings=tied, max_position_embeddings=64)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_config(config).to(dtype)
    return model.eval()


def _agent(model, mib: int) -> AgentRuntime:
    return AgentRuntime(index=0, name="a", model=model, tokenizer=None, device=torch.device("cpu"), learning_rate=1.0,
                        generation=GenerationSettings(4, 1.0, 1.0, None), formatter=None, logits_chunk_mib=mib)


def _batch(shared: bool):
    prompts = [[5, 6, 7], [5, 6, 7], [9, 10], [9, 10]] if shared else [[5, 6, 7], [8], [9, 10], [11, 3]]
    completions = [[20, 21, 22, 23], [24, 25], [26, 27, 28], [29]]
    batch = pack_sequences(prompts, completions, pad_id=0, device=torch.device("cpu"))
    assert (batch.prefix is not None) == shared
    return batch


class WidestVocabRows(TorchDispatchMode):
    """The most rows of any tensor an op produced whose last dimension is the vocabulary (views of the
    model's weights, such as the transposed output layer, aside)."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.vocab, self.rows = model.get_output_embeddings().weight.shape[0], 0
        self.weights = {p.untyped_storage().data_ptr() for p in model.parameters()}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor) and t.dim() and t.shape[-1] == self.vocab \
                    and t.untyped_storage().data_ptr() not in self.weights:
                self.rows = max(self.rows, t.numel() // self.vocab)
        return out


def _step(agent: AgentRuntime, batch, *, watch: WidestVocabRows | None = None):
    agent.model.zero_grad(set_to_none=True)
    with watch if watch is not None else contextlib.nullcontext():
        logps, entropy = agent.forward_logprobs(batch, with_entropy=True)
        (-(logps * batch.completion_mask).sum()).backward()
    grads = {n: p.grad.float() for n, p in agent.model.named_parameters() if p.grad is not None}
    return logps.detach(), entropy, grads


@pytest.mark.parametrize("shared", [False, True])
@pytest.mark.parametrize("tied", [True, False])
def test_over_budget_forward_chunks_and_keeps_the_numbers(tied: bool, shared: bool) -> None:
    model = _big_vocab_model(tied)
    batch = _batch(shared)
    want = _step(_agent(model, 0), batch)  # 0: never chunk (today's path)
    watch = WidestVocabRows(model)
    got = _step(_agent(model, 1), batch, watch=watch)  # 16 positions x 32,768 x 4 bytes = 2 MiB > 1 MiB
    assert watch.rows == 8  # 8 positions' logits at a time (1 MiB of float32), forward and backward
    assert torch.allclose(got[0], want[0], atol=1e-5) and torch.allclose(got[1], want[1], atol=1e-5)
    assert got[2].keys() == want[2].keys() and (("lm_head.weight" in got[2]) != tied)
    for name, grad in want[2].items():
        assert _near(got[2][name], grad), name


def test_bfloat16_model_over_budget() -> None:
    model = _big_vocab_model(tied=True, dtype=torch.bfloat16)
    batch = _batch(False)
    want, got = _step(_agent(model, 0), batch), _step(_agent(model, 1), batch)
    assert torch.allclose(got[0], want[0], atol=2e-2) and torch.allclose(got[1], want[1], atol=5e-2)
    for name, grad in want[2].items():
        assert torch.allclose(got[2][name], grad, atol=2e-2, rtol=5e-2), name


def test_tiny_vocabularies_keep_the_exact_path() -> None:
    from engine.models.tiny import build_tiny_model

    model, _ = build_tiny_model("llama", "xs", seed=0)
    batch = _batch(False)
    agent = _agent(model, 512)
    logps, _ = agent.forward_logprobs(batch)
    assert torch.equal(logps, token_logprobs(completion_logits(model, batch, 4), batch.completion_ids))


def test_an_output_layer_that_is_not_a_plain_linear_keeps_the_full_logits_path() -> None:
    model = _big_vocab_model.__wrapped__(tied=False)  # its own: the test changes its output layer

    class Scaled(torch.nn.Linear):
        def forward(self, x):
            return super().forward(x) * 2

    head = model.lm_head
    scaled = Scaled(head.in_features, head.out_features, bias=False)
    scaled.weight = head.weight
    model.lm_head = scaled
    assert linear_head(model) is None
    batch = _batch(False)
    logps, _ = _agent(model, 1).forward_logprobs(batch)
    assert torch.equal(logps, _agent(model, 0).forward_logprobs(batch)[0])
    assert linear_head(torch.nn.Linear(4, 4)) is None  # not a causal LM we know


ARCHS = {  # model_type -> extra config; each family's own forward is the reference
    "llama": {}, "qwen2": {}, "qwen3": {}, "mistral": {}, "phi3": {}, "gemma": {}, "olmo2": {}, "smollm3": {},
    "gemma2": {"final_logit_softcapping": 0.5}, "gemma3_text": {"final_logit_softcapping": 0.5},
    "granite": {"logits_scaling": 4.0}, "cohere": {"logit_scale": 0.25},
    "gpt2": {"n_embd": 16, "n_layer": 1, "n_head": 2, "n_positions": 64},
}


@pytest.mark.parametrize("arch", sorted(ARCHS))
def test_each_known_family_matches_its_own_forward(arch: str) -> None:
    dims = dict(vocab_size=64, pad_token_id=0, bos_token_id=1, eos_token_id=2, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                num_key_value_heads=1, head_dim=8, max_position_embeddings=64)
    config = AutoConfig.for_model(arch, **(dims if arch != "gpt2" else {"vocab_size": 64}), **ARCHS[arch])
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_config(config)
    model.eval()
    head = linear_head(model)
    assert head is not None, arch
    for b in (_batch(False), _batch(True)):
        want = token_logprobs(completion_logits(model, b, 4), b.completion_ids)
        got, _ = head_logprobs(completion_hidden(model, b, 4), head, b.completion_ids, rows=3)
        assert torch.allclose(got, want, atol=1e-5), (arch, (got - want).abs().max())


def test_actor_with_a_value_head_chunks_too() -> None:
    from engine.actor_critic.critics import ValueHead
    from engine.actor_critic.update import actor_forward, value_positions

    model = _big_vocab_model(tied=True)
    head = ValueHead(16)
    batch = _batch(False)
    positions = value_positions(batch, [4, 2, 3, 1], "q")
    results = []
    for mib in (0, 1):
        model.zero_grad(set_to_none=True)
        head.zero_grad(set_to_none=True)
        watch = WidestVocabRows(model)
        with watch:
            logps, values = actor_forward(_agent(model, mib), batch, head, positions)
            (-(logps * batch.completion_mask).sum() + values.sum()).backward()
        results.append((logps.detach(), values.detach(), [p.grad.clone() for p in (*model.parameters(),
                                                                                     *head.parameters())], watch.rows))
    (want_lp, want_v, want_g, full_rows), (lp, v, g, rows) = results
    assert full_rows >= 16 and rows == 8
    assert torch.allclose(lp, want_lp, atol=1e-5) and torch.allclose(v, want_v, atol=1e-6)
    for a, b in zip(g, want_g, strict=True):
        assert _near(a, b)


def test_the_trainer_hands_each_agent_the_configured_budget(team) -> None:
    from tests.engine.trainer.trainer_helpers import fast_config, make_trainer

    assert fast_config().logits_chunk_mib == 512
    trainer = make_trainer(team, fast_config(logits_chunk_mib=64))
    assert [a.logits_chunk_mib for a in trainer.agents] == [64, 64]
    with pytest.raises(ValueError, match="logits_chunk_mib"):
        fast_config(logits_chunk_mib=-1)
