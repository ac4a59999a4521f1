"""How a step's prompts are split over FSDP ranks (:mod:`engine.distributed.groups`): whole groups per
rank, the group baseline where the group is, and the loss scale that makes the ranks' mean gradient the
whole batch's. Computed by hand."""

from __future__ import annotations

import pytest

from engine.distributed.groups import group_advantages, loss_scale, rank_groups, rank_samples


def test_groups_split_in_blocks_the_first_ranks_taking_the_remainder():
    assert [rank_groups(5, 2, r) for r in range(2)] == [range(0, 3), range(3, 5)]
    assert [rank_groups(4, 3, r) for r in range(3)] == [range(0, 2), range(2, 3), range(3, 4)]
    assert [rank_groups(1, 2, r) for r in range(2)] == [range(0, 1), range(1, 1)]
    assert rank_groups(6, 1, 0) == range(0, 6)
    with pytest.raises(ValueError, match="rank"):
        rank_groups(4, 2, 2)


def test_a_groups_samples_stay_on_one_rank():
    # 3 prompts x K=4 on 2 ranks: rank 0 rows 0..7 (prompts 0, 1), rank 1 rows 8..11 (prompt 2)
    assert rank_samples(3, 4, 2, 0) == range(0, 8)
    assert rank_samples(3, 4, 2, 1) == range(8, 12)
    rows = [i for r in range(3) for i in rank_samples(7, 3, 3, r)]
    assert rows == list(range(21))


def test_group_advantages_by_hand():
    # groups of 2: [1, 3] mean 2 -> [-1, 1]; [4, 4] -> [0, 0]
    assert group_advantages([1.0, 3.0, 4.0, 4.0], 2) == [-1.0, 1.0, 0.0, 0.0]
    assert group_advantages([1.0, 3.0], 2, baseline=False) == [1.0, 3.0]
    with pytest.raises(ValueError, match="k=2"):
        group_advantages([1.0, 2.0, 3.0], 2)


def test_loss_scale_by_hand():
    # 9 rows over 2 ranks split 6 + 3: mean over ranks of (6*2/9) g6 and (3*2/9) g3 = (6 g6 + 3 g3) / 9
    assert loss_scale(6, 9, 2) == pytest.approx(12 / 9)
    assert loss_scale(3, 9, 2) == pytest.approx(6 / 9)
    assert loss_scale(4, 8, 2) == 1.0
    with pytest.raises(ValueError):
        loss_scale(0, 0, 2)
