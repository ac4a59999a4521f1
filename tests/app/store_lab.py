"""A run written on another machine, as the dashboard tests of the artifact store need it: machine A's
checkpoint folder, log and exported model, uploaded (checked) to the store with the store API, its
checkpoint row pointing at the upload (``artifact_url``); then A's data directory is deleted."""

from __future__ import annotations

import random
import shutil
from dataclasses import dataclass
from pathlib import Path

from db.store import Store
from jobs.artifacts import open_store
from jobs.artifacts.location import checkpoint_key, export_key, logs_key
from jobs.settings import Settings
from tests.app.conftest import add_run, two_agent_config


def checkpoint_folder(folder: Path, seed: int) -> Path:
    """A checkpoint-like folder: weights and an optimizer state of random bytes, a trainer state."""
    rng = random.Random(seed)
    (folder / "agent_0").mkdir(parents=True)
    (folder / "agent_0" / "model.safetensors").write_bytes(rng.randbytes(600_000))
    (folder / "agent_0" / "optimizer.pt").write_bytes(rng.randbytes(90_000))
    (folder / "trainer_state.json").write_text(f'{{"global_step": {seed}}}')
    return folder


def tree_bytes(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` by its relative path, with its bytes."""
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@dataclass
class UploadedRun:
    """What machine A wrote (the bytes, kept to compare downloads with)."""

    run_id: int
    step: int
    checkpoint: dict[str, bytes]
    log: bytes
    model: dict[str, bytes]


def write_uploaded_run(db: Store, machine_a: Settings, *, step: int = 4) -> UploadedRun:
    """A stopped run written in ``machine_a``'s data directory, uploaded to its artifact store (the
    checkpoint as ``runs/run-<id>/checkpoints/checkpoint-<step>``, the log, the exported model) and
    recorded in ``db``; then that data directory is deleted."""
    experiment = db.get_or_create_experiment("store-demo", config=two_agent_config("store-demo")).id
    run_id = add_run(db, experiment, status="stopped", steps=2)
    out = machine_a.runs_dir / f"run-{run_id}"
    folder = checkpoint_folder(out / "checkpoints" / f"checkpoint-{step}", step)
    log = machine_a.logs_dir / f"run-{run_id}.log"
    log.parent.mkdir(parents=True)
    log.write_text("".join(f"step {i} loss {1 / i:.4f}\n" for i in range(1, 301)))
    model = checkpoint_folder(out / "model" / "agent_0", 99).parent
    store = open_store(machine_a)
    key = checkpoint_key(run_id, step)
    store.upload_folder(folder, key)
    row = db.add_checkpoint(run_id, step, str(folder))
    assert db.set_checkpoint_artifact(run_id, row.id, f"{store.url}/{key}")
    store.upload_folder(log.parent, logs_key(run_id))
    store.upload_folder(model, export_key(run_id, "model"))
    db.update_run(run_id, log_path=str(log), output_dir=str(out))
    written = UploadedRun(run_id, step, tree_bytes(folder), log.read_bytes(), tree_bytes(model))
    shutil.rmtree(machine_a.data_dir)
    return written
