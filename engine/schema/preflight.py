"""Pre-flight: what a run config needs from this machine, checked before a run is stored or queued.

:func:`engine.schema.run_config.parse_run_config` checks a config on its own (types, bounds, combinations, the
task name against the allowlist). Pre-flight adds what follows from the models and the task, without
loading either (torch-free, so the dashboard and ``jobs.client`` call it):

- every agent's model source exists: a built-in, a local folder with ``config.json``, or a hub id in
  the local Hugging Face cache (:mod:`engine.schema.sources`); a tokenizer source likewise;
- ``max_new_tokens`` (the trainer's, each agent's override, each system trainer's override) is less
  than the context of every model it applies to (``max_position_embeddings``/``n_positions``);
- the task resolves, its parameters validate against its params model, the team size and number of
  turns fit it;
- a ``comparator_checkpoint`` is a checkpoint folder of a team of this size
  (:mod:`engine.schema.comparator_checkpoint`);
- the resource budget (:mod:`engine.schema.budget`: tokens and joint actions per step, candidates,
  repetitions, evaluation items, transcripts, name lengths, device names and, where known, whether
  a CUDA device exists) and the folders the config names for writing (:mod:`engine.permissions.write_paths`);
- where the device's memory is known (``RunLimits.device_memory_bytes``), every agent's full fine-tuning
  fits it (:mod:`engine.schema.memory`: the bytes needed and the options: more ranks, LoRA, offload);
- the files and folders the config names for reading (a dataset file, a model, tokenizer or checkpoint
  folder) lie inside the caller's read roots (:mod:`engine.permissions.read_paths`);
- what only the operator can allow (:mod:`engine.permissions.run_permissions`): the API comparator's URL and key
  against the operator's API hosts, and code that comes with a model (``trust_remote_code``); every
  ``model_kwargs`` against the allowlist of ``from_pretrained`` arguments (:mod:`engine.permissions.model_kwargs`).

Each problem names its field (``agents.0.model``, ``trainer.max_new_tokens``, ``task.params.x``);
:func:`check_preflight` reports all of them together as one :class:`engine.schema.run_config.ConfigError`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from engine.permissions.operator import LIBRARY, OperatorPermissions
from engine.permissions.read_paths import ReadArea, read_path_problems
from engine.permissions.run_permissions import permission_problems
from engine.schema.budget import RunLimits, limit_problems
from engine.schema.collaboration import is_centralized
from engine.schema.comparator_checkpoint import comparator_checkpoint_problem
from engine.schema.memory import memory_problems
from engine.schema.run_config import ConfigError, RunConfig
from engine.schema.sources import inspect_source


@dataclass(frozen=True)
class Problem:
    """One pre-flight problem: the dotted field it concerns and what to do about it."""

    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


@dataclass(frozen=True)
class _Model:
    """The model an agent trains with: where it was named and its context (None when unknown)."""

    field: str
    source: str
    context: int | None


def preflight_problems(config: RunConfig, *,
                       hub_cache_dirs: Sequence[str | os.PathLike[str]] | None = None,
                       limits: RunLimits | None = None, permissions: OperatorPermissions = LIBRARY,
                       read_area: ReadArea | None = None) -> list[Problem]:
    """Every pre-flight problem of ``config`` (empty when it can be queued).

    ``hub_cache_dirs`` are the Hugging Face hub caches a hub id must be found in; None accepts hub
    ids unchecked (for deployments whose workers download models or keep their own cache).
    ``limits`` (:class:`engine.schema.budget.RunLimits`): the resource budget, the devices and the folders
    the run may write into, checked first; None checks the default budget only.
    ``permissions``: the operator's (:class:`engine.permissions.operator.OperatorPermissions`): the task module
    allowlist, the API hosts and the remote-code permission (:mod:`engine.permissions.run_permissions`); where
    none were set (:data:`engine.permissions.operator.LIBRARY`) no module, host or remote code is allowed.
    ``read_area``: the folders the paths it names for reading must lie in (:mod:`engine.permissions.read_paths`;
    paths that exist here: a missing model is named as missing, and the run checks every path again);
    None does not check them.
    """
    problems = [Problem(f, m) for f, m in limit_problems(config, limits or RunLimits())]
    if limits is not None and limits.device_memory_bytes is not None:
        problems += [Problem(f, m) for f, m in memory_problems(config, limits.device_memory_bytes, hub_cache_dirs,
                                                                   ranks=limits.cuda_devices or None)]
    if read_area is not None:
        problems += [Problem(f, m) for f, m in read_path_problems(config, read_area, existing_only=True)]
    models = _agent_models(config, hub_cache_dirs, problems)
    modules = permissions.task_modules
    problems += _max_new_tokens_problems(config, models, modules)
    problems += task_problems(config, modules)
    problems += algorithm_problems(config, modules)
    if config.trainer.comparator_checkpoint is not None:
        problem = comparator_checkpoint_problem(config.trainer.comparator_checkpoint, trained_agents(config))
        if problem is not None:
            problems.append(Problem("trainer.comparator_checkpoint", problem))
    problems += trainer_model_problems(config, hub_cache_dirs)
    problems += [Problem(f, m) for f, m in permission_problems(config, permissions)]
    return problems


def trained_agents(config: RunConfig) -> int:
    """How many agents the trainer builds: one joint model for a centralized run, else one per entry."""
    return 1 if is_centralized(config.trainer.algorithm, config.trainer.collaboration_mode) else len(config.agents)


def trainer_model_problems(config: RunConfig,
                           hub_cache_dirs: Sequence[str | os.PathLike[str]] | None = None) -> list[Problem]:
    """The models the trainer section names besides the agents' (the comparator's, the reward model's):
    each source must exist, and a per-agent list must have one entry or one per agent."""
    trainer, n = config.trainer, trained_agents(config)
    named: list[tuple[str, str | None]] = [("trainer.comparator_model_name", trainer.comparator_model_name),
                                    ("trainer.reward_model_name", trainer.reward_model_name)]
    problems = []
    for field, values in (("comparator_agents", trainer.comparator_agents),
                          ("comparator_devices", trainer.comparator_devices)):
        if values and len(values) not in (1, n):
            what = f"{n} agents" if n == len(config.agents) else "one joint model (collaboration_mode centralized)"
            problems.append(Problem(f"trainer.{field}", f"got {len(values)} entries for {what}; give one for all or "
                                                        f"one per trained agent"))
    named += [(f"trainer.comparator_agents.{i}", source) for i, source in enumerate(trainer.comparator_agents or [])]
    for field, source in named:
        if source:
            info = inspect_source(source, hub_cache_dirs=hub_cache_dirs)
            if info.problem:
                problems.append(Problem(field, info.problem))
    return problems


def algorithm_problems(config: RunConfig, task_modules: tuple[str, ...] = ()) -> list[Problem]:
    """The algorithm's own rules on the trainer section: its config class (``MADPOIterConfig``, ...)
    is built from it as the run will build it, so a combination only that class refuses is named now,
    not when the run starts. A system's trainers are built the same way, each from its group's
    settings and agents (``system.trainers.<i>.trainer.<field>``)."""
    from engine.schema.configure import trainer_problems  # torch-free

    if config.system is None:
        built = [("", config.trainer, list(config.agents))]
    else:
        from engine.schema.system_spec import group_trainer_spec, parse_system_spec  # torch-free

        agents = {agent.name: agent for agent in config.agents}
        built = [(f"system.trainers.{i}.", group_trainer_spec(config, group),
                  [agents[name] for name in group.agents])
                 for i, group in enumerate(parse_system_spec(config, task_modules).trainers)]
    problems = []
    for where, spec, team in built:
        for problem in trainer_problems(spec, team):
            field, _, message = problem.partition(": ")
            problems.append(Problem(where + field, message) if message else Problem(where + "trainer", field))
    return problems


def check_preflight(config: RunConfig, *, hub_cache_dirs: Sequence[str | os.PathLike[str]] | None = None,
                    limits: RunLimits | None = None, permissions: OperatorPermissions = LIBRARY,
                    read_area: ReadArea | None = None) -> None:
    """Raise :class:`ConfigError` listing every pre-flight problem, one ``field: message`` line each."""
    problems = preflight_problems(config, hub_cache_dirs=hub_cache_dirs, limits=limits, permissions=permissions,
                                  read_area=read_area)
    if problems:
        raise ConfigError("\n".join(str(p) for p in problems))


def _agent_models(config: RunConfig, hub_cache_dirs: Sequence[str | os.PathLike[str]] | None,
                  problems: list[Problem]) -> list[_Model]:
    """The model of each agent (a weight-sharing agent has its partner's), adding source problems."""
    models: list[_Model] = []
    index = {agent.name: i for i, agent in enumerate(config.agents)}
    for i, agent in enumerate(config.agents):
        if agent.share_weights_with is not None and agent.share_weights_with in index:
            models.append(models[index[agent.share_weights_with]])  # its own model and tokenizer are unused
            continue
        info = inspect_source(agent.model, hub_cache_dirs=hub_cache_dirs, model_kwargs=agent.model_kwargs)
        if info.problem:
            problems.append(Problem(f"agents.{i}.model", info.problem))
        if agent.tokenizer:
            tok = inspect_source(agent.tokenizer, hub_cache_dirs=hub_cache_dirs, tokenizer_only=True)
            if tok.problem:
                problems.append(Problem(f"agents.{i}.tokenizer", tok.problem))
        models.append(_Model(f"agents.{i}.model", agent.model, info.context))
    return models


def _trainer_fields(config: RunConfig, task_modules: tuple[str, ...]) -> list[tuple[str, int]]:
    """Per agent: where its ``max_new_tokens`` comes from and its value (agent, system trainer, run)."""
    out = [("trainer.max_new_tokens", config.trainer.max_new_tokens)] * len(config.agents)
    if config.system is not None:
        from engine.schema.system_spec import parse_system_spec  # torch-free

        spec = parse_system_spec(config, task_modules)
        names = [a.name for a in config.agents]
        for g, group in enumerate(spec.trainers):
            value = group.trainer.get("max_new_tokens")
            if isinstance(value, int):
                for name in group.agents:
                    out[names.index(name)] = (f"system.trainers.{g}.trainer.max_new_tokens", value)
    for i, agent in enumerate(config.agents):
        if agent.max_new_tokens is not None:
            out[i] = (f"agents.{i}.max_new_tokens", agent.max_new_tokens)
    return out


def _max_new_tokens_problems(config: RunConfig, models: list[_Model], task_modules: tuple[str, ...]) -> list[Problem]:
    """``max_new_tokens`` against each model's context: one problem per field, for its tightest model."""
    tightest: dict[str, tuple[int, _Model]] = {}
    for (field, value), model in zip(_trainer_fields(config, task_modules), models, strict=True):
        context = model.context
        if context is None or value < context:
            continue
        held = tightest[field][1].context if field in tightest else None
        if held is None or context < held:
            tightest[field] = (value, model)
    return [
        Problem(field, f"{value} new tokens do not fit the context of {model.field} ({model.source}: "
                       f"{model.context} positions, prompt included); set less than {model.context}")
        for field, (value, model) in tightest.items()
    ]


def task_problems(config: RunConfig, task_modules: tuple[str, ...] = ()) -> list[Problem]:
    """The task resolves (modules of ``task_modules`` only), its parameters validate, the team and turns fit it.

    Resolving an allowed plugin imports its module; no factory is called and no dataset is loaded.
    """
    from engine.schema.task_registry import get_task_info
    from engine.schema.task_table import TaskError

    name = config.task.name
    try:
        info = get_task_info(name, task_modules)
    except TaskError as exc:
        return [Problem("task.name", str(exc))]
    problems = task_fit_problems(info, dict(config.task.params), len(config.agents), config.trainer.num_turns)
    problems += _best_metric_problems(config, info)
    return problems


def task_fit_problems(info: Any, params: Any, num_agents: int, num_turns: Any) -> list[Problem]:
    """A task's parameters against its params model, the team size and the number of turns against
    what the task supports (``info``: its catalog entry). Needs no parsed config, so the dashboard's
    form names these even while another field is invalid."""
    name, problems = info.name, []
    try:
        info.params_model.model_validate(params)
    except ValidationError as exc:
        accepted = ", ".join(info.params_model.model_fields) or "none"
        for err in exc.errors():
            where = ".".join(["task.params", *(str(p) for p in err["loc"])])
            message = err["msg"].removeprefix("Value error, ")
            if err["type"] == "extra_forbidden":
                message = f"task {name!r} has no parameter {err['loc'][-1]!r}; accepted: {accepted}"
            problems.append(Problem(where, message))
    sizes = tuple(info.team_sizes)
    if sizes and num_agents not in sizes:
        problems.append(Problem("agents", f"task {name!r} is played by {' or '.join(str(n) for n in sizes)} "
                                          f"agent(s), not {num_agents}; add or remove agents"))
    if info.max_turns is not None and isinstance(num_turns, int) and num_turns > info.max_turns:
        problems.append(Problem("trainer.num_turns", f"task {name!r} supports at most {info.max_turns} turn(s)"))
    return problems


def _best_metric_problems(config: RunConfig, info: Any) -> list[Problem]:
    """A ``best_checkpoint_metric`` the task's evaluation reports (when the task declares its metrics)."""
    trainer = config.trainer
    metric = trainer.best_checkpoint_metric
    samples = 1 if trainer.eval_greedy else trainer.eval_samples_per_item
    names = info.eval_metric_names(trainer.num_turns, samples) if metric else None
    if names is None or metric in names:
        return []
    return [Problem("trainer.best_checkpoint_metric",
                    f"task {info.name!r} does not report {metric!r} with these settings; its evaluation reports "
                    f"{', '.join(sorted(names))}")]
