"""The policy-gradient loss and the token log-probs it reads.

Token-level pieces of the policy-gradient loss. Pure tensor functions, checked by hand in tests.

What the loss reads (:class:`TrainSample`, one completion of one agent) and its settings
(:class:`UpdateSettings`); the rollout policy's and the reference model's log-probs are scored without
gradients when the step needs them (:func:`engine.trainer.magrpo.score_logprobs`;
:func:`engine.trainer.magrpo.score_for_loss` says when).

Shapes: ``B`` sequences, ``T`` completion positions (right-padded), ``V`` vocabulary.

Token log-probs and entropy from the final hidden states, a chunk of positions at a time.

The full-logits path (:func:`engine.trainer.losses.token_logprobs` on the model's output) holds a
``(B, T, V)`` tensor in the model's dtype, a float32 copy and the log-sum-exp's temporaries, and
keeps the float32 logits for the backward: with a 151,936-token vocabulary that is 0.6 MB per
position, gigabytes per batch, whatever the model's size. Here the output layer is applied to
``rows`` positions at a time and only the hidden states (already kept by the model's graph) and one
float per position are kept; the backward recomputes each chunk's logits:
``d log p(t) / d logit = onehot(t) - softmax``, then the hidden states' gradient ``grad @ W`` and the
weight's ``grad^T @ h`` (accumulated over the chunks; in float32 for half-precision weights).

Only models whose logits are exactly their output ``Linear`` on the final hidden states, possibly
divided (Granite's ``logits_scaling``), multiplied (Cohere's ``logit_scale``) or soft-capped (Gemma
2/3's ``final_logit_softcapping``), are handled (:func:`linear_head`, checked against each family's
own forward in the tests); others keep the full-logits path. A tied output layer is the embedding
parameter itself, so its gradient reaches that one parameter from both uses.

The trainer chooses this path only when the float32 logits of a forward would exceed
``logits_chunk_mib`` (:func:`logits_chunk_rows`), so small batches keep the full-logits numbers bit
for bit; chunked results equal them up to float rounding.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch.autograd.function import once_differentiable


def completion_mask(completion_ids: torch.Tensor, eos_token_ids: set[int] | list[int]) -> torch.Tensor:
    """1 for every completion token up to and including the first EOS, 0 after it. (B, T) -> (B, T).

    Generated rows keep producing pad/EOS tokens after the first EOS until the longest row stops;
    those must not enter the loss (CoMLRL 1.4.3 sums them in).
    """
    if completion_ids.numel() == 0:
        return torch.zeros_like(completion_ids, dtype=torch.long)
    is_eos = torch.zeros_like(completion_ids, dtype=torch.bool)
    for eos in eos_token_ids:
        is_eos |= completion_ids == eos
    # number of EOS tokens strictly before each position
    eos_before = torch.cumsum(is_eos.long(), dim=1) - is_eos.long()
    return (eos_before == 0).long()


def token_logprobs(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """log p(target) per position with one fused gather: ``logit[target] - logsumexp(logits)``.

    (B, T, V), (B, T) -> (B, T), float32. Avoids materialising a full log-softmax copy.
    """
    logits = logits.float()
    picked = torch.gather(logits, -1, targets.unsqueeze(-1)).squeeze(-1)
    return picked - torch.logsumexp(logits, dim=-1)


def token_entropy(logits: torch.Tensor) -> torch.Tensor:
    """Entropy of the next-token distribution at each position. (B, T, V) -> (B, T)."""
    logits = logits.float()
    logp = torch.log_softmax(logits, dim=-1)
    return -(logp.exp() * logp).sum(-1)


def k3_kl(logp_policy: torch.Tensor, logp_ref: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimator of KL(policy || reference): ``exp(d) - d - 1`` with ``d = ref - policy``.

    Non-negative, unbiased for samples from the policy, and zero when the two agree.
    """
    d = logp_ref - logp_policy
    return torch.exp(d) - d - 1.0


