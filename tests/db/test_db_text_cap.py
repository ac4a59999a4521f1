"""A stored prompt or completion is capped (:data:`db.text_cap.TEXT_CAP_BYTES`): a 10 MB completion is
kept as its first 64 KiB and a marker naming the cap, so the transcript page and the export stay small."""

from __future__ import annotations

from db.store import Store
from engine.transcripts import Episode, TurnRecord

CAP = 64 * 1024  # the documented cap (docs/storage.md), written out: the test must not read it from the code


def _episode(prompt: str, completion: str, name: str = "writer") -> Episode:
    return Episode(sample_index=0, split="train", item_index=0,
                   turns=(TurnRecord(1, 0, name, prompt, completion, 1.0, ret=1.0, advantage=0.0),))


def test_a_ten_megabyte_completion_is_stored_capped_with_a_marker_naming_the_cap(store: Store, run_id: int) -> None:
    completion = "x" * (10 * 1024 * 1024)
    store.log_step(run_id, 1, 4, {}, [_episode("short prompt", completion)])
    [turn] = store.episodes(run_id)[0].turns
    assert len(turn.completion.encode()) <= CAP, f"stored {len(turn.completion.encode())} bytes"
    assert turn.completion.startswith("x" * 1000)
    assert "64 KiB" in turn.completion and "truncated" in turn.completion  # the marker names the cap
    assert "10,485,760 bytes" in turn.completion  # and how long the text was
    assert turn.prompt == "short prompt"  # a short text is stored as it is


def test_a_huge_prompt_is_capped_too_and_multibyte_text_is_cut_on_a_character(store: Store, run_id: int) -> None:
    prompt = "é" * (CAP)  # two bytes each: twice the cap
    store.log_step(run_id, 1, 4, {}, [_episode(prompt, "fine")])
    [turn] = store.episodes(run_id)[0].turns
    stored = turn.prompt.encode()  # it decodes: no character was cut in half
    assert len(stored) <= CAP and turn.prompt.startswith("é" * 1000) and "64 KiB" in turn.prompt
    assert turn.completion == "fine"


def test_text_at_the_cap_is_kept_whole(store: Store, run_id: int) -> None:
    text = "y" * CAP
    store.log_step(run_id, 1, 4, {}, [_episode("p", text)])
    assert store.episodes(run_id)[0].turns[0].completion == text


def test_a_nul_character_is_stored_as_the_replacement_character() -> None:
    """PostgreSQL refuses NUL in text ("A string literal cannot contain NUL"); a tiny model samples it."""
    from db.text_cap import cap_text

    assert cap_text("a\x00b\x00") == "a\ufffdb\ufffd"
    assert cap_text("plain") == "plain"
