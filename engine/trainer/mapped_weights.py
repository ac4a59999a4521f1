"""Trainable weights that still live in the checkpoint file's memory mapping get memory of their own.

``from_pretrained`` on a safetensors file whose dtype needs no conversion leaves each CPU weight
pointing into a private, copy-on-write mapping of the file. The first optimizer step then writes
every page of every trained weight, and each 4 KiB page costs a copy-on-write fault. Two agents
loaded from the same file fault on the same page-cache pages from two threads at once: on the
development machine the first AdamW step of two SmolLM2-135M agents took 1.3-1.6 s each (131,000
faults) against 0.08 s for the next one. :func:`own_mapped_weights` copies such weights into the
process's own memory while the trainer is built, one agent after another (about 0.15 s for
SmolLM2-135M), and leaves every other weight alone. The values are copied exactly; tied weights
are one parameter and stay one.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from pathlib import Path

import torch

MAPS = Path("/proc/self/maps")


def file_mapped_ranges(maps_text: str) -> list[tuple[int, int]]:
    """The address ranges of ``/proc/<pid>/maps`` lines that map a file (a path in the sixth field;
    not ``[heap]``, ``[stack]`` or anonymous memory), sorted by start."""
    ranges = []
    for line in maps_text.splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) < 6 or not fields[5].startswith("/"):
            continue
        start, end = (int(part, 16) for part in fields[0].split("-"))
        ranges.append((start, end))
    return sorted(ranges)


def in_ranges(address: int, ranges: list[tuple[int, int]]) -> bool:
    """Whether ``address`` lies in one of the sorted, non-overlapping ``ranges`` (end excluded)."""
    index = bisect.bisect_right(ranges, (address, float("inf"))) - 1
    return index >= 0 and ranges[index][0] <= address < ranges[index][1]


def own_mapped_weights(params: Iterable[torch.nn.Parameter], maps_text: str | None = None) -> int:
    """Copy every CPU parameter in ``params`` whose storage lies in a file mapping into memory of its
    own (``param.data`` replaced by an exact copy); returns the bytes copied. Nothing happens where
    ``/proc/self/maps`` cannot be read (other systems)."""
    if maps_text is None:
        try:
            maps_text = MAPS.read_text()
        except OSError:
            return 0
    ranges = file_mapped_ranges(maps_text)
    copied, seen = 0, set()
    for param in params:
        if id(param) in seen or param.device.type != "cpu" or param.numel() == 0:
            continue
        seen.add(id(param))
        if in_ranges(param.data_ptr(), ranges):
            param.data = param.data.clone()
            copied += param.numel() * param.element_size()
    return copied
