"""The start-up lines that say how each agent samples: which dtype, why, and whether the update is
corrected for it (``rollout_dtype``, ``rollout_correction``)."""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from typing import Any

from engine.trainer.rollout_copy import choose_rollout_dtype, configured_rollout_dtype
from engine.trainer.update import corrects_sampler

log = logging.getLogger("cooplab.sampling")


def sampling_notes(agents: Sequence[Any], config: Any) -> list[str]:
    """One line per agent: the dtype it samples in and why, and the rollout correction it gets."""
    setting = configured_rollout_dtype(config)
    correction = getattr(config, "rollout_correction", "none")
    lines = []
    for agent in agents:
        own = str(next(agent.model.parameters()).dtype).removeprefix("torch.")
        _, why = choose_rollout_dtype(agent.model, setting)
        if agent.rollout_copy is None:
            what = f"samples from its {own} weights"
        else:
            what = f"samples from a {str(agent.rollout_copy.dtype).removeprefix('torch.')} copy of its {own} weights"
        fixed = (f"; the update weights each token by truncated importance sampling (tis_cap "
                 f"{getattr(config, 'tis_cap', 2.0):g})" if corrects_sampler(agent, correction) else "")
        lines.append(f"sampling: agent {agent.name!r} {what} ({why}){fixed}")
    return lines


def announce(lines: Sequence[str]) -> None:
    """Log ``lines`` (a job's run log has a handler); with no logging set up, print them to stderr."""
    for line in lines:
        if logging.getLogger().handlers or log.handlers:
            log.info(line)
        else:
            print(line, file=sys.stderr, flush=True)
