"""CoMLRL's ``comlrl.utils.formatters.build_formatters``: one prompt formatter per agent."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any, cast

Formatter = Callable[[dict[str, Any]], str]


def _default_formatter(item: dict[str, Any], external_prompts: Any = None) -> str:
    if external_prompts is not None:
        return external_prompts
    return item.get("prompt", "")


def _wrap(fmt: Callable[..., str], pass_none_external_prompts: bool) -> Callable[..., str]:
    """``fmt`` callable as ``f(item, external_prompts=None)``; a formatter without that parameter
    ignores external prompts, one with it gets them (``None`` too, unless ``pass_none_external_prompts``
    is False, when it is called without them)."""
    try:
        takes_external = "external_prompts" in inspect.signature(fmt).parameters
    except (TypeError, ValueError):
        takes_external = False
    if not takes_external:
        wrapped = lambda item, external_prompts=None: fmt(item)  # noqa: E731
    elif pass_none_external_prompts:
        wrapped = lambda item, external_prompts=None: fmt(item, external_prompts=external_prompts)  # noqa: E731
    else:
        def wrapped(item: dict[str, Any], external_prompts: Any = None) -> str:
            if external_prompts is None:
                return fmt(item)
            return fmt(item, external_prompts=external_prompts)
    cast(Any, wrapped).formatter = fmt  # the user's callable behind the wrapper
    return wrapped


def build_formatters(formatters: Formatter | Sequence[Formatter] | None, num_agents: int, *,
                     pass_none_external_prompts: bool = True) -> list[Callable[..., str]]:
    """``num_agents`` formatters from None (the item's ``prompt``), one callable (for every agent) or a
    sequence of one callable per agent; each is called as ``f(item, external_prompts=None)``."""
    if formatters is None:
        return [_default_formatter for _ in range(num_agents)]
    if callable(formatters):
        return [_wrap(formatters, pass_none_external_prompts) for _ in range(num_agents)]
    if isinstance(formatters, Sequence) and not isinstance(formatters, str | bytes):
        if len(formatters) != num_agents:
            raise ValueError("Number of formatters must match num_agents when providing a sequence.")
        return [_wrap(f, pass_none_external_prompts) for f in formatters]
    raise ValueError("formatters must be None, a callable, or a sequence of callables.")
