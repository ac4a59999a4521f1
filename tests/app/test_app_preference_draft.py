"""The form refuses, at their fields, the settings a draft's algorithm would not read: MAGRPO-only
ones for ``madpo`` and the preference ones for the MAGRPO family, as the run itself would."""

from __future__ import annotations

from app import draft as drafts
from tests.app.drafts import blank_draft


def _draft(**trainer) -> dict:
    draft = blank_draft()
    draft["trainer"].update(trainer)
    return draft


def test_madpo_draft_with_its_own_settings_is_valid() -> None:
    config, errors = drafts.validate(_draft(algorithm="madpo", dpo_beta=0.2, pair_selection="all",
                                            preference_pairs_per_sample=None, preference_num_candidates=8))
    assert errors == {} and config.trainer.algorithm == "madpo" and config.trainer.dpo_beta == 0.2


def test_settings_the_algorithm_ignores_are_named() -> None:
    _, errors = drafts.validate(_draft(algorithm="madpo", clip_epsilon=0.2))
    assert errors["trainer.clip_epsilon"] == ["not used by madpo; leave it at its default (None) or choose an "
                                              "algorithm that reads it"]
    _, errors = drafts.validate(_draft(algorithm="magrpo", dpo_beta=0.5))
    assert list(errors) == ["trainer.dpo_beta"]
    _, errors = drafts.validate(_draft(algorithm="iac", reference_free=True))  # not the default (False)
    assert "trainer.reference_free" in errors
