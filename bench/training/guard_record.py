"""The learning guard's recorded numbers (``tests/engine/learning_guard.json``) and the checks against them.

Per family the file holds the guard seed's measurement before and after training, the gain and the
fingerprint of the tokens sampled after training, plus the platform it was recorded on and a digest
of the workloads. The checks (:func:`check`):

* every family whose recorded gain is clear (>= :data:`CLEAR_GAIN`) must gain at least
  :data:`FLOOR` x its recorded gain, on any platform: half the recorded learning fails;
* a family recorded as not learning clearly (MARLHF's learned reward on this workload) must not lose
  more than :data:`NO_CLEAR_SLACK` of its before-training reward;
* on the recorded platform (:data:`bench.training.guard_platform.MATCHED`) the fingerprint and the
  numbers must equal the recorded ones exactly: one torch thread on one CPU repeats bit for bit, so
  any change in a sampled token fails.

A change of a recorded number needs a reason in the commit message (docs/benchmarks.md, "The learning guard").
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from bench.training import guard_platform
from bench.training import guard_workloads as w

GUARD_FILE = Path(__file__).resolve().parents[2] / "tests" / "engine" / "learning_guard.json"
GUARD_SEED = 0
FLOOR = 0.6  # of the recorded gain: a halved gain fails
CLEAR_GAIN = 0.05  # a recorded gain below this is not clear learning
NO_CLEAR_SLACK = 0.05  # how far a family without clear learning may fall below its before-training reward
EXACT_FIELDS = ("before", "after", "gain", "fingerprint")
REGENERATE = "python -m bench.training.learning_guard --record"


def workload_digest() -> str:
    """sha256 of everything the workloads are made of (settings, prompts, samples, seeds, model size)."""
    spec = {"families": {name: {"settings": f.settings, "models": f.models, "roles": f.roles}
                         for name, f in w.FAMILIES.items()},
            "train": w.TRAIN_PROMPTS, "heldout": w.HELDOUT_PROMPTS, "prefixes": w.ROLE_PREFIXES, "samples": w.SAMPLES,
            "measure_seed": w.MEASURE_SEED, "tokens": w.TOKENS, "sampling": w.SAMPLING, "model": "llama xs",
            "seed": GUARD_SEED}
    return hashlib.sha256(json.dumps(spec, sort_keys=True, default=repr).encode()).hexdigest()


def load(path: Path = GUARD_FILE) -> dict[str, Any]:
    """The recorded numbers; ValueError naming the fix when the file is missing or unreadable."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: no readable learning-guard record ({exc}); regenerate it: {REGENERATE}") from exc


def save(record: dict[str, Any], path: Path = GUARD_FILE) -> None:
    path.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def stale(record: dict[str, Any]) -> str | None:
    """Why ``record`` does not describe today's workloads (None when it does)."""
    if record.get("workload") != workload_digest():
        return f"the workloads changed since the numbers were recorded; regenerate them: {REGENERATE}"
    missing = sorted(set(w.FAMILIES) - set(record.get("families", {})))
    if missing:
        return f"no recorded numbers for {', '.join(missing)}; regenerate them: {REGENERATE}"
    return None


def platform_mismatch_of(record: dict[str, Any]) -> list[str]:
    """How this platform differs from the one ``record`` was made on (empty: the same)."""
    return guard_platform.platform_mismatch(record.get("platform", {}), guard_platform.platform_record())


def check(recorded: dict[str, Any], measured: dict[str, Any], *, exact: bool) -> list[str]:
    """What is wrong with ``measured`` (a :meth:`Result.record`) against ``recorded`` (empty: nothing)."""
    problems = []
    if recorded["gain"] >= CLEAR_GAIN:
        floor = FLOOR * recorded["gain"]
        if measured["gain"] < floor:
            problems.append(f"gain {measured['gain']:+.4f} is below {FLOOR} x the recorded {recorded['gain']:+.4f} "
                            f"(floor {floor:+.4f})")
    elif measured["gain"] < -NO_CLEAR_SLACK:
        problems.append(f"gain {measured['gain']:+.4f}: the team lost more than {NO_CLEAR_SLACK} of its reward "
                        f"(recorded {recorded['gain']:+.4f}, not clear learning)")
    if exact:
        problems += [f"{k} {measured[k]!r} differs from the recorded {recorded[k]!r} on the recorded platform"
                     for k in EXACT_FIELDS if measured[k] != recorded[k]]
    return problems


def build_record(results: dict[str, w.Result], *, previous: dict[str, Any] | None = None) -> dict[str, Any]:
    """The file's content for the guard seed's ``results`` (one per family); the previous record's CoMLRL
    and per-seed sections are kept when its workloads are today's."""
    record: dict[str, Any] = {
        "about": ("Recorded by `python -m bench.training.learning_guard --record`; checked by "
                  "tests/engine/test_learning_guard.py. A change of a recorded number needs a reason in the commit "
                  "message (docs/benchmarks.md, 'The learning guard')."),
        "seed": GUARD_SEED, "workload": workload_digest(), "platform": guard_platform.platform_record(),
        "families": {name: r.record() for name, r in results.items()},
    }
    if previous and previous.get("workload") == record["workload"]:
        for key in ("seeds", "comlrl"):
            if key in previous:
                record[key] = previous[key]
    return record