def tis_weights(train_logps: torch.Tensor, sampler_logps: torch.Tensor, mask: torch.Tensor,
                cap: float) -> tuple[torch.Tensor, dict[str, float]]:
    """Truncated importance weights of tokens drawn by a sampler that is not the trained policy:
    ``min(p_train / p_sample, cap)`` per token, 0 on padding (no gradient flows through them).
    (B, T) x3 -> (B, T), with ``sampler_kl`` (mean k3 estimate of KL(sampler || trained) over the
    completion tokens) and ``tis_clipped`` (the share of tokens whose ratio exceeded ``cap``)."""
    with torch.no_grad():
        m = mask.bool()
        log_ratio = (train_logps - sampler_logps).float()
        ratio = torch.exp(log_ratio)
        weights = torch.clamp(ratio, max=cap) * m
        tokens = m.sum().clamp_min(1)
        kl = k3_kl(sampler_logps.float(), train_logps.float())
        stats = {"sampler_kl": float((kl * m).sum() / tokens), "tis_clipped": float(((ratio > cap) & m).sum() / tokens)}
    return weights, stats


def reduce_tokens(values: torch.Tensor, mask: torch.Tensor, loss_type: str) -> torch.Tensor:
    """Per-sequence reduction of token values: ``seq_sum`` sums, ``token_mean`` averages over the
    sequence's own completion tokens. (B, T) -> (B,)."""
    mask = mask.to(values.dtype)
    total = (values * mask).sum(-1)
    if loss_type == "seq_sum":
        return total
    if loss_type == "token_mean":
        return total / mask.sum(-1).clamp_min(1.0)
    raise ValueError(f"loss_type must be 'seq_sum' or 'token_mean', got {loss_type!r}")


