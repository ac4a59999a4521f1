"""The MADPO loss, factorised over agents. Pure tensor functions, checked by hand in tests.

For a pair with per-agent sequence log-prob margins ``d_i = log pi_i(winner_i) - log pi_i(loser_i)``
the joint margin is ``sum_i d_i`` (the team's joint policy is the product of the agents'). Agent i's
loss is ``-log sigmoid(beta * (d_i + stopgrad(sum_{j != i} d_j)))``: the joint preference, with
gradients reaching agent i only through its own log-probs. Reference-anchored DPO replaces each
``d_i`` by ``d_i - d_i^ref``, the same margin under the frozen initial policy.

Shapes: ``N`` agents, ``B`` pairs. A completion's log-prob is
:func:`engine.trainer.losses.reduce_tokens` of its token log-probs (``seq_sum`` as CoMLRL, or
``token_mean``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


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
