"""Preference pairs in the transcripts view: a madpo run's winner and loser episodes side by side
with the reward gap; pairs cut by the filters fall back to single episodes; other runs unchanged."""

from __future__ import annotations

from app.pairs import pair_gap, pair_title, pairs_by_gap, preference_pairs, stores_pairs
from db.records import EpisodeView
from db.store import Store
from engine.transcripts import Episode, TurnRecord


def _episode(sample: int, reward: float, split: str = "train", step: int = 1, gap: float = 0.0) -> EpisodeView:
    advantage = gap if sample % 2 == 0 else -gap  # the signed reward gap the trainer stores
    turns = (TurnRecord(1, 0, "writer", "p", f"w{sample}", reward, reward, advantage),)
    return EpisodeView(id=sample, run_id=1, step=step, split=split, sample_index=sample, item_index=sample // 2,
                       reward=reward, ret=reward, turns=turns)


def test_pairs_are_rebuilt_from_sample_order() -> None:
    episodes = [_episode(1, 0.2), _episode(0, 0.6), _episode(3, 0.1), _episode(0, 0.5, split="eval")]
    pairs = preference_pairs(episodes)
    assert [(w.sample_index, None if lo is None else lo.sample_index) for w, lo in pairs] == [
        (0, 1), (0, None), (3, None)]  # pair 0 whole, the eval episode alone, pair 1 lost its winner
    winner, loser = pairs[0]
    assert pair_title(1, winner, loser) == "pair 1 · item 0 · winner 0.600 · loser 0.200 · reward gap +0.400"
    assert stores_pairs({"trainer": {"algorithm": "madpo"}}) and not stores_pairs({"trainer": {"algorithm": "magrpo"}})


def _madpo_run(store: Store, experiment: int, make_config) -> int:
    run = store.create_run(experiment, make_config("pairs", algorithm="madpo"), "cpu", total_steps=1, device="cpu")
    store.transition(run.id, "starting")
    store.transition(run.id, "running")
    episodes = []
    for n, (win, lose) in enumerate(((0.6, 0.2), (0.9, 0.4))):
        for side, reward, sign in ((0, win, 1.0), (1, lose, -1.0)):
            turns = tuple(TurnRecord(1, i, agent, f"prompt {agent}", f"{'winner' if side == 0 else 'loser'} {n} of {agent}",
                                 reward, reward, sign * (win - lose)) for i, agent in enumerate(("writer", "editor")))
            episodes.append(Episode(sample_index=2 * n + side, split="train", item_index=n, turns=turns))
    store.log_step(run.id, 1, 4, {"train/reward_mean": 0.5}, episodes)
    return run.id


def test_madpo_transcripts_show_winner_and_loser_side_by_side(app, store: Store, experiment: int,
                                                             make_config) -> None:
    run_id = _madpo_run(store, experiment, make_config)
    at = app("transcripts", run=run_id)
    assert not at.exception
    headers = [m.value for m in at.markdown if m.value.startswith("#### pair")]
    assert headers == ["#### pair 1 · item 0 · winner 0.600 · loser 0.200 · reward gap +0.400",
                       "#### pair 2 · item 1 · winner 0.900 · loser 0.400 · reward gap +0.500"]
    assert [c.text[0].value for c in at.chat_message][:4] == [
        "winner 0 of writer", "winner 0 of editor", "loser 0 of writer", "loser 0 of editor"]
    at.toggle(key="tr_pairs").set_value(False).run()
    assert not [m for m in at.markdown if m.value.startswith("#### pair")] and len(at.chat_message) == 8


def test_other_runs_have_no_pair_switch(app, store: Store, experiment: int, seed) -> None:
    run_id = seed(experiment, status="running", steps=1, episodes_per_step=2)
    at = app("transcripts", run=run_id)
    assert not at.exception and not [t for t in at.toggle if t.key == "tr_pairs"]


def test_pairs_are_selected_by_reward_gap() -> None:
    episodes = [_episode(0, 0.6, gap=0.4), _episode(1, 0.2, gap=0.4), _episode(2, 0.9, gap=0.05),
                _episode(3, 0.85, gap=0.05), _episode(0, 0.5, "eval")]
    pairs = preference_pairs(episodes)
    assert [pair_gap(w) for w, _ in pairs] == [0.4, None, 0.05]  # the eval episode is no pair
    assert [w.sample_index for w, _ in pairs_by_gap(pairs, min_gap=0.1)] == [0]
    assert [w.sample_index for w, _ in pairs_by_gap(pairs, max_gap=0.1)] == [2]
    assert len(pairs_by_gap(pairs)) == 3  # no bound: everything, the eval episode included
    lone = preference_pairs([episodes[3]])  # its winner filtered out: the gap still selects it
    assert pairs_by_gap(lone, min_gap=0.01) == lone and pairs_by_gap(lone, min_gap=0.1) == []


def test_transcripts_select_pairs_by_reward_gap(app, store: Store, experiment: int, make_config) -> None:
    run_id = _madpo_run(store, experiment, make_config)  # gaps 0.4 and 0.5
    at = app("transcripts", run=run_id)
    at.number_input(key="tr_gap_min").set_value(0.45).run()
    assert not at.exception
    assert [m.value for m in at.markdown if m.value.startswith("#### pair")] == [
        "#### pair 1 · item 1 · winner 0.900 · loser 0.400 · reward gap +0.500"]
    at.number_input(key="tr_gap_min").set_value(0.6).run()
    assert not [m for m in at.markdown if m.value.startswith("#### pair")]
    assert any("No pair at this step has a reward gap" in i.value for i in at.info)
    at.number_input(key="tr_gap_min").set_value(None).run()
    at.number_input(key="tr_gap_max").set_value(0.45).run()
    assert [m.value for m in at.markdown if m.value.startswith("#### pair")] == [
        "#### pair 1 · item 0 · winner 0.600 · loser 0.200 · reward gap +0.400"]
