"""NullSink, MemorySink and MultiSink behaviour."""

from __future__ import annotations

import pytest

from engine.sinks import BaseSink, Episode, MemorySink, MultiSink, NullSink, Sink, TurnRecord


def _episode(sample: int, reward: float = 1.0) -> Episode:
    turn = TurnRecord(1, 0, "writer", "p", "c", reward, reward, 0.5)
    return Episode(sample_index=sample, split="train", item_index=3, turns=(turn,))


def test_every_sink_satisfies_the_protocol() -> None:
    for sink in (NullSink(), MemorySink(), MultiSink(NullSink())):
        assert isinstance(sink, Sink)


def test_null_sink_never_stops() -> None:
    sink = NullSink()
    sink.start(3, {})
    sink.log_step(1, 4, {"train/reward_mean": 1.0}, [_episode(0)])
    assert sink.should_stop() is False


def test_memory_sink_keeps_steps_metrics_transcripts_and_events() -> None:
    sink = MemorySink()
    sink.start(2, {"lr": 1e-3})
    sink.log_step(1, 4, {"train/reward_mean": 0.25}, [_episode(0), _episode(1)])
    sink.log_step(2, 8, {"train/reward_mean": 0.75}, [])
    sink.log_metrics(2, 8, {"eval/turn_1/reward_mean": 0.5})
    sink.log_checkpoint(2, "/tmp/ckpt-2")
    sink.finish("completed")

    assert sink.started == [(2, {"lr": 1e-3})]
    assert [(s.step, s.env_step) for s in sink.steps] == [(1, 4), (2, 8)]
    assert sink.series("train/reward_mean") == [(1, 0.25), (2, 0.75)]
    assert sink.last("eval/turn_1/reward_mean") == 0.5
    assert [e.sample_index for e in sink.episodes] == [0, 1]
    assert len(sink.transcripts) == 1  # the empty episode list of step 2 is not a transcript report
    assert sink.checkpoints == [(2, "/tmp/ckpt-2")]
    assert sink.finished == ["completed"]


def test_memory_sink_names_known_keys_for_a_missing_metric() -> None:
    sink = MemorySink()
    sink.log_metrics(1, 1, {"train/reward_mean": 1.0})
    with pytest.raises(KeyError, match="train/reward_mean"):
        sink.last("train/loss")


def test_memory_sink_stops_after_the_requested_steps() -> None:
    sink = MemorySink(stop_after_steps=2)
    sink.log_step(1, 1, {}, [])
    assert not sink.should_stop()
    sink.log_step(2, 2, {}, [])
    assert sink.should_stop()


def test_memory_sink_copies_what_it_is_given() -> None:
    sink = MemorySink()
    metrics = {"a/b": 1.0}
    sink.log_step(1, 1, metrics, [])
    metrics["a/b"] = 2.0
    assert sink.steps[0].metrics == {"a/b": 1.0}


def test_multi_sink_fans_out_and_stops_when_any_asks() -> None:
    a, b = MemorySink(), MemorySink(stop_after_steps=1)
    multi = MultiSink(a, b)
    multi.start(1, {"x": 1})
    multi.log_step(1, 2, {"train/reward_mean": 1.0}, [_episode(0)])
    multi.log_metrics(1, 2, {"eval/x": 3.0})
    multi.log_transcripts(1, [_episode(1)])
    multi.log_checkpoint(1, "p")
    assert multi.should_stop()
    multi.finish("stopped")
    for sink in (a, b):
        assert sink.series("train/reward_mean") == [(1, 1.0)]
        assert sink.last("eval/x") == 3.0
        assert [e.sample_index for e in sink.episodes] == [0, 1]
        assert sink.checkpoints == [(1, "p")]
        assert sink.finished == ["stopped"]


def test_multi_sink_finishes_every_sink_even_when_one_fails() -> None:
    class Broken(BaseSink):
        def finish(self, status: str) -> None:
            raise OSError("disk full")

    last = MemorySink()
    with pytest.raises(OSError, match="disk full"):
        MultiSink(Broken(), last).finish("completed")
    assert last.finished == ["completed"]


def test_pruned_checkpoints_are_kept_by_the_memory_sink_and_fanned_out() -> None:
    a, b = MemorySink(), MemorySink()
    MultiSink(a, b).log_checkpoint_pruned(1, "/tmp/checkpoints/checkpoint-1")
    NullSink().log_checkpoint_pruned(1, "/tmp/checkpoints/checkpoint-1")  # the base sink ignores it
    assert a.pruned == b.pruned == [(1, "/tmp/checkpoints/checkpoint-1")]


def test_the_training_loop_reports_each_checkpoint_it_prunes(tmp_path) -> None:
    """``checkpoint_total_limit`` 2 over four steps: checkpoints 1 and 2 are removed, and the sink hears of each."""
    from pathlib import Path

    from engine.trainer.core import LoopSchedule, run_loop

    class Owner:  # the loop's view of a trainer (engine.trainer.core.LoopOwner)
        env_step = 0
        eval_dataset = None
        last_checkpoint: str | None = None
        step = 0

        def evaluate(self, *, sink: Sink) -> dict[str, float]:
            return {}

        def save_checkpoint(self, path: Path) -> Path:
            path.mkdir(parents=True)
            return path

        def advance(self) -> tuple[dict, list]:
            self.step += 1
            return {}, []

    owner, sink, root = Owner(), MemorySink(), tmp_path / "checkpoints"
    schedule = LoopSchedule(total=4, eval_interval=0, logging_steps=1, checkpoint_interval=1, checkpoint_total_limit=2)
    run_loop(owner, position=lambda: owner.step, advance=owner.advance, schedule=schedule, sink=sink,
             checkpoint_root=root, run_config={})
    assert sorted(p.name for p in root.iterdir()) == ["checkpoint-3", "checkpoint-4"]
    assert sink.pruned == [(1, str(root / "checkpoint-1")), (2, str(root / "checkpoint-2"))]
