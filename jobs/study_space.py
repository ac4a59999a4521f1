"""A study's search space and the run configs it generates (pure: no database, no broker, no torch).

A space maps dotted paths of the run config (``trainer.agent_learning_rate``, ``agents.1.model``) to
a dimension: a list of values (grid and random both draw from it), or for random search a range
``{uniform: [lo, hi]}``, ``{loguniform: [lo, hi]}`` or ``{int: [lo, hi]}`` (both ends included). Grid
search takes every combination, the first path varying slowest; random search draws ``samples``
points with ``random.Random(study seed)``, so the same study seed gives the same points. Each point
is run once per seed (``trainer.seed``). The study's size is counted before any point is built and
refused over the limits of :mod:`jobs.study_limits`. Every generated config is validated through the
one schema (:func:`engine.schema.run_config.parse_run_config`) before anything is stored: a bad point
raises :class:`StudySpaceError` naming the point, its values and the field.
"""

from __future__ import annotations

import copy
import itertools
import math
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from db.study_records import TrialInput
from engine.schema.run_config import ConfigError, RunConfig, parse_run_config
from jobs.study_limits import StudyLimits, expansion_problem, size_problems

RANGE_KINDS = ("uniform", "loguniform", "int")
SEED_PATH = "trainer.seed"


class StudySpaceError(ValueError):
    """A search space or a generated config that cannot be used; the message names the path or field."""


@dataclass(frozen=True)
class Dimension:
    """One searched field: ``values`` (a list), or a range ``kind`` in ``RANGE_KINDS`` from ``low`` to ``high``."""

    path: str
    values: tuple[Any, ...] = ()
    kind: str = "values"
    low: float = 0.0
    high: float = 0.0

    def sample(self, rng: random.Random) -> Any:
        """One random value of this dimension."""
        if self.kind == "values":
            return self.values[rng.randrange(len(self.values))]
        if self.kind == "int":
            return rng.randint(int(self.low), int(self.high))
        if self.kind == "loguniform":
            return math.exp(rng.uniform(math.log(self.low), math.log(self.high)))
        return rng.uniform(self.low, self.high)


def parse_dimension(path: str, spec: Any) -> Dimension:
    """A :class:`Dimension` from its YAML form, or :class:`StudySpaceError` naming the path."""
    if not isinstance(path, str) or not path.strip() or any(not part for part in path.split(".")):
        raise StudySpaceError(f"space: {path!r} is not a dotted field path like 'trainer.agent_learning_rate'")
    if path == SEED_PATH:
        raise StudySpaceError(f"space.{path}: seeds are the study's own axis; set 'seeds' (a count or a list) instead")
    if isinstance(spec, (list, tuple)):
        if not spec:
            raise StudySpaceError(f"space.{path}: give at least one value")
        return Dimension(path, values=tuple(spec))
    if isinstance(spec, Mapping) and len(spec) == 1:
        kind, bounds = next(iter(spec.items()))
        if kind == "choice":
            return parse_dimension(path, bounds)
        if kind in RANGE_KINDS:
            ok = (isinstance(bounds, (list, tuple)) and len(bounds) == 2
                  and all(isinstance(b, (int, float)) and not isinstance(b, bool) for b in bounds))
            if not ok or bounds[0] > bounds[1] or (kind == "loguniform" and bounds[0] <= 0):
                raise StudySpaceError(f"space.{path}: {kind} needs [low, high] numbers with low <= high"
                                      f"{' and low > 0' if kind == 'loguniform' else ''}, got {bounds!r}")
            return Dimension(path, kind=kind, low=float(bounds[0]), high=float(bounds[1]))
    raise StudySpaceError(f"space.{path}: give a list of values, or one of {{choice: [...]}}, "
                          f"{{uniform: [lo, hi]}}, {{loguniform: [lo, hi]}}, {{int: [lo, hi]}}; got {spec!r}")


