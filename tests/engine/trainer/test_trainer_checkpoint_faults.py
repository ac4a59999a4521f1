"""A checkpoint write that fails leaves nothing behind and says why (full disk, permissions)."""

from __future__ import annotations

import errno
import shutil
from collections import namedtuple
from pathlib import Path

import pytest

from engine.lora import weights as lora_weights
from engine.schema import folders
from engine.trainer import checkpoint as ckpt
from engine.trainer.checkpoint import CheckpointWriteError
from tests.engine.trainer.trainer_helpers import fast_config, make_trainer

Usage = namedtuple("Usage", "total used free")


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def test_a_full_disk_gives_a_one_line_reason_and_frees_the_partial_folder(team, small_fs) -> None:
    trainer = make_trainer(team, fast_config(max_steps=1))
    target = small_fs / "checkpoints" / "checkpoint-1"
    with pytest.raises(CheckpointWriteError) as caught:
        trainer.save_checkpoint(target)
    error = caught.value
    assert error.errno == errno.ENOSPC and error.path == str(target)
    assert error.total_bytes == 256 * 1024 and error.free_bytes is not None and error.free_bytes <= error.total_bytes
    message = str(error)
    assert "\n" not in message
    assert message.startswith(f"no space left on device writing checkpoint {target} (")
    assert " free of 256.0 KiB when the write failed)" in message
    assert _leftovers(target.parent) == []  # the temporary folder is gone ...
    assert shutil.disk_usage(small_fs).free > 200 * 1024  # ... and so is the space it took


def test_a_permission_error_names_the_folder(team, tmp_path, monkeypatch) -> None:
    def refuse(model, filename, *args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied", filename)

    monkeypatch.setattr(lora_weights, "save_model", refuse)
    trainer = make_trainer(team, fast_config(max_steps=1))
    with pytest.raises(CheckpointWriteError) as caught:
        trainer.save_checkpoint(tmp_path / "checkpoint-1")
    assert caught.value.errno == errno.EACCES
    assert str(caught.value).startswith(f"permission denied writing checkpoint {tmp_path / 'checkpoint-1'}")
    assert isinstance(caught.value.__cause__, PermissionError)
    assert _leftovers(tmp_path) == []


@pytest.mark.parametrize("free, expected", [(100, CheckpointWriteError), (10 << 30, RuntimeError)])
def test_a_write_error_without_errno_is_a_full_disk_only_when_the_disk_is_full(team, tmp_path, monkeypatch, free,
                                                                                 expected) -> None:
    def broken_save(obj, f, *args, **kwargs):
        Path(f).write_bytes(b"partial")
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 2841088 vs 2840976")

    monkeypatch.setattr(ckpt.torch, "save", broken_save)
    monkeypatch.setattr(folders.shutil, "disk_usage", lambda path: Usage(20 << 30, 0, free))
    trainer = make_trainer(team, fast_config(max_steps=1))
    with pytest.raises(expected) as caught:
        trainer.save_checkpoint(tmp_path / "checkpoint-1")
    if expected is CheckpointWriteError:
        assert caught.value.errno == errno.ENOSPC and "100 B free of 20.0 GiB" in str(caught.value)
    else:
        assert "unexpected pos" in str(caught.value)  # not blamed on the disk
    assert _leftovers(tmp_path) == []


def test_a_library_error_quoting_the_errno_counts_as_that_errno(team, tmp_path, monkeypatch) -> None:
    def failing(model, filename, *args, **kwargs):  # what safetensors raises when a write hits ENOSPC
        raise Exception("Error while serializing: I/O error: No space left on device (os error 28)")

    monkeypatch.setattr(lora_weights, "save_model", failing)
    monkeypatch.setattr(folders.shutil, "disk_usage", lambda path: Usage(20 << 30, 0, 3 << 20))
    trainer = make_trainer(team, fast_config(max_steps=1))
    with pytest.raises(CheckpointWriteError, match=r"^no space left on device writing checkpoint .*3.0 MiB free"):
        trainer.save_checkpoint(tmp_path / "checkpoint-1")
    assert _leftovers(tmp_path) == []


def test_saving_over_an_existing_checkpoint_replaces_it(team, tmp_path) -> None:
    trainer = make_trainer(team, fast_config(max_steps=1))
    target = tmp_path / "checkpoint-0"
    trainer.save_checkpoint(target)
    (target / "stale.txt").write_text("old")
    trainer.save_checkpoint(target)
    assert _leftovers(tmp_path) == ["checkpoint-0"]
    assert not (target / "stale.txt").exists() and (target / ckpt.STATE_FILE).is_file()
    trainer.load_checkpoint(target)


def test_atomic_writes_leave_nothing_half_written(tmp_path) -> None:
    target = tmp_path / "model"
    with folders.atomic_folder(target, "model export") as folder:
        (folder / "weights.bin").write_bytes(b"1")
    assert (target / "weights.bin").read_bytes() == b"1"
    with pytest.raises(RuntimeError), folders.atomic_folder(target, "model export") as folder:
        (folder / "weights.bin").write_bytes(b"2")
        raise RuntimeError("the export failed half-way")
    assert (target / "weights.bin").read_bytes() == b"1"  # the earlier export is untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]  # no temporary folder left
    folders.atomic_text(tmp_path / "config.yaml", "a: 1\n", "run config")
    assert (tmp_path / "config.yaml").read_text() == "a: 1\n"
    error = folders.WriteError(errno.ENOSPC, tmp_path / "model", 0, 5 << 20, "model export")
    assert str(error) == f"no space left on device writing model export {tmp_path / 'model'} (0 B free of 5.0 MiB when the write failed)"
