"""The MADPO loss, factorised over agents. Pure tensor functions, checked by hand in tests.

For a pair with per-agent sequence log-prob margins ``d_i = log pi_i(winner_i) - log pi_i(loser_i)``
the joint margin is ``sum_i d_i`` (the team's joint policy is the product of the agents'). Agent i's
loss is ``-log sigmoid(beta * (d_i + stopgrad(sum_{j != i} d_j)))``: the joint preference, with
gradients reaching agent i only through its own log-probs. Reference-anchored DPO replaces each
``d_i`` by ``d_i - d_i^ref``, the same margin under the frozen initial policy.

Shapes: ``N`` agents, ``B`` pairs.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def sequence_logps(token_logps: torch.Tensor, mask: torch.Tensor, loss_type: str = "seq_sum") -> torch.Tensor:
    """A completion's log-prob from its token log-probs: summed (``seq_sum``, CoMLRL) or averaged
    over its own tokens (``token_mean``). (B, T), (B, T) -> (B,)."""
    mask = mask.to(token_logps.dtype)
    total = (token_logps * mask).sum(-1)
    if loss_type == "seq_sum":
        return total
    if loss_type == "token_mean":
        return total / mask.sum(-1).clamp_min(1.0)
    raise ValueError(f"loss_type must be 'seq_sum' or 'token_mean', got {loss_type!r}")


def joint_margins(deltas: torch.Tensor, reference_deltas: torch.Tensor | None = None) -> torch.Tensor:
    """``sum_i (d_i - d_i^ref)`` per pair. (N, B), optional (N, B) -> (B,)."""
    anchored = deltas if reference_deltas is None else deltas - reference_deltas.to(deltas)
    return anchored.sum(0)


def agent_dpo_loss(own_delta: torch.Tensor, all_deltas: torch.Tensor, agent: int, beta: float,
                   reference_deltas: torch.Tensor | None = None) -> torch.Tensor:
    """Agent ``agent``'s loss, averaged over the pairs. (B,) with gradients, (N, B) detached -> ().

    ``own_delta`` is the agent's margin on the live graph; ``all_deltas`` every agent's margin
    without gradients (row ``agent`` is replaced by ``own_delta``), so the partners' margins are
    constants to this agent.
    """
    others = all_deltas.detach().to(own_delta)
    margin = own_delta + (others.sum(0) - others[agent])
    if reference_deltas is not None:
        margin = margin - reference_deltas.to(own_delta).sum(0)
    return -F.logsigmoid(beta * margin).mean()


def pair_statistics(deltas: torch.Tensor, beta: float, reference_deltas: torch.Tensor | None = None) -> dict[str, float]:
    """The joint DPO loss, preference accuracy (margin > 0) and mean margin of a batch (no grad)."""
    with torch.no_grad():
        margins = joint_margins(deltas.detach().float(), reference_deltas)
        return {"dpo/loss": float(-F.logsigmoid(beta * margins).mean()),
                "dpo/accuracy": float((margins > 0).float().mean()),
                "dpo/joint_margin_mean": float(margins.mean())}
