"""The learning guard's checks, without training: a halved gain fails anywhere, a changed token or number fails on
the recorded platform, a platform difference is named field by field, edited workloads make the record
stale, and the bench says how to install CoMLRL before it trains anything."""

from __future__ import annotations

import dataclasses

import pytest

from bench.training import guard_platform, guard_record, guard_workloads, learning_guard
from bench.training.vs_comlrl import ComlrlMissingError

RECORDED = {"before": 0.04, "after": 0.36, "gain": 0.32, "fingerprint": "ab" * 32}


def measured(**changes: object) -> dict[str, object]:
    return {**RECORDED, "cpu_s": 1.0, **changes}


def test_the_recorded_numbers_pass() -> None:
    assert guard_record.check(RECORDED, measured(cpu_s=9.0), exact=True) == []


def test_a_halved_gain_fails_on_any_platform() -> None:
    half = measured(after=0.20, gain=0.16)
    for exact in (True, False):
        assert any("below 0.6 x the recorded" in p for p in guard_record.check(RECORDED, half, exact=exact))
    assert guard_record.check(RECORDED, measured(after=0.28, gain=0.24), exact=False) == []  # 0.75 x: passes elsewhere


def test_a_changed_token_or_number_fails_on_the_recorded_platform_only() -> None:
    other_tokens = measured(fingerprint="cd" * 32)
    assert [p.split(" ")[0] for p in guard_record.check(RECORDED, other_tokens, exact=True)] == ["fingerprint"]
    assert guard_record.check(RECORDED, other_tokens, exact=False) == []
    nudged = measured(after=0.36 + 1e-12, gain=0.32 + 1e-12)
    assert {p.split(" ")[0] for p in guard_record.check(RECORDED, nudged, exact=True)} == {"after", "gain"}


def test_a_family_without_clear_learning_may_not_collapse() -> None:
    flat = {**RECORDED, "after": 0.05, "gain": 0.01}
    assert guard_record.check(flat, measured(after=0.03, gain=-0.01, fingerprint="x"), exact=False) == []
    assert "lost more than" in guard_record.check(flat, measured(after=0.0, gain=-0.06), exact=False)[0]


def test_platform_differences_are_named() -> None:
    here = guard_platform.platform_record()
    assert guard_platform.platform_mismatch(here, here) == []
    other = {**here, "torch": "0.0.0", "cpu_flags": ["avx2"], "python": "2.7"}  # python is not compared
    assert guard_platform.platform_mismatch(other, here) == [
        f"torch: '0.0.0' -> {here['torch']!r}", f"cpu_flags: ['avx2'] -> {here['cpu_flags']!r}"]


def test_edited_workloads_make_the_record_stale(monkeypatch: pytest.MonkeyPatch) -> None:
    record = {"workload": guard_record.workload_digest(), "families": dict.fromkeys(guard_workloads.FAMILIES, {})}
    assert guard_record.stale(record) is None
    magrpo = guard_workloads.FAMILIES["magrpo"]
    monkeypatch.setitem(guard_workloads.FAMILIES, "magrpo", dataclasses.replace(
        magrpo, settings={**magrpo.settings, "agent_learning_rate": 5e-3}))
    assert "the workloads changed" in guard_record.stale(record)


def test_the_bench_says_how_to_install_comlrl_before_training(monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    def missing() -> None:
        raise ComlrlMissingError("--vs-comlrl needs CoMLRL 1.4.3: pip install --no-deps comlrl==1.4.3")

    monkeypatch.setattr("bench.training.vs_comlrl.import_comlrl", missing)
    monkeypatch.setattr(learning_guard, "run_cooplab", lambda *a: pytest.fail("trained before the CoMLRL check"))
    assert learning_guard.main(["--comlrl", "--families", "grpo"]) == 2
    assert "pip install --no-deps comlrl==1.4.3" in capsys.readouterr().err


def test_a_cooplab_variant_changes_only_what_it_names() -> None:
    magrpo = guard_workloads.FAMILIES["magrpo"]
    plain = guard_workloads.cooplab_settings(magrpo, 3)
    assert plain == {**guard_workloads.SAMPLING, **magrpo.settings, "seed": 3, "transcripts_per_step": 0}
    assert guard_workloads.cooplab_settings(magrpo, 3, ["no_clip"]) == {**plain, "max_grad_norm": None}
    assert guard_workloads.cooplab_settings(magrpo, 3, ["plain_text"]) == plain
    with pytest.raises(ValueError, match="unknown CoopLab variant"):
        guard_workloads.cooplab_settings(magrpo, 3, ["no_such"])


def test_the_plain_text_variant_gives_the_reward_comlrls_text_inside_its_block_only() -> None:
    from engine.models.tiny import build_tiny_tokenizer
    from engine.sampling import sampler

    tokenizer = build_tiny_tokenizer(1024)
    cut = tokenizer("日", add_special_tokens=False)["input_ids"][:1]  # the first of its three bytes
    assert sampler.decode_completions(tokenizer, [cut]) == [""]  # CoopLab drops a cut character
    with guard_workloads.variant_context(["plain_text"]):
        assert sampler.decode_completions(tokenizer, [cut]) == ["\ufffd"]  # CoMLRL's text
    assert sampler.decode_completions(tokenizer, [cut]) == [""]


def test_the_bench_records_no_variant(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(learning_guard, "run_cooplab", lambda *a, **k: pytest.fail("trained before the check"))
    with pytest.raises(SystemExit):
        learning_guard.main(["--record", "--cooplab-variant", "no_clip"])
