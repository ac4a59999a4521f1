"""A trainer's reports without the engine, for the job tests of the artifact store: checkpoints with
distinct bytes per step, pruning, a final model and an iteration file."""

from __future__ import annotations

import hashlib
from pathlib import Path


def payload(step: int) -> bytes:
    return hashlib.sha256(f"weights at step {step}".encode()).digest() * 4096  # 128 KiB, distinct per step


class FakeTraining:
    """A trainer's reports without the engine: checkpoints ``checkpoint-<step>`` with distinct bytes,
    pruned beyond ``limit``, the best checkpoint, the final ``model/`` and an iteration file; records what it resumed from."""

    def __init__(self, steps: range, *, limit: int | None = None, between=None) -> None:
        self.steps, self.limit, self.between = steps, limit, between
        self.resumed_from: str | None = None
        self.resumed_bytes: bytes | None = None

    def __call__(self, config, *, output_dir, sink, resume_from):
        self.resumed_from = resume_from
        if resume_from is not None:
            self.resumed_bytes = (Path(resume_from) / "model_0.safetensors").read_bytes()
        root = Path(output_dir) / "checkpoints"
        sink.start(self.steps.stop - 1, {})
        for step in self.steps:
            sink.log_step(step, step, {"train/reward_mean": 0.1 * step}, [])
            folder = root / f"checkpoint-{step}"
            folder.mkdir(parents=True)
            (folder / "model_0.safetensors").write_bytes(payload(step))
            (folder / "meta.json").write_text(f'{{"step": {step}}}')
            sink.log_checkpoint(step, str(folder))
            if self.limit:
                for old in sorted(root.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))[:-self.limit]:
                    for file in old.iterdir():
                        file.unlink()
                    old.rmdir()
                    sink.log_checkpoint_pruned(int(old.name.split("-")[1]), str(old))
            if self.between is not None:
                self.between(step)
        (Path(output_dir) / "model" / "agent_0").mkdir(parents=True)
        (Path(output_dir) / "model" / "agent_0" / "model.safetensors").write_bytes(b"final")
        (root / "best").mkdir()
        (root / "best" / "model_0.safetensors").write_bytes(payload(1))
        (root / "best.json").write_text('{"step": 1}')
        (Path(output_dir) / "reward_distribution").mkdir()
        (Path(output_dir) / "reward_distribution" / "iteration_001.json").write_text("{}")
        return type("Result", (), {"status": "completed", "step": self.steps.stop - 1})()
