"""The tasks a run config may name: the built-in table (:mod:`engine.schema.task_table`), tasks
registered in this process, the ``cooplab.tasks`` entry points of installed packages and
``package.module:factory`` strings in modules on the operator's allowlist
(:mod:`engine.permissions.task_modules`).

``task_catalog()`` and ``get_task_info(name)`` describe tasks without building them (no torch, no
``datasets``); :func:`engine.tasks.build_task` builds one. A name that is none of the above is
refused before anything is imported (:func:`check_task_name`); the message lists what is allowed
and how an operator allows a module.

A plugin target may be a :class:`TaskInfo` (full control over title, roles and parameters) or a
plain factory function. A plain factory is called with the parameters as keyword arguments (plus
``num_agents=`` when it accepts it); its signature becomes the parameter model, so a typo in a
parameter name is reported like for built-in tasks.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from engine.permissions.task_modules import (
    HOW_TO_ALLOW,
    describe_allowed,
    foreign_object_problem,
    import_path_problem,
)
from engine.schema.task_params import TaskParams
from engine.schema.task_table import BUILTIN_TASKS, EvalMetrics, TaskError, TaskInfo

ENTRY_POINT_GROUP = "cooplab.tasks"

_REGISTRY: dict[str, TaskInfo] = {info.name: info for info in BUILTIN_TASKS}


def register_task(
    name: str,
    factory: Callable[[Any, int], Any],
    *,
    params_model: type[BaseModel] = TaskParams,
    title: str | None = None,
    description: str = "",
    roles: tuple[str, ...] | list[str] = (),
    default_num_agents: int = 2,
    team_sizes: tuple[int, ...] | list[int] | None = None,
    max_turns: int | None = 1,
    tags: tuple[str, ...] | list[str] = (),
    replace: bool = False,
    eval_metrics: EvalMetrics | None = None,
) -> TaskInfo:
    """Register a task under ``name`` and return its :class:`TaskInfo`.

    ``factory(params, num_agents)`` receives a validated ``params_model`` instance and returns an
    :class:`engine.tasks.Task`. ``max_turns=None`` declares that the task has a transition and
    supports any number of turns. ``eval_metrics`` declares what its evaluation reports (so a
    ``best_checkpoint_metric`` is checked when a config is validated); None leaves that to the first
    evaluation.
    """
    if not name or ":" in name:
        raise TaskError(f"task name {name!r} is invalid: use a non-empty name without ':'")
    if name in _REGISTRY and not replace:
        raise TaskError(f"task {name!r} is already registered; pass replace=True to override it")
    sizes = tuple(team_sizes) if team_sizes is not None else (default_num_agents,)
    if default_num_agents not in sizes:
        raise TaskError(f"task {name!r}: default_num_agents={default_num_agents} is not among team_sizes {sizes}")
    info = TaskInfo(name=name, title=title or name.replace("_", " ").capitalize(), description=description,
                    roles=tuple(roles), default_num_agents=default_num_agents, team_sizes=sizes, max_turns=max_turns,
                    params_model=params_model, factory=factory, tags=tuple(tags), eval_metrics=eval_metrics)
    _REGISTRY[name] = info
    return info


def unregister_task(name: str) -> TaskInfo | None:
    """Remove a registered task (e.g. one a test registered); returns its entry, None when there was none."""
    return _REGISTRY.pop(name, None)


def task_catalog(*, include_plugins: bool = True) -> list[TaskInfo]:
    """Every registered task (built-ins first), plus installed ``cooplab.tasks`` entry points."""
    infos = list(_REGISTRY.values())
    if include_plugins:
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            if ep.name in _REGISTRY:
                continue
            try:
                target = ep.load()
                infos.append(_info_from_target(target, ep.name, source=f"entry point {ep.name!r} ({ep.value})"))
            except Exception:  # a broken plugin must not hide the rest of the catalog; build_task reports it
                continue
    return infos


def get_task_info(name: str, allowed_modules: tuple[str, ...] = ()) -> TaskInfo:
    """The catalog entry of a registered name, an entry point, or a ``package.module:factory`` in a module
    of ``allowed_modules`` (the operator's task module allowlist; empty by default)."""
    check_task_name(name, allowed_modules)
    if name in _REGISTRY:
        return _REGISTRY[name]
    if ":" in name:
        return _info_from_target(_import_target(name, allowed_modules), name, source=name)
    for ep in entry_points(group=ENTRY_POINT_GROUP, name=name):
        try:
            target = ep.load()
        except Exception as exc:
            raise TaskError(f"task {name!r}: entry point {ep.value!r} failed to import: {exc}") from exc
        return _info_from_target(target, name, source=f"entry point {name!r} ({ep.value})")
    raise TaskError(f"unknown task {name!r}; {allowed_tasks_text(allowed_modules)}")  # removed since the check


def entry_point_names() -> list[str]:
    """Names of the installed ``cooplab.tasks`` entry points (read from metadata; nothing is imported)."""
    return sorted({ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)})


