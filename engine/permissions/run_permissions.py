"""What a run config may do on this machine that only the operator can allow: send a key or a request
to a host (:mod:`engine.permissions.outbound`), run code that comes with a model (:mod:`engine.permissions.remote_code`);
and, whatever the operator allows, only the ``from_pretrained`` arguments of :mod:`engine.permissions.model_kwargs`.

:func:`permission_problems` is part of pre-flight (:mod:`engine.schema.preflight`, before a run is stored or
queued); :func:`check_permissions` runs again when a run starts (:func:`engine.build.run.run_training`),
since a worker runs whatever was stored, and the operator's settings may have changed in between.
Both take the operator's :class:`engine.permissions.operator.OperatorPermissions`; where its listing or
permission was not set (:data:`engine.permissions.operator.LIBRARY`), nothing is listed and nothing allowed.
Torch-free.
"""

from __future__ import annotations

from engine.permissions.model_kwargs import model_kwargs_problems
from engine.permissions.operator import LIBRARY, OperatorPermissions
from engine.permissions.outbound import ApiHosts, OutboundRefused, Resolver, checked_target, resolve
from engine.permissions.remote_code import remote_code_problem
from engine.schema.errors import ConfigError
from engine.schema.run_config import RunConfig
from engine.schema.sources import BUILTIN_PREFIX


def permission_problems(config: RunConfig, permissions: OperatorPermissions = LIBRARY, *,
                        resolver: Resolver = resolve) -> list[tuple[str, str]]:
    """``(field, message)`` for each thing ``config`` asks that the operator's ``permissions`` do not allow.

    The API comparator's URL against its ``api_hosts`` (its key's binding, the scheme, and every address
    its host resolves to: a name this machine cannot resolve is left to the run, which checks again), and
    every agent's ``model_kwargs`` against the allowlist of :mod:`engine.permissions.model_kwargs` and
    ``allow_remote_code``.
    """
    hosts = permissions.api_hosts or ApiHosts()
    allowed = bool(permissions.allow_remote_code)
    problems: list[tuple[str, str]] = []
    trainer = config.trainer
    if trainer.comparator_policy == "api" and trainer.comparator_api_url:
        problem = _url_problem(trainer.comparator_api_url, hosts, trainer.comparator_api_key_env, resolver)
        if problem:
            problems.append(("trainer.comparator_api_url", problem))
    for i, agent in enumerate(config.agents):
        if agent.model.startswith(BUILTIN_PREFIX):  # its own size and seed, checked where it is built
            found = [p for p in [remote_code_problem(agent.model_kwargs, allowed)] if p]
        else:
            found = model_kwargs_problems(agent.model_kwargs, allowed)
        if found:
            problems.append((f"agents.{i}.model_kwargs", "; ".join(found)))
    return problems


def _url_problem(url: str, hosts: ApiHosts, variable: str | None, resolver: Resolver) -> str | None:
    try:
        checked_target(url, hosts, key_variable=variable, has_key=variable is not None, resolver=resolver)
    except OutboundRefused as exc:
        return str(exc)
    except OSError:
        return None  # not resolvable here: the run resolves and checks it again before connecting
    return None


def check_permissions(config: RunConfig, permissions: OperatorPermissions = LIBRARY) -> None:
    """Raise :class:`ConfigError` (one ``field: message`` line each) when ``config`` asks for something the
    operator's ``permissions`` do not allow (see :func:`permission_problems`)."""
    problems = permission_problems(config, permissions)
    if problems:
        raise ConfigError("\n".join(f"{field}: {message}" for field, message in problems))


__all__ = ["check_permissions", "permission_problems"]
