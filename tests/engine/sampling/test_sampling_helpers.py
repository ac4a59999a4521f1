"""Pure sampling helpers, checked against hand-computed values."""

from __future__ import annotations

import math

import pytest
import torch

from engine.sampling.sampler import completion_mask_from_eos, filter_logits, left_pad

NEG_INF = float("-inf")


def test_left_pad() -> None:
    ids, mask = left_pad([[5, 6, 7], [8]], pad_id=0)
    assert ids.tolist() == [[5, 6, 7], [0, 0, 8]]
    assert mask.tolist() == [[1, 1, 1], [0, 0, 1]]


def test_left_pad_refuses_empty_prompts() -> None:
    with pytest.raises(ValueError, match="empty prompt"):
        left_pad([[1], []], pad_id=0)


def test_completion_mask_covers_up_to_the_first_eos() -> None:
    eos = 2
    ids = torch.tensor(
        [
            [5, 6, 2, 2, 2],  # EOS at 2, then padding (pad == eos)
            [5, 2, 7, 2, 9],  # tokens after the first EOS are masked even if not EOS
            [5, 6, 7, 8, 9],  # no EOS: everything counts
            [2, 0, 0, 0, 0],  # EOS first
        ]
    )
    assert completion_mask_from_eos(ids, [eos]).tolist() == [
        [1, 1, 1, 0, 0],
        [1, 1, 0, 0, 0],
        [1, 1, 1, 1, 1],
        [1, 0, 0, 0, 0],
    ]


def test_completion_mask_with_several_eos_ids() -> None:
    ids = torch.tensor([[4, 3, 1], [4, 1, 3]])
    assert completion_mask_from_eos(ids, [1, 3]).tolist() == [[1, 1, 0], [1, 1, 0]]


def test_temperature_divides_the_logits() -> None:
    out = filter_logits(torch.tensor([[2.0, 4.0, -1.0]]), temperature=2.0)
    assert out.tolist() == [[1.0, 2.0, -0.5]]


def test_top_k_keeps_the_k_largest_and_ties() -> None:
    out = filter_logits(torch.tensor([[2.0, 1.0, 0.0, -1.0], [3.0, 1.0, 1.0, 0.0]]), top_k=2)
    assert out.tolist() == [[2.0, 1.0, NEG_INF, NEG_INF], [3.0, 1.0, 1.0, NEG_INF]]


@pytest.mark.parametrize(
    ("top_p", "kept"),
    [
        # probabilities 0.5, 0.3, 0.15, 0.05: ascending cumulative sums 0.05, 0.20, 0.50, 1.00
        (0.8, [True, True, False, False]),  # drop where cumsum <= 0.2
        (0.85, [True, True, True, False]),  # drop where cumsum <= 0.15
        (0.1, [True, False, False, False]),  # the most likely token always stays
    ],
)
def test_top_p_keeps_the_nucleus(top_p: float, kept: list[bool]) -> None:
    logits = torch.tensor([[math.log(p) for p in (0.5, 0.3, 0.15, 0.05)]])
    out = filter_logits(logits, top_p=top_p)
    assert torch.isfinite(out[0]).tolist() == kept


def test_filters_compose_in_order_temperature_top_k_top_p() -> None:
    # temperature 0.5 turns logits log(p) into log(p^2): 0.25, 0.09, 0.0225, 0.0025 (unnormalised);
    # top-k 3 drops the last; top-p 0.7 on the renormalised 0.25/.3625=0.69, 0.09/.3625=0.248, 0.062 drops the 0.062
    logits = torch.tensor([[math.log(p) for p in (0.5, 0.3, 0.15, 0.05)]])
    out = filter_logits(logits, temperature=0.5, top_k=3, top_p=0.7)
    assert torch.isfinite(out[0]).tolist() == [True, True, False, False]
    assert out[0, 0].item() == pytest.approx(2 * math.log(0.5))


def test_no_filters_is_the_identity() -> None:
    logits = torch.randn(2, 7)
    assert torch.equal(filter_logits(logits, temperature=1.0, top_k=None, top_p=1.0), logits)
    assert torch.equal(filter_logits(logits, top_k=0), logits)
