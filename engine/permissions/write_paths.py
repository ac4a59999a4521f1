"""Where a run config may have the engine write: inside the run's folder or the data directory.

A run config names folders the trainer writes besides its own output (:data:`WRITE_PATH_SETTINGS`:
``policy_checkpoint_dir``, ``preference_replay_dir``). A relative folder is taken under the trainer's
output folder; an absolute one must lie in the run's folder or one of the other roots the caller
gives (the data directory). Both are judged after resolving symlinks and ``..``, so neither
``/tmp/x``, ``../../../../tmp/x`` nor a symlink in the data directory that points elsewhere gets
out. Pre-flight checks the settings before a run is stored (:func:`write_path_problems`, against the
run folder the run will get); the trainer checks each target again right before it writes
(:meth:`WriteArea.target`), and outside the run's own folder it never replaces an existing file or
folder (:meth:`WriteArea.check_new`).

The engine reads no environment: the caller (the job executor, the CLI) passes the roots. Without a
:class:`WriteArea` (a trainer built directly in Python) paths are taken as given.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.schema.errors import ConfigError

WRITE_PATH_SETTINGS = ("policy_checkpoint_dir", "preference_replay_dir")
"""Trainer settings that name a folder the engine writes into."""


class WritePathError(ConfigError):
    """A folder a run config names for writing lies outside the allowed roots, or would replace
    something outside the run's folder; the message names the setting, the path and the fix."""


def _real(path: str | os.PathLike[str]) -> Path:
    """``path`` with every symlink and ``..`` resolved (missing trailing parts are taken as written)."""
    return Path(os.path.realpath(os.path.abspath(path)))


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


@dataclass(frozen=True)
class WriteArea:
    """The folders a run may write into: ``run_dir`` (its own folder, where it may replace what is
    there) and ``roots`` (e.g. the data directory, where it only adds)."""

    run_dir: Path
    roots: tuple[Path, ...] = ()

    @classmethod
    def of(cls, run_dir: str | os.PathLike[str], roots: Iterable[str | os.PathLike[str]] = ()) -> WriteArea:
        return cls(Path(run_dir), tuple(Path(r) for r in roots))

    def _allowed(self) -> list[Path]:
        return [_real(self.run_dir), *(_real(r) for r in self.roots)]

    def _where(self) -> str:
        roots = ", ".join(str(r) for r in self._allowed()[1:])
        return f"the run folder {_real(self.run_dir)}" + (f" or {roots}" if roots else "")

    def resolve(self, field: str, value: str | os.PathLike[str], base: str | os.PathLike[str] | None = None) -> Path:
        """The real folder ``value`` names (relative: under ``base``, default the run folder);
        :class:`WritePathError` when it is outside every allowed root."""
        path = Path(value).expanduser()
        if not path.is_absolute():
            path = Path(base if base is not None else self.run_dir) / path
        real = _real(path)
        if any(_inside(real, root) for root in self._allowed()):
            return real
        shown = f"{os.fspath(value)!r}" + (f" (resolves to {real})" if str(real) != os.fspath(value) else "")
        raise WritePathError(f"{field}: {shown} is outside {self._where()}; a run writes only there. Give a "
                             f"relative folder (taken under the run's output folder, e.g. 'policies') or one "
                             f"inside the data directory")

    def target(self, field: str, path: Path) -> Path:
        """``path`` checked again right before a write (a symlink may have appeared since)."""
        return self.resolve(field, path)

    def check_new(self, field: str, path: Path) -> None:
        """Refuse to replace an existing ``path`` outside the run's folder (an earlier run's files)."""
        if os.path.lexists(path) and not _inside(_real(path), _real(self.run_dir)):
            raise WritePathError(f"{field}: {path} already exists and is outside {_real(self.run_dir)}, this run's "
                                 f"folder; a run does not replace files it did not write there. Remove it, or "
                                 f"give a new folder or a relative one (under the run's output folder)")


def write_path_problems(trainer: Any, area: WriteArea, *, prefix: str = "trainer",
                        base: str | os.PathLike[str] | None = None) -> list[tuple[str, str]]:
    """``(field, message)`` for each write-path setting of ``trainer`` (a trainer spec or config) that
    ``area`` refuses; ``base`` is where relative folders go (default the run folder)."""
    problems = []
    for name in WRITE_PATH_SETTINGS:
        value = getattr(trainer, name, None)
        if value:
            try:
                area.resolve(f"{prefix}.{name}", value, base)
            except WritePathError as exc:
                field, _, message = str(exc).partition(": ")
                problems.append((field, message))
    return problems


def check_write_paths(trainers: Sequence[tuple[str, Any, str | os.PathLike[str] | None]], area: WriteArea) -> None:
    """Raise :class:`WritePathError` listing every refused folder of ``(prefix, trainer, base)``."""
    problems = [p for prefix, trainer, base in trainers for p in write_path_problems(trainer, area, prefix=prefix,
                                                                                      base=base)]
    if problems:
        raise WritePathError("\n".join(f"{field}: {message}" for field, message in problems))
