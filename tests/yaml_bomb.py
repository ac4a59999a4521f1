"""The YAML alias bomb ("billion laughs") that froze the dashboard, and a check that an entry point
refuses it within a bounded time and memory.

Nine levels of nine aliases: about 450 bytes of YAML that stand for 9**9 = 387,420,489 strings once the
aliases are expanded. PyYAML builds the aliases as shared references, so loading alone is fast;
validating, copying, serialising or showing the config expands them (the dashboard grew to 2.5 GB).
"""

from __future__ import annotations

import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import pytest

LEVELS = "abcdefghi"


def alias_bomb(indent: str = "      ") -> str:
    """The nine anchored lists as the lines of a mapping, each line indented by ``indent``."""
    lines = [f'{indent}a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for previous, name in zip(LEVELS, LEVELS[1:], strict=False):
        lines.append(f"{indent}{name}: &{name} [{','.join([f'*{previous}'] * 9)}]")
    return "\n".join(lines) + "\n"


def bomb_run_config(model: str = "/models/folder-model") -> str:
    """A run config whose folder model carries the bomb in its ``model_kwargs`` (under 600 bytes; the
    one reported was 641)."""
    return (
        "name: laughs\n"
        "agents:\n"
        "  - name: first\n"
        f"    model: {model}\n"
        "    model_kwargs:\n"
        + alias_bomb()
        + "task:\n"
        "  name: quickstart\n"
        "trainer:\n"
        "  algorithm: magrpo\n"
        "  max_steps: 1\n"
    )


def refused_quickly(call: Callable[[], Any], error: type[BaseException] | tuple[type[BaseException], ...],
                    *, seconds: float = 5.0, peak_mib: float = 64.0) -> BaseException:
    """Run ``call``, which must raise ``error`` within ``seconds`` while Python allocates at most
    ``peak_mib`` MiB on the way (traced with tracemalloc); returns the exception."""
    tracemalloc.start()
    started = time.perf_counter()
    try:
        with pytest.raises(error) as caught:
            call()
        elapsed = time.perf_counter() - started
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert elapsed < seconds, f"refused only after {elapsed:.1f} s"
    assert peak < peak_mib * 2**20, f"allocated {peak / 2**20:.0f} MiB before refusing"
    return caught.value
