"""An iteration file that cannot be written (full disk) stops the run with a one-line reason naming the
folder, and leaves no partial folder behind."""

from __future__ import annotations

import errno

import pytest

from engine import MADPOIterConfig, MADPOIterTrainer
from engine.schema.folders import WriteError
from tests.engine.preference.pref_helpers import PROMPTS, digit_share, tiny_team


def test_a_full_disk_under_policy_checkpoint_dir_stops_the_run_and_says_why(small_fs) -> None:
    models, tokenizers = tiny_team()
    config = MADPOIterConfig(num_iterations=1, preference_num_candidates=3, preference_pairs_per_sample=2,
                             max_new_tokens=6, train_batch_size=4, items_per_step=4, eval_interval=0,
                             comparator_policy="history", policy_checkpoint_dir=str(small_fs / "policies"))
    trainer = MADPOIterTrainer(agents=models, tokenizer=tokenizers, train_dataset=PROMPTS, reward_func=digit_share,
                               args=config)
    with pytest.raises(WriteError) as caught:
        trainer.train()
    target = small_fs / "policies" / "iteration_001"
    assert caught.value.errno == errno.ENOSPC and caught.value.path == str(target)
    assert "\n" not in str(caught.value) and str(caught.value).startswith("no space left on device writing")
    assert sorted(p.name for p in (small_fs / "policies").iterdir()) == []  # no partial folder
