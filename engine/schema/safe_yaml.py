"""Reading YAML that comes from outside (a config file, an upload, a text box) within fixed limits.

PyYAML's safe loader builds an alias (``*name``) as a second reference to the object its anchor
(``&name``) made, so a few hundred bytes of nested aliases (a "billion laughs": nine lists of nine
aliases of the list before stand for 9**9 = 387,420,489 strings) load in milliseconds and explode
later, when the config is validated, copied, serialised or shown. :func:`load_yaml` reads the
document's events first (libyaml's parser, no objects built) and refuses it before anything is
built when it is

- larger than :data:`MAX_YAML_BYTES`;
- more than :data:`MAX_YAML_VALUES` values (scalars, lists and mappings) once every alias is
  counted as the values it stands for;
- nested deeper than :data:`MAX_YAML_DEPTH` levels, aliases expanded; or
- holding an alias inside the list or mapping it refers to (a recursive alias).

A run config, a study or a system section is a few hundred values; anchors and aliases that stay
within the limits load as before. Refusals raise :class:`YamlLimitError`, a ``yaml.YAMLError``,
whose message names the problem and the fix. Torch-free: every package may import it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

MAX_YAML_BYTES = 1 << 20
"""The largest YAML document read (1 MiB); run configs and studies are a few kilobytes."""
MAX_YAML_VALUES = 100_000
"""The most values (scalars, lists, mappings) a document may stand for, aliases expanded."""
MAX_YAML_DEPTH = 50
"""The deepest nesting of lists and mappings, aliases expanded."""

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when PyYAML was built with it


class YamlLimitError(yaml.YAMLError):
    """A YAML document refused before it was built: too large, too many values once its aliases are
    expanded, nested too deeply, or a recursive alias. The message names the problem and the fix."""


def load_yaml(text: str, *, source: str = "the YAML") -> Any:
    """``yaml.safe_load(text)`` within the limits above; ``source`` names the document in messages.

    Raises :class:`YamlLimitError` for a document over a limit and ``yaml.YAMLError`` for one that
    is not valid YAML.
    """
    text = str(text)
    size = len(text) if len(text) * 4 <= MAX_YAML_BYTES else len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_YAML_BYTES:
        raise YamlLimitError(
            f"{source} is {size:,} bytes, over the limit of {MAX_YAML_BYTES:,} bytes for YAML; a run config "
            "or a study is a few kilobytes: remove what does not belong in it (data goes in files the "
            "config names)")
    check_yaml_limits(text, source=source)
    try:
        return yaml.load(text, Loader=_Loader)  # noqa: S506 - a safe loader (CSafeLoader or SafeLoader)
    except ValueError as exc:  # e.g. an integer beyond Python's digit limit
        raise YamlLimitError(f"{source}: a value cannot be read: {exc}; write a shorter value") from None


def load_yaml_file(path: str | Path) -> Any:
    """:func:`load_yaml` of a UTF-8 file, refusing a file over :data:`MAX_YAML_BYTES` without reading
    it whole. ``OSError`` and ``UnicodeDecodeError`` pass through to the caller."""
    path = Path(path)
    with path.open("rb") as handle:
        data = handle.read(MAX_YAML_BYTES + 1)
        if len(data) > MAX_YAML_BYTES:
            size = max(path.stat().st_size, len(data))
            raise YamlLimitError(
                f"{path} is {size:,} bytes, over the limit of {MAX_YAML_BYTES:,} bytes for YAML; a run config "
                "or a study is a few kilobytes: remove what does not belong in it")
    return load_yaml(data.decode("utf-8"), source=str(path))


def check_yaml_limits(text: str, *, source: str = "the YAML") -> None:
    """Walk the document's parse events and raise :class:`YamlLimitError` when it stands for more than
    :data:`MAX_YAML_VALUES` values or :data:`MAX_YAML_DEPTH` levels once aliases are expanded, or
    holds a recursive alias. Nothing is built; syntax errors raise ``yaml.YAMLError``."""
    try:
        _walk(yaml.parse(text, Loader=_Loader), source)
    except YamlLimitError:
        raise
    except yaml.YAMLError:
        if _Loader is yaml.SafeLoader:
            raise
        # libyaml's messages lack the line excerpt; PyYAML's own parser says the same with it
        for _ in yaml.parse(text, Loader=yaml.SafeLoader):
            pass
        raise


def _walk(events: Any, source: str) -> None:
    """The event walk of :func:`check_yaml_limits`: one pass, no recursion. Each anchor remembers
    how many values and levels it stands for, so an alias counts as all of them."""
    anchors: dict[str, tuple[int, int]] = {}  # anchor -> (values it stands for, levels it spans)
    stack: list[list[Any]] = []  # per open list or mapping: [levels below it, its anchor, values before it]
    values = aliases = 0
    for event in events:
        if isinstance(event, yaml.DocumentStartEvent):
            anchors.clear()  # anchors are per document
        elif isinstance(event, yaml.CollectionStartEvent):
            stack.append([0, event.anchor, values])
            values = _count(values + 1, aliases, source)
            _check_depth(len(stack), source)
        elif isinstance(event, yaml.CollectionEndEvent):
            below, anchor, before = stack.pop()
            if anchor is not None:
                anchors[anchor] = (values - before, below + 1)
            if stack:
                stack[-1][0] = max(stack[-1][0], below + 1)
        elif isinstance(event, (yaml.ScalarEvent, yaml.AliasEvent)):
            count, levels = 1, 0
            if isinstance(event, yaml.AliasEvent):
                if any(frame[1] == event.anchor for frame in stack):
                    raise YamlLimitError(
                        f"{source}: the alias *{event.anchor} sits inside the list or mapping &{event.anchor} it "
                        "refers to (a recursive alias), which stands for an endless value; write the values out "
                        "instead of the alias")
                if event.anchor not in anchors:
                    continue  # an undefined alias: the loader names it
                count, levels = anchors[event.anchor]
                aliases += 1
            elif event.anchor is not None:
                anchors[event.anchor] = (1, 0)
            values = _count(values + count, aliases, source)
            _check_depth(len(stack) + levels, source)
            if stack:
                stack[-1][0] = max(stack[-1][0], levels)


def _count(values: int, aliases: int, source: str) -> int:
    """``values`` when within :data:`MAX_YAML_VALUES`, else the refusal."""
    if values > MAX_YAML_VALUES:
        how = f"once its {aliases:,} aliases (*name) are expanded" if aliases else "as written"
        raise YamlLimitError(
            f"{source} stands for more than {MAX_YAML_VALUES:,} values {how}; a run config or a study "
            "holds a few hundred: write the values out instead of nesting aliases of aliases, and keep data "
            "in files the config names")
    return values


def _check_depth(levels: int, source: str) -> None:
    if levels > MAX_YAML_DEPTH:
        raise YamlLimitError(
            f"{source} nests lists and mappings {levels} levels deep (aliases expanded), deeper than the "
            f"limit of {MAX_YAML_DEPTH}; a run config needs a handful: flatten it, and write the values out "
            "instead of aliases of aliases")
