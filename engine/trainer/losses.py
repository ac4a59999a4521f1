"""Token-level pieces of the policy-gradient loss. Pure tensor functions, checked by hand in tests.

Shapes: ``B`` sequences, ``T`` completion positions (right-padded), ``V`` vocabulary.
"""

from __future__ import annotations

import torch


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