def allowed_tasks_text(allowed_modules: tuple[str, ...] = ()) -> str:
    """What a config may name as its task under the allowlist ``allowed_modules``, for error messages and
    help texts."""
    modules = allowed_modules
    plugins = ", ".join(n for n in entry_point_names() if n not in _REGISTRY) or "none installed"
    return (
        f"a config may name a registered task ({', '.join(sorted(_REGISTRY))}), an installed plugin task "
        f"(entry points of the {ENTRY_POINT_GROUP!r} group: {plugins}) or 'package.module:factory' in an "
        f"allowed task module (allowed: {describe_allowed(modules)}); {HOW_TO_ALLOW}"
    )


def task_name_problem(name: str, allowed_modules: tuple[str, ...] = ()) -> str | None:
    """Why a config may not name the task ``name`` under the task module allowlist ``allowed_modules``
    (None when it may). Imports no user code."""
    if name in _REGISTRY:
        return None
    if ":" in name:
        reason = import_path_problem(name, allowed_modules)
        if reason is None:
            return None
        return f"task {name!r} is not allowed: {reason}; {allowed_tasks_text(allowed_modules)}"
    if name in entry_point_names():
        return None
    return f"unknown task {name!r}; {allowed_tasks_text(allowed_modules)}"


def check_task_name(name: str, allowed_modules: tuple[str, ...] = ()) -> None:
    """Raise :class:`TaskError` unless a config may name the task ``name`` (see :func:`task_name_problem`)."""
    problem = task_name_problem(name, allowed_modules)
    if problem is not None:
        raise TaskError(problem)


def validate_params(info: TaskInfo, params: dict[str, Any] | None) -> BaseModel:
    """``params`` validated by the task's parameter model; errors name each bad field."""
    params = dict(params or {})
    try:
        return info.params_model.model_validate(params)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'params'}: {err['msg']}" for err in exc.errors()
        )
        fields = ", ".join(info.params_model.model_fields) or "none"
        raise TaskError(f"task {info.name!r}: invalid params: {problems} (accepted params: {fields})") from None


def _import_target(path: str, allowed_modules: tuple[str, ...]) -> Any:
    """Import an allowed ``package.module:attr`` path (callers check it with :func:`check_task_name` first)."""
    module_name, _, attr = path.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise TaskError(f"task {path!r}: could not import module {module_name!r}: {type(exc).__name__}: {exc}") from exc
    target: Any = module
    for part in attr.split("."):
        if not hasattr(target, part):
            raise TaskError(f"task {path!r}: module {module_name!r} has no attribute {attr!r}")
        target = getattr(target, part)
        if isinstance(target, TaskInfo):
            break  # a catalog entry declared by the allowed module itself
        problem = foreign_object_problem(target, allowed_modules)
        if problem is not None:
            raise TaskError(f"task {path!r} is not allowed: {problem}")
    return target


def _info_from_target(target: Any, name: str, *, source: str) -> TaskInfo:
    """A :class:`TaskInfo` for a plugin target: a TaskInfo as is, or a plain factory function."""
    if isinstance(target, TaskInfo):
        return target
    if not callable(target):
        raise TaskError(f"task {source}: {type(target).__name__} is neither a TaskInfo nor a factory function")
    model, wants_num_agents = params_model_from_signature(target, name)

    def factory(params: BaseModel, num_agents: int) -> Any:
        kwargs = params.model_dump()
        if wants_num_agents:
            kwargs["num_agents"] = num_agents
        return target(**kwargs)

    doc = inspect.getdoc(target) or ""
    return TaskInfo(
        name=name,
        title=name.rsplit(":", 1)[-1].replace("_", " ").capitalize(),
        description=doc.split("\n\n")[0].replace("\n", " "),
        roles=(),
        default_num_agents=2,
        team_sizes=tuple(range(1, 17)),
        max_turns=None,
        params_model=model,
        factory=factory,
    )


def params_model_from_signature(func: Callable, name: str) -> tuple[type[BaseModel], bool]:
    """A pydantic model whose fields are ``func``'s keyword parameters (``num_agents`` excluded)."""
    try:
        try:
            sig = inspect.signature(func, eval_str=True)
        except NameError:  # an annotation that cannot be resolved: fall back to the raw strings
            sig = inspect.signature(func)
    except (TypeError, ValueError) as exc:
        raise TaskError(f"task {name!r}: cannot read the factory's signature: {exc}") from exc
    fields: dict[str, Any] = {}
    wants_num_agents = False
    extra: Literal["allow", "forbid"] = "forbid"
    for param in sig.parameters.values():
        if param.kind is param.VAR_KEYWORD:
            extra = "allow"
            continue
        if param.kind is param.VAR_POSITIONAL:
            continue
        if param.name == "num_agents":
            wants_num_agents = True
            continue
        annotation = param.annotation if param.annotation is not param.empty else Any
        if isinstance(annotation, str):
            annotation = Any  # postponed annotations: validate loosely rather than guess
        default = ... if param.default is param.empty else param.default
        fields[param.name] = (annotation, Field(default))
    if extra == "allow":
        wants_num_agents = True
    model = create_model(
        f"{name.rsplit(':', 1)[-1].replace('.', '_')}_params",
        __config__=ConfigDict(extra=extra, arbitrary_types_allowed=True),
        **fields,
    )
    return model, wants_num_agents