def policy_loss(
    logps: torch.Tensor,
    mask: torch.Tensor,
    advantages: torch.Tensor,
    *,
    loss_type: str = "seq_sum",
    old_logps: torch.Tensor | None = None,
    clip_epsilon: float | None = None,
    ref_logps: torch.Tensor | None = None,
    kl_coef: float = 0.0,
    token_weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Policy-gradient loss per sequence, averaged over the batch. Returns ``(loss, stats)``.

    Without clipping: ``-A * reduce(log p)`` (CoMLRL's loss for ``seq_sum``).
    With ``clip_epsilon``: PPO's pessimistic surrogate per token,
    ``-min(rho A, clip(rho, 1-eps, 1+eps) A)`` with ``rho = exp(log p - old log p)``; on the first
    pass ``rho = 1`` and its gradient equals the unclipped one.
    With ``token_weights`` (B, T) (:func:`tis_weights`, no gradient): each token's policy-gradient
    term is multiplied by its weight (truncated importance sampling for an off-policy sampler).
    With ``ref_logps`` and ``kl_coef > 0``: adds ``kl_coef * reduce(k3 KL)`` (KL as a loss term).
    """
    adv = advantages.to(logps.dtype).unsqueeze(-1)  # (B, 1)
    stats: dict[str, float] = {}
    if clip_epsilon is not None:
        if old_logps is None:
            raise ValueError("clip_epsilon needs the rollout policy's old_logps")
        ratio = torch.exp(logps - old_logps)
        clipped = torch.clamp(ratio, 1.0 - clip_epsilon, 1.0 + clip_epsilon)
        surrogate = torch.minimum(ratio * adv, clipped * adv)
        m = mask.bool()
        with torch.no_grad():
            was_clipped = ((ratio - clipped).abs() > 0) & m
            stats["clip_fraction"] = float(was_clipped.sum() / m.sum().clamp_min(1))
    else:
        surrogate = logps * adv
    if token_weights is not None:
        surrogate = surrogate * token_weights.detach().to(surrogate.dtype)
    per_seq = -reduce_tokens(surrogate, mask, loss_type)
    if ref_logps is not None and kl_coef > 0:
        kl = reduce_tokens(k3_kl(logps, ref_logps), mask, loss_type)
        per_seq = per_seq + kl_coef * kl
        stats["kl_loss"] = float(kl.mean().detach())
    return per_seq.mean(), stats


def lr_factor(step: int, *, warmup_steps: int, total_steps: int | None, schedule: str) -> float:
    """Learning-rate multiplier at training step ``step`` (0-based).

    1) linear warmup from ``1/(warmup+1)`` to 1 over ``warmup_steps``;
    2) then ``constant`` (1), ``linear`` (to 0 at ``total_steps``) or ``cosine`` (half cosine to 0).
    """
    if step < warmup_steps:
        return (step + 1) / (warmup_steps + 1)
    if schedule == "constant" or not total_steps:
        return 1.0
    span = max(total_steps - warmup_steps, 1)
    progress = min(max(step - warmup_steps, 0) / span, 1.0)
    if schedule == "linear":
        return 1.0 - progress
    if schedule == "cosine":
        return 0.5 * (1.0 + float(torch.cos(torch.tensor(progress * torch.pi))))
    raise ValueError(f"lr_scheduler must be constant, linear or cosine; got {schedule!r}")


# -- The samples the loss reads, the update's settings, and the log-probs scored without gradients ---------
NO_GRAD_CHUNK = 64  # sequences per no-grad forward when scoring old/reference log-probs


@dataclass
class UpdateSettings:
    """The parts of the config that shape an update."""

    loss_type: str
    clip_epsilon: float | None
    num_inner_epochs: int
    train_batch_size: int
    micro_batch_size: int | None
    max_grad_norm: float | None
    reference_kl_enabled: bool
    reference_kl_mode: str
    reference_kl_coef: float
    rollout_correction: str = "none"  # auto | tis | none (engine.trainer.agents.corrects_sampler)
    tis_cap: float = 2.0


@dataclass
class TrainSample:
    """One completion of one agent, ready for the loss."""

    node_key: tuple[int, int]  # (rollout index, node id)
    turn: int
    prompt_ids: list[int]
    completion_ids: list[int]
    advantage: float = 0.0
    old_logps: torch.Tensor | None = None  # (T,) rollout policy
    sampler_logps: torch.Tensor | None = None  # (T,) the sampler's own, kept for the rollout correction
    ref_logps: torch.Tensor | None = None  # (T,) reference model


def sample_kl(samples: Sequence[TrainSample]) -> list[float]:
    """Sum of the per-token k3 KL of each sample (CoMLRL's KL-in-reward quantity)."""
    return [float(k3_kl(_scored(s.old_logps), _scored(s.ref_logps)).sum()) for s in samples]


def _scored(logps: torch.Tensor | None) -> torch.Tensor:
    """Log-probs :func:`engine.trainer.magrpo.score_for_loss` filled in (the loss reads them only where it scored them)."""
    if logps is None:
        raise ValueError("a sample's rollout-policy or reference log-probs are missing: score_for_loss scores "
                         "them before the loss reads them")
    return logps


def pad_rows(rows: Sequence[torch.Tensor | None], width: int, device: torch.device) -> torch.Tensor:
    """(B, T) float32 rows of per-token log-probs, zero after each row's tokens."""
    out = torch.zeros((len(rows), width), dtype=torch.float32)
    for i, r in enumerate(rows):
        r = _scored(r)
        out[i, :r.numel()] = r
    return out.to(device)


# -- Token log-probs and entropy from the final hidden states, a chunk of positions at a time ----------------
MIB = 2**20
FLOAT32_BYTES = 4

# Causal LMs whose forward ends ``logits = lm_head(base_model(...).last_hidden_state[:, keep])`` and then, for
# some, one of the operations below (read in transformers 5.25's modeling files; each family is checked
# against its own forward in tests/engine/trainer/test_chunked_logprobs.py).
_PLAIN = {
    "LlamaForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM", "MistralForCausalLM", "Phi3ForCausalLM",
    "GemmaForCausalLM", "Olmo2ForCausalLM", "SmolLM3ForCausalLM", "GPT2LMHeadModel",
}  # fmt: skip
_SOFTCAPPED = {"Gemma2ForCausalLM", "Gemma3ForCausalLM"}  # config.final_logit_softcapping (None: plain)
_DIVIDED = {"GraniteForCausalLM"}  # logits / config.logits_scaling
_MULTIPLIED = {"CohereForCausalLM"}  # logits * model.logit_scale


@dataclass(frozen=True)
class LinearHead:
    """The output layer as the logits see it: ``post(hidden @ weight.T + bias)`` where ``post`` divides
    by ``divide_by``, multiplies by ``multiply_by`` and soft-caps (``tanh(z / c) * c``), in that
    order, each only when set, in the model's dtype (as its forward does)."""

    weight: torch.Tensor  # (V, H), the parameter itself (tied: the input embedding's)
    bias: torch.Tensor | None = None  # (V,)
    divide_by: float | None = None
    multiply_by: float | None = None
    softcap: float | None = None

    @property
    def vocab(self) -> int:
        return int(self.weight.shape[0])


def linear_head(model: Any) -> LinearHead | None:
    """The output layer of a causal LM whose logits it alone makes (see ``_PLAIN`` and the scaled and
    soft-capped families), or None (another model, or an output layer that is not a plain
    ``torch.nn.Linear``, such as a LoRA-wrapped one): the caller then uses the full logits."""
    name = type(model).__name__
    if name not in _PLAIN | _SOFTCAPPED | _DIVIDED | _MULTIPLIED:
        return None
    layer = model.get_output_embeddings()
    if type(layer) is not torch.nn.Linear:
        return None
    model_config = model.config  # transformers': the fields vary by architecture
    if name in _SOFTCAPPED:
        cap = getattr(model_config, "final_logit_softcapping", None)
        return LinearHead(layer.weight, layer.bias, softcap=None if cap is None else float(cap))
    if name in _DIVIDED:
        return LinearHead(layer.weight, layer.bias, divide_by=float(model_config.logits_scaling))
    if name in _MULTIPLIED:
        return LinearHead(layer.weight, layer.bias, multiply_by=float(model.logit_scale))
    return LinearHead(layer.weight, layer.bias)


def logits_chunk_rows(positions: int, vocab: int, budget_mib: int) -> int | None:
    """Positions per chunk when the float32 logits of ``positions`` positions over ``vocab`` tokens
    would exceed ``budget_mib`` MiB: as many as fit in the budget (at least one); None when they fit,
    or when ``budget_mib`` is 0 (never chunk)."""
    if budget_mib < 0:
        raise ValueError(f"logits_chunk_mib must be >= 0 (0 = never chunk), got {budget_mib}")
    budget = budget_mib * MIB
    if budget == 0 or positions * vocab * FLOAT32_BYTES <= budget:
        return None
    return max(1, budget // (vocab * FLOAT32_BYTES))


def head_logprobs(hidden: torch.Tensor, head: LinearHead, targets: torch.Tensor, *, rows: int,
                  with_entropy: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
    """log p(target) per position (float32, differentiable in ``hidden`` and the head's parameters)
    and, with ``with_entropy``, the entropy of each position's distribution (float32, no gradient),
    from the final hidden states ``hidden`` (B, T, H) and ``targets`` (B, T), ``rows`` positions at
    a time. Equals ``token_logprobs(logits, targets)`` and ``token_entropy(logits)`` of the full
    logits up to float rounding."""
    if rows < 1:
        raise ValueError(f"rows must be >= 1, got {rows}")
    shape = targets.shape
    flat = hidden.reshape(-1, hidden.shape[-1])
    logps, entropy = _ChunkedLogprobs.apply(flat, head.weight, head.bias, targets.reshape(-1), head, rows,
                                            with_entropy)
    return logps.view(shape), None if entropy is None else entropy.view(shape)


def _logits(hidden: torch.Tensor, head: LinearHead) -> torch.Tensor:
    """One chunk's float32 logits, made as the model's forward makes them (its dtype, then float32)."""
    z = F.linear(hidden, head.weight, head.bias)
    if head.divide_by is not None:
        z = z / head.divide_by
    if head.multiply_by is not None:
        z = z * head.multiply_by
    if head.softcap is not None:
        z = torch.tanh(z / head.softcap) * head.softcap
    return z.float()


def _post_scale(logits: torch.Tensor, head: LinearHead) -> torch.Tensor | float | None:
    """d logits / d (hidden @ W.T + b) of one chunk, from its float32 logits (None: 1)."""
    scale = (1.0 / head.divide_by if head.divide_by is not None else 1.0) * (head.multiply_by or 1.0)
    if head.softcap is not None:
        return (1.0 - (logits / head.softcap) ** 2) * scale  # tanh' = 1 - tanh^2
    return None if scale == 1.0 else scale


class _ChunkedLogprobs(torch.autograd.Function):
    """(N, H) hidden states, the head's weight and bias, (N,) targets -> (N,) log-probs, (N,) entropy."""

    @staticmethod
    def forward(ctx: Any, hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                targets: torch.Tensor, head: LinearHead, rows: int,
                with_entropy: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
        n = hidden.shape[0]
        logps = torch.empty(n, dtype=torch.float32, device=hidden.device)
        lse = torch.empty_like(logps)
        entropy = torch.empty_like(logps) if with_entropy else None
        for start in range(0, n, rows):
            stop = min(start + rows, n)
            logits = _logits(hidden[start:stop], head)
            chunk_lse = torch.logsumexp(logits, dim=-1)
            lse[start:stop] = chunk_lse
            logps[start:stop] = logits.gather(-1, targets[start:stop].unsqueeze(-1)).squeeze(-1) - chunk_lse
            if entropy is not None:  # -sum p log p, with the chunk's log-softmax made in place
                logp = logits.sub_(chunk_lse.unsqueeze(-1))
                entropy[start:stop] = -logp.exp().mul_(logp).sum(-1)
                del logp
            del logits
        ctx.post, ctx.rows = (head.divide_by, head.multiply_by, head.softcap), rows  # the tensors: saved below
        ctx.save_for_backward(hidden, weight, bias, targets, lse)
        if entropy is not None:
            ctx.mark_non_differentiable(entropy)
        return logps, entropy

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad_logps: torch.Tensor | None,
                 _grad_entropy: torch.Tensor | None) -> tuple[torch.Tensor | None, ...]:
        hidden, weight, bias, targets, lse = ctx.saved_tensors
        need_hidden, need_weight, need_bias = ctx.needs_input_grad[:3]
        if grad_logps is None or not (need_hidden or need_weight or need_bias):
            return None, None, None, None, None, None, None
        head = LinearHead(weight, bias, *ctx.post)
        dtype = weight.dtype
        accumulate = torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype
        grad_hidden = torch.empty_like(hidden) if need_hidden else None
        grad_weight = torch.zeros(weight.shape, dtype=accumulate, device=weight.device) if need_weight else None
        grad_bias = torch.zeros(weight.shape[0], dtype=accumulate, device=weight.device) if need_bias else None
        n = hidden.shape[0]
        for start in range(0, n, ctx.rows):
            stop = min(start + ctx.rows, n)
            h = hidden[start:stop]
            logits = _logits(h, head)
            post = _post_scale(logits, head)
            g = grad_logps[start:stop].float().unsqueeze(-1)
            # g * (onehot(target) - softmax), built in place over the chunk's logits
            grad = logits.sub_(lse[start:stop].unsqueeze(-1)).exp_().mul_(-g)
            grad.scatter_add_(-1, targets[start:stop].unsqueeze(-1), g)
            if post is not None:
                grad = grad.mul_(post)
            grad = grad.to(dtype)
            if grad_hidden is not None:
                grad_hidden[start:stop] = grad @ weight
            if grad_weight is not None:
                grad_weight.addmm_(grad.t().to(accumulate), h.to(accumulate))
            if grad_bias is not None:
                grad_bias += grad.sum(0, dtype=accumulate)
            del grad
        return (grad_hidden, None if grad_weight is None else grad_weight.to(dtype),
                None if grad_bias is None else grad_bias.to(dtype), None, None, None, None)
