"""Which modules a run config may name code from: the operator's task-module allowlist.

A run config names code in two places: a user task (``task.name: package.module:factory``) and a
custom system schedule (``system.schedule.function: package.module:function``). Resolving such a
name imports the module and calls into it, so a config that could name *any* module could run any
code (``os:system``) on the machine that validates it. Configs may therefore name only:

- the built-in tasks and the ``cooplab.tasks`` entry points of installed packages (for tasks), and
- attributes of modules on this allowlist: an entry allows the module itself and every module
  below it (``mylab.tasks`` allows ``mylab.tasks:f`` and ``mylab.tasks.coding:f``, not
  ``mylab.tasksevil:f``). Private and dunder attribute paths (``_helper``, ``__dict__``) are refused,
  and so is an object the module merely imported from elsewhere (``mylab.tasks:os.system``): what a
  path resolves to must itself come from an allowed module (:func:`foreign_object_problem`).

The allowlist is empty by default and is passed to each check (no process-wide state): it is the
``task_modules`` of :class:`engine.permissions.operator.OperatorPermissions`. The engine reads no environment
variables: ``cooplab``, the workers and the dashboard build it from the operator's
``COOPLAB_TASK_MODULES`` setting (:func:`jobs.settings.operator_permissions`); a script using the engine
directly passes ``OperatorPermissions(task_modules=[...])``. Checking a name never imports anything;
only a name that passes is imported (and what it resolves to is checked again). Torch-free.
"""

from __future__ import annotations

import re
import types
from collections.abc import Iterable
from typing import Any

SETTING = "COOPLAB_TASK_MODULES"
HOW_TO_ALLOW = (
    f"an operator allows a module with the {SETTING} setting (comma-separated module names or package "
    f"prefixes, e.g. {SETTING}=mylab.tasks,otherpkg); scripts pass "
    "OperatorPermissions(task_modules=[...])"
)

_IDENTIFIER = r"[A-Za-z_][A-Za-z0-9_]*"
_DOTTED = re.compile(rf"{_IDENTIFIER}(?:\.{_IDENTIFIER})*")

def normalise_modules(modules: Iterable[str] | str | None) -> tuple[str, ...]:
    """Module names from a list or a comma-separated string, stripped and deduplicated (in order).

    Raises ``ValueError`` for an entry that is not a dotted module name (``mylab.tasks``).
    """
    if modules is None:
        return ()
    items = modules.split(",") if isinstance(modules, str) else list(modules)
    out: list[str] = []
    for item in items:
        if not isinstance(item, str):
            raise ValueError(f"task module allowlist entries must be strings, got {type(item).__name__}")
        name = item.strip()
        if not name:
            continue
        if not _DOTTED.fullmatch(name):
            raise ValueError(f"task module allowlist entry {name!r} is not a module name; use dotted names "
                             "such as mylab.tasks (no ':', no wildcards, no paths)")
        if name not in out:
            out.append(name)
    return tuple(out)


def module_allowed(module: str, allowed: Iterable[str]) -> bool:
    """True when ``module`` is an entry of ``allowed`` or lies below one (a dotted prefix match)."""
    entries = normalise_modules(allowed)
    return any(module == entry or module.startswith(entry + ".") for entry in entries)


def split_import_path(path: str, *, what: str = "factory") -> tuple[str, str]:
    """``package.module:attr.path`` -> ``(module, attr)``; ``ValueError`` when it is not of that form."""
    module, sep, attr = path.partition(":")
    if not sep or not _DOTTED.fullmatch(module) or not _DOTTED.fullmatch(attr):
        raise ValueError(f"{path!r} must look like 'package.module:{what}'")
    return module, attr


def import_path_problem(path: str, allowed: Iterable[str], *, what: str = "factory") -> str | None:
    """Why a config may not name ``path`` under the allowlist ``allowed`` (None when it may). Imports nothing."""
    try:
        module, attr = split_import_path(path, what=what)
    except ValueError as exc:
        return str(exc)
    dunder_module = [part for part in module.split(".") if part.startswith("__")]
    if dunder_module:
        return f"module {module!r} names a dunder module ({dunder_module[0]!r}); name a regular module"
    private = [part for part in attr.split(".") if part.startswith("_")]
    if private:
        return f"{attr!r} is a private or dunder attribute ({private[0]!r}); name a public {what}"
    entries = normalise_modules(allowed)
    if not module_allowed(module, entries):
        return f"module {module!r} is not on the task module allowlist"
    return None


def foreign_object_problem(obj: Any, allowed: Iterable[str]) -> str | None:
    """Why an object an allowed path resolved to may not be used (None when it may).

    An allowed module also holds what it imported (``import os`` makes ``mylab.tasks:os.system``
    resolve; ``from subprocess import run`` makes ``mylab.tasks:run``), so the object itself must come
    from an allowed module: a module by its name, anything else by its ``__module__``.
    """
    entries = normalise_modules(allowed)
    if isinstance(obj, types.ModuleType):
        if module_allowed(obj.__name__, entries):
            return None
        return f"it reaches module {obj.__name__!r}, which is not on the task module allowlist"
    where = getattr(obj, "__module__", None)
    if not isinstance(where, str) or not module_allowed(where, entries):
        label = getattr(obj, "__qualname__", None) or type(obj).__name__
        return (f"it resolves to {label!r} from module {where!r}, which is not on the task module allowlist; "
                "name something defined in an allowed module")
    return None


def describe_allowed(entries: Iterable[str]) -> str:
    """The allowlist for messages: ``mylab.tasks, otherpkg`` or ``none``."""
    return ", ".join(entries) or "none"


def schedule_function_problem(path: str, allowed: Iterable[str]) -> str | None:
    """Why a config may not name ``path`` as its custom schedule function (None when it may): the
    module must be on the task module allowlist ``allowed``. Imports nothing."""
    entries = normalise_modules(allowed)
    reason = import_path_problem(path, entries, what="function")
    if reason is None:
        return None
    return (f"custom schedule function {path!r} is not allowed: {reason}; allowed modules: "
            f"{describe_allowed(entries)}; "
            f"{HOW_TO_ALLOW}")