def parse_space(space: Mapping[str, Any]) -> list[Dimension]:
    """Every dimension of a space mapping (path → values or range), in the mapping's order."""
    if not isinstance(space, Mapping) or not space:
        raise StudySpaceError("space: give at least one field path with its values, e.g. "
                              "{'trainer.agent_learning_rate': [0.0001, 0.001]}")
    return [parse_dimension(path, spec) for path, spec in space.items()]


def grid_points(dims: Sequence[Dimension]) -> list[dict[str, Any]]:
    """Every combination of the dimensions' values, the first dimension varying slowest."""
    ranged = [d.path for d in dims if d.kind != "values"]
    if ranged:
        raise StudySpaceError(f"space.{ranged[0]}: grid search needs a list of values, not a range; "
                              "list the values or use method: random")
    return [dict(zip([d.path for d in dims], combo, strict=True))
            for combo in itertools.product(*(d.values for d in dims))]


def random_points(dims: Sequence[Dimension], samples: int, seed: int) -> list[dict[str, Any]]:
    """``samples`` different points drawn with ``random.Random(seed)``: the same seed gives the same
    points. A space of lists alone has finitely many points: asking for more is an error, and the
    points are drawn without replacement (a repeated point would only rerun the same config)."""
    if samples < 1:
        raise StudySpaceError(f"samples: random search needs at least 1 point, got {samples}")
    rng = random.Random(seed)
    if all(d.kind == "values" for d in dims):
        sizes = [len(d.values) for d in dims]
        total = math.prod(sizes)
        if samples > total:
            raise StudySpaceError(f"samples: these lists of values make only {total} different points, so "
                                  f"{samples} random points would repeat some; ask for at most {total} "
                                  f"(or use method: grid)")
        return [_point_at(dims, sizes, index) for index in rng.sample(range(total), samples)]
    points: list[dict[str, Any]] = []
    seen: set[tuple[Any, ...]] = set()
    for _ in range(100 * samples):
        point = {d.path: d.sample(rng) for d in dims}
        key = tuple(repr(v) for v in point.values())
        if key not in seen:
            seen.add(key)
            points.append(point)
            if len(points) == samples:
                return points
    raise StudySpaceError(f"samples: could not draw {samples} different points from this space (it has too "
                          f"few); ask for fewer points or widen the ranges")


def _point_at(dims: Sequence[Dimension], sizes: Sequence[int], index: int) -> dict[str, Any]:
    """The ``index``-th combination of the dimensions' values in grid order (the first varying slowest)."""
    chosen = []
    for size in reversed(sizes):
        index, digit = divmod(index, size)
        chosen.append(digit)
    return {d.path: d.values[i] for d, i in zip(dims, reversed(chosen), strict=True)}


def seed_list(seeds: int | Sequence[int], study_seed: int) -> list[int]:
    """The training seeds of every point: a count ``n`` gives ``study_seed .. study_seed + n - 1``."""
    if isinstance(seeds, bool) or not isinstance(seeds, (int, list, tuple)):
        raise StudySpaceError(f"seeds: give a count (e.g. 3) or a list of seeds, got {seeds!r}")
    if isinstance(seeds, int):
        if seeds < 1:
            raise StudySpaceError(f"seeds: run each point with at least 1 seed, got {seeds}")
        return [study_seed + i for i in range(seeds)]
    found = [int(s) for s in seeds]
    if not found or len(set(found)) != len(found):
        raise StudySpaceError(f"seeds: give distinct seeds, got {list(seeds)!r}")
    return found


