"""The ``cooplab`` command line: wires the engine, storage, workers and dashboard together."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("cooplab")
except PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0.1.0"
