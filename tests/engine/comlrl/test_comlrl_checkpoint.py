"""engine.comlrl checkpoints carry CoMLRL's identity fields: the trainer class, the training run's id
(kept by a resumed run) and the W&B run, as read_checkpoint_metadata returns them."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest

from engine.comlrl.trainers.reinforce import MAGRPOConfig, MAGRPOTrainer
from engine.comlrl.utils import read_checkpoint_metadata
from engine.comlrl.utils.checkpoint import wandb_identity
from engine.models.tiny import build_tiny_model
from engine.sinks.wandb_sink import WandbSink

DATA = [{"prompt": "alpha"}, {"prompt": "beta"}]
CLASS = "engine.comlrl.trainers.reinforce.magrpo.MAGRPOTrainer"


class FakeRun:
    """What the trainer touches of a W&B run."""

    def __init__(self, **identity) -> None:
        vars(self).update(identity)
        self.summary: dict = {}

    def log(self, *args, **kwargs) -> None:
        return None

    def finish(self, exit_code: int = 0) -> None:
        return None


class RecordedRun(WandbSink):
    """A W&B sink over a fake ``wandb`` whose ``init`` opens ``run`` (nothing is imported or sent)."""

    def __init__(self, run: FakeRun) -> None:
        self.wandb = SimpleNamespace(init=lambda **kwargs: run, Table=lambda **kwargs: None)
        self.init_kwargs = {}
        self.run = None


def _trainer(pair, **overrides):
    values = dict(num_turns=1, num_generations=2, max_new_tokens=3, rollout_buffer_size=1, num_train_epochs=1,
                  eval_interval=0, agent_devices="cpu", seed=0, logging_steps=1000)
    args = MAGRPOConfig(**{**values, **overrides})
    return MAGRPOTrainer(agents=[m for m, _ in pair], tokenizer=[t for _, t in pair], train_dataset=DATA,
                         reward_func=lambda a, b: [0.0], args=args)


@pytest.fixture(scope="module")
def pair():
    return [build_tiny_model("llama", "xs", seed=s) for s in (0, 1)]


def test_wandb_identity_is_id_project_entity() -> None:
    assert wandb_identity(SimpleNamespace(id="r1", project="p", entity="")) == {"id": "r1", "project": "p"}
    assert wandb_identity(SimpleNamespace(id=None)) is None and wandb_identity(None) is None


@pytest.mark.slow  # trains a tiny team for a few steps
def test_training_checkpoints_record_class_run_and_wandb(pair, tmp_path) -> None:
    trainer = _trainer(pair)
    trainer.sink = RecordedRun(FakeRun(id="abc123", project="coop", entity="lab"))
    trainer.train(checkpoint_dir=tmp_path, checkpoint_interval=1)
    assert [p.name for p in tmp_path.iterdir()] == ["checkpoint-1"]  # CoMLRL's checkpoint-<epoch>
    meta = read_checkpoint_metadata(trainer.last_checkpoint)
    assert meta["sequence"] == 1 and meta["trainer_class"] == CLASS and re.fullmatch(r"[0-9a-f]{32}", meta["run_id"])
    assert meta["run_id"] == trainer.run_id and meta["wandb"] == {"id": "abc123", "project": "coop", "entity": "lab"}
    resumed = _trainer(pair, max_steps=3)
    resumed.train(resume_from_checkpoint=trainer.last_checkpoint, checkpoint_dir=tmp_path / "more")
    assert resumed.run_id == trainer.run_id  # CoMLRL keeps the run's id across a resume
    assert [p.name for p in (tmp_path / "more").iterdir()] == ["checkpoint-1-step-3"]  # ended inside epoch 2
    again = read_checkpoint_metadata(resumed.last_checkpoint)
    assert again["run_id"] == trainer.run_id and again["wandb"] is None and again["sequence"] == 3


@pytest.mark.slow  # trains a tiny team for a few steps
@pytest.mark.parametrize(("limit", "kept"), [(None, ["checkpoint-2", "checkpoint-3"]), (1, ["checkpoint-3"])])
def test_checkpoint_interval_counts_epochs_and_every_one_is_kept(pair, tmp_path, limit, kept) -> None:
    trainer = _trainer(pair, num_train_epochs=3)
    assert trainer.steps_per_epoch == 2 and trainer.args.checkpoint_interval == 0
    trainer.train(checkpoint_dir=tmp_path, checkpoint_interval=2, checkpoint_total_limit=limit)
    assert sorted(p.name for p in tmp_path.iterdir()) == kept
    assert trainer.args.checkpoint_interval == 0  # CoopLab's own setting is left as it was
    with pytest.raises(ValueError, match="^checkpoint_interval must be a positive integer.$"):
        trainer.train(checkpoint_dir=tmp_path, checkpoint_interval=0)


def test_a_checkpoint_before_training_has_no_run_id(pair, tmp_path) -> None:
    meta = read_checkpoint_metadata(_trainer(pair).save_checkpoint(tmp_path / "checkpoint-0"))
    assert meta["trainer_class"] == CLASS and meta["run_id"] is None and meta["sequence"] == 0