def set_path(config: dict[str, Any], path: str, value: Any) -> None:
    """Set ``value`` at dotted ``path`` of a plain config (integer parts index lists), in place."""
    parts = path.split(".")
    node: Any = config
    for depth, part in enumerate(parts):
        last = depth == len(parts) - 1
        where = ".".join(parts[: depth + 1])
        if isinstance(node, list):
            if not part.isdigit() or int(part) >= len(node):
                raise StudySpaceError(f"space.{path}: {where} is not an index of a list of {len(node)} "
                                      f"(use 0..{len(node) - 1})")
            key: Any = int(part)
        elif isinstance(node, dict):
            key = part
        else:
            raise StudySpaceError(f"space.{path}: {'.'.join(parts[:depth]) or 'config'} holds no fields "
                                  f"(it is {node!r}); set the section in the base config first")
        if last:
            node[key] = copy.deepcopy(value)
        else:
            if isinstance(node, dict) and key not in node:
                node[key] = {}
            node = node[key]


def point_config(base: Mapping[str, Any], params: Mapping[str, Any], seed: int) -> dict[str, Any]:
    """The base config (plain, validated) with the point's values and ``trainer.seed`` set."""
    config = copy.deepcopy(dict(base))
    for path, value in params.items():
        set_path(config, path, value)
    set_path(config, SEED_PATH, seed)
    return config


def generate(base: RunConfig | Mapping[str, Any], dims: Sequence[Dimension], *, method: str = "grid",
             samples: int = 0, seeds: int | Sequence[int] = 1, seed: int = 0,
             validate: Callable[[dict[str, Any]], RunConfig] = parse_run_config,
             limits: StudyLimits | None = None, clock: Callable[[], float] = time.monotonic) -> list[TrialInput]:
    """Every child of a study, each config validated by ``validate`` (the run-config schema).

    The study's size is counted first, before any point is built: over one of ``limits`` (default
    :class:`jobs.study_limits.StudyLimits`' defaults; callers pass the operator's) it is refused at
    once, and building the points stops once it has taken longer than ``limits.max_expand_s``.

    Raises :class:`StudySpaceError` naming the point, its values and each bad field when a point
    gives an invalid config, or the count, the limit and its setting for a study over a limit;
    nothing is returned then (so nothing gets stored or queued).
    """
    limits = limits or StudyLimits()
    if isinstance(seeds, bool) or not isinstance(seeds, (int, list, tuple)):
        raise StudySpaceError(f"seeds: give a count (e.g. 3) or a list of seeds, got {seeds!r}")
    too_large = size_problems(dims, method=method, samples=samples, seeds=seeds, limits=limits)
    if too_large:
        raise StudySpaceError("\n".join(too_large))
    base_config = base if isinstance(base, RunConfig) else _validated_base(base, validate)
    plain = base_config.model_dump(mode="json")
    if method == "grid":
        points = grid_points(dims)
    elif method == "random":
        points = random_points(dims, samples, seed)
    else:
        raise StudySpaceError(f"method: {method!r} is not a search method; use 'grid' or 'random'")
    seeds_of_point = seed_list(seeds, seed)
    trials: list[TrialInput] = []
    started = clock()
    for index, params in enumerate(points):
        late = expansion_problem(clock() - started, index, len(points), limits) if index else None
        if late:
            raise StudySpaceError(late)
        try:
            checked = validate(point_config(plain, params, seeds_of_point[0])).model_dump(mode="json")
        except ConfigError as exc:
            values = ", ".join(f"{k}={v!r}" for k, v in params.items())
            raise StudySpaceError(f"point {index} ({values}) gives an invalid run config:\n{exc}") from None
        for seed_index, training_seed in enumerate(seeds_of_point):
            config = copy.deepcopy(checked)
            config["trainer"][SEED_PATH.split(".")[1]] = training_seed
            trials.append(TrialInput(point=index, seed_index=seed_index, seed=training_seed, params=dict(params),
                                         config=config))
    return trials


def _validated_base(base: Mapping[str, Any], validate: Callable[[dict[str, Any]], RunConfig]) -> RunConfig:
    try:
        return validate(dict(base))
    except ConfigError as exc:
        raise StudySpaceError(f"base config is invalid:\n{exc}") from None
