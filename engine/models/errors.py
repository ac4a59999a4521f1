"""The error raised when a model source cannot be resolved or loaded."""

from __future__ import annotations


class ModelLoadError(RuntimeError):
    """A model source could not be loaded; the message names the source and the fix."""
