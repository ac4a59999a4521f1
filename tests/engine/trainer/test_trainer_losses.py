"""Hand-computed checks of masking after EOS, log-prob gather, loss reductions, clipping and k3 KL."""

from __future__ import annotations

import math

import pytest
import torch

from engine.trainer.losses import (
    completion_mask,
    k3_kl,
    lr_factor,
    policy_loss,
    reduce_tokens,
    token_entropy,
    token_logprobs,
)


def test_completion_mask_keeps_first_eos_and_drops_everything_after() -> None:
    eos, pad = 9, 0
    ids = torch.tensor([[5, 6, eos, pad, pad], [5, eos, 7, eos, 8], [1, 2, 3, 4, 5]])
    assert completion_mask(ids, [eos]).tolist() == [[1, 1, 1, 0, 0], [1, 1, 0, 0, 0], [1, 1, 1, 1, 1]]


def test_completion_mask_with_pad_equal_to_eos() -> None:
    ids = torch.tensor([[3, 2, 2, 2]])  # eos == pad == 2: only the first one counts
    assert completion_mask(ids, {2}).tolist() == [[1, 1, 0, 0]]


def test_token_logprobs_matches_log_softmax() -> None:
    logits = torch.tensor([[[0.0, math.log(3.0)], [math.log(2.0), math.log(2.0)]]])
    targets = torch.tensor([[1, 0]])
    out = token_logprobs(logits, targets)
    assert out.tolist()[0] == pytest.approx([math.log(3 / 4), math.log(1 / 2)])


def test_entropy_of_uniform_distribution() -> None:
    logits = torch.zeros(1, 1, 4)
    assert token_entropy(logits).item() == pytest.approx(math.log(4))


def test_reduce_tokens_sum_and_mean_ignore_masked_positions() -> None:
    values = torch.tensor([[1.0, 2.0, 100.0], [3.0, 100.0, 100.0]])
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    assert reduce_tokens(values, mask, "seq_sum").tolist() == [3.0, 3.0]
    assert reduce_tokens(values, mask, "token_mean").tolist() == [1.5, 3.0]
    with pytest.raises(ValueError, match="loss_type"):
        reduce_tokens(values, mask, "mean")


def test_plain_policy_loss_is_minus_advantage_times_sequence_logprob() -> None:
    logps = torch.tensor([[-1.0, -2.0, -50.0], [-0.5, -50.0, -50.0]])
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    adv = torch.tensor([2.0, -1.0])
    loss, _ = policy_loss(logps, mask, adv, loss_type="seq_sum")
    # per sequence: -2 * (-3) = 6 and -(-1) * (-0.5) = -0.5; mean 2.75 (post-EOS -50s ignored)
    assert loss.item() == pytest.approx(2.75)
    loss, _ = policy_loss(logps, mask, adv, loss_type="token_mean")
    # -2 * (-1.5) = 3 and -0.5; mean 1.25
    assert loss.item() == pytest.approx(1.25)


def test_clipped_loss_equals_plain_gradient_at_ratio_one() -> None:
    logps = torch.tensor([[-1.0, -2.0]], requires_grad=True)
    mask = torch.ones(1, 2)
    adv = torch.tensor([1.5])
    plain, _ = policy_loss(logps, mask, adv)
    (g_plain,) = torch.autograd.grad(plain, logps)
    clipped, stats = policy_loss(logps, mask, adv, old_logps=logps.detach().clone(), clip_epsilon=0.2)
    (g_clip,) = torch.autograd.grad(clipped, logps)
    assert torch.allclose(g_plain, g_clip)
    assert stats["clip_fraction"] == 0.0


def test_clipping_caps_the_ratio_for_positive_advantage() -> None:
    old = torch.tensor([[math.log(0.5)]])
    new = torch.tensor([[math.log(0.9)]], requires_grad=True)  # ratio 1.8 > 1.2
    loss, stats = policy_loss(new, torch.ones(1, 1), torch.tensor([1.0]), old_logps=old, clip_epsilon=0.2)
    assert loss.item() == pytest.approx(-1.2)  # -min(1.8, 1.2) * 1
    (grad,) = torch.autograd.grad(loss, new)
    assert grad.item() == 0.0  # clipped: no gradient pushes further
    assert stats["clip_fraction"] == 1.0
    # negative advantage: the pessimistic branch keeps the unclipped ratio
    loss, _ = policy_loss(new, torch.ones(1, 1), torch.tensor([-1.0]), old_logps=old, clip_epsilon=0.2)
    assert loss.item() == pytest.approx(1.8)


def test_clipping_needs_old_logprobs() -> None:
    with pytest.raises(ValueError, match="old_logps"):
        policy_loss(torch.zeros(1, 1), torch.ones(1, 1), torch.ones(1), clip_epsilon=0.2)


def test_k3_kl_values() -> None:
    assert k3_kl(torch.tensor([-1.0]), torch.tensor([-1.0])).item() == 0.0
    # d = ref - pol = log 2: exp(d) - d - 1 = 1 - log 2
    out = k3_kl(torch.tensor([math.log(0.25)]), torch.tensor([math.log(0.5)]))
    assert out.item() == pytest.approx(1 - math.log(2))


def test_kl_as_loss_term_adds_coef_times_kl() -> None:
    logps = torch.tensor([[math.log(0.25)]])
    ref = torch.tensor([[math.log(0.5)]])
    loss, stats = policy_loss(logps, torch.ones(1, 1), torch.tensor([0.0]), ref_logps=ref, kl_coef=0.5)
    assert loss.item() == pytest.approx(0.5 * (1 - math.log(2)))
    assert stats["kl_loss"] == pytest.approx(1 - math.log(2))


def test_lr_schedules() -> None:
    assert [lr_factor(s, warmup_steps=3, total_steps=10, schedule="constant") for s in range(5)] == [
        0.25, 0.5, 0.75, 1.0, 1.0]
    assert lr_factor(3, warmup_steps=0, total_steps=4, schedule="linear") == pytest.approx(0.25)
    assert lr_factor(0, warmup_steps=0, total_steps=4, schedule="cosine") == pytest.approx(1.0)
    assert lr_factor(2, warmup_steps=0, total_steps=4, schedule="cosine") == pytest.approx(0.5)
