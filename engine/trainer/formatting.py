"""Prompt building: CoMLRL formatters, chat templates, prompt templates and same-turn peer replies.

A formatter is ``fmt(item) -> str | list[message dict]``, optionally accepting ``external_prompts=``
(CoMLRL's convention for later turns). When it returns chat messages the agent's tokenizer chat
template turns them into the prompt text; a plain string is used as it is (as in CoMLRL).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

Formatter = Callable[..., Any]


def default_formatter(item: dict) -> str:
    """CoMLRL's default: the item's ``prompt`` field."""
    if "prompt" not in item:
        raise KeyError(f"dataset item has no 'prompt' field (keys: {sorted(item)}); pass formatters=")
    return str(item["prompt"])


def normalize_formatters(formatters: Formatter | Sequence[Formatter] | None, num_agents: int) -> list[Formatter]:
    """None -> the default for everyone; one callable -> shared; a list must have one per agent."""
    if formatters is None:
        return [default_formatter] * num_agents
    if callable(formatters):
        return [formatters] * num_agents
    formatters = list(formatters)
    if len(formatters) != num_agents:
        raise ValueError(f"formatters: got {len(formatters)} for {num_agents} agents; pass one per agent")
    for i, fmt in enumerate(formatters):
        if not callable(fmt):
            raise ValueError(f"formatters[{i}] is not callable ({type(fmt).__name__})")
    return formatters


def _accepts(fn: Callable, name: str) -> bool:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == name or p.kind is p.VAR_KEYWORD for p in params)


def call_formatter(fmt: Formatter, item: dict, external_prompt: str | None = None) -> Any:
    """Apply a formatter. For a later turn (``external_prompt`` given) a formatter that accepts
    ``external_prompts=`` receives it; otherwise, as in CoMLRL, the prompt is written into a copy
    of the item's ``prompt`` field and the formatter is applied to that."""
    if external_prompt is None:
        return fmt(item)
    if _accepts(fmt, "external_prompts"):
        return fmt(item, external_prompts=external_prompt)
    return fmt({**item, "prompt": external_prompt})


def has_chat_template(tokenizer: Any) -> bool:
    return bool(getattr(tokenizer, "chat_template", None))


def render_prompt(value: Any, tokenizer: Any, *, system_prompt: str | None = None) -> str:
    """Turn a formatter's result into prompt text for one agent.

    * messages (list of ``{"role", "content"}``) -> the tokenizer's chat template with the
      generation prompt (an error if the tokenizer has none);
    * a string -> itself, or, when a ``system_prompt`` is set and the tokenizer has a chat
      template, a system + user conversation rendered by the template; without a template the
      system prompt is put in front of the text.
    """
    if isinstance(value, list | tuple):
        messages = [dict(m) for m in value]
        if system_prompt and not any(m.get("role") == "system" for m in messages):
            messages.insert(0, {"role": "system", "content": system_prompt})
        if not has_chat_template(tokenizer):
            raise ValueError(
                "the formatter returned chat messages but the agent's tokenizer has no chat_template; "
                "return a string or use a chat model"
            )
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    if not isinstance(value, str):
        raise TypeError(f"a formatter must return a string or chat messages, got {type(value).__name__}")
    if system_prompt:
        if has_chat_template(tokenizer):
            messages = [{"role": "system", "content": system_prompt}, {"role": "user", "content": value}]
            return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return f"{system_prompt}\n\n{value}"
    return value


def template_formatter(template: str) -> Formatter:
    """A formatter from a Python format string over the item (``"Write a helper for: {prompt}"``).

    Later turns substitute the transition's prompt for ``{prompt}``."""

    def fmt(item: dict, external_prompts: str | None = None) -> str:
        fields = dict(item)
        if external_prompts is not None:
            fields["prompt"] = external_prompts
        try:
            return template.format(**fields)
        except KeyError as exc:
            raise KeyError(
                f"prompt_template {template!r} uses {{{exc.args[0]}}} but the item has only {sorted(item)}"
            ) from None

    return fmt


def with_peer_replies(value: Any, peers: Sequence[tuple[str, str]]) -> Any:
    """Add earlier agents' same-turn replies (``turn_order="sequential"``) to a formatter's result:
    appended to a string prompt, or to the last user message of a chat conversation."""
    if not peers:
        return value
    blocks = "\n\n".join(f"[{name}]\n{reply}" for name, reply in peers)
    addition = f"\n\nReplies so far this turn:\n{blocks}\n\nYour reply:"
    if isinstance(value, list | tuple):
        messages = [dict(m) for m in value]
        for message in reversed(messages):
            if message.get("role") == "user":
                message["content"] = f"{message.get('content', '')}{addition}"
                return messages
        return [*messages, {"role": "user", "content": addition.strip()}]
    return f"{value}{addition}"
