"""Plain data: the only values that cross between a candidate process and its judge.

A value is plain when it is built, recursively, from exact built-in types: ``None``, ``bool``,
``int``, ``float``, ``complex``, ``str``, ``bytes``, ``list``, ``tuple``, ``dict``, ``set`` and
``frozenset``. Subclasses are not plain (an ``int`` subclass may answer ``==`` with anything).

``encode`` turns a plain value into JSON text; ``decode`` turns JSON text back into a plain value,
building only exact built-in types, so whatever the sender wrote, the receiver gets plain data or
a :class:`NotPlain` error. Decoding takes time linear in the message: a set or dict whose items
share one hash (every multiple of 2**61-1 hashes to 0) would take quadratic time to build, inside
C where no alarm can stop it, so more than :data:`MAX_SAME_HASH` items with one hash are refused. JSON objects are tags (``{"tuple": [...]}``), never data, so the
encoding is unambiguous. Standard library only: this file also runs inside the sandbox.
"""

import json

MAX_DEPTH = 64
MAX_SAME_HASH = 16  # distinct plain values rarely share a hash at all (-1 and -2 do)
_TAGS = ("tuple", "dict", "set", "frozenset", "bytes", "complex")


class NotPlain(ValueError):
    """A value (or a message) that is not plain data."""


def _walk(value, depth, tagged):
    """What the codec does the same both ways: the nesting limit, scalars (None, bool, int, float,
    str of exact built-in types) as they are, lists item by item; everything else goes to ``tagged``."""
    if depth > MAX_DEPTH:
        raise NotPlain(f"nested deeper than {MAX_DEPTH} levels")
    kind = type(value)
    if value is None or kind is bool or kind is int or kind is float or kind is str:
        return value
    if kind is list:
        return [_walk(item, depth + 1, tagged) for item in value]
    return tagged(value, depth)


def to_json(value, depth=0):
    """The JSON tree of a plain value (raises :class:`NotPlain`)."""
    return _walk(value, depth, _to_tag)


def from_json(tree, depth=0):
    """A plain value from a JSON tree; every container and scalar is an exact built-in type."""
    return _walk(tree, depth, _from_tag)


def _to_tag(value, depth):
    kind = type(value)
    if kind is tuple:
        return {"tuple": [to_json(item, depth + 1) for item in value]}
    if kind is dict:
        return {"dict": [[to_json(k, depth + 1), to_json(v, depth + 1)] for k, v in value.items()]}
    if kind is set or kind is frozenset:
        return {kind.__name__: [to_json(item, depth + 1) for item in value]}
    if kind is bytes:
        return {"bytes": value.hex()}
    if kind is complex:
        return {"complex": [value.real, value.imag]}
    raise NotPlain(f"a value of type {kind.__name__} is not plain data (built-in types only, no subclasses)")


def _check_collisions(keys, tag):
    """Refuse set items or dict keys of which more than MAX_SAME_HASH share one hash (linear time,
    in Python, so the judge's step alarm can interrupt it)."""
    counts = {}
    for key in keys:
        try:
            code = hash(key)
        except TypeError as exc:
            raise NotPlain(f"malformed value: {exc}") from None
        seen = counts.get(code, 0) + 1
        if seen > MAX_SAME_HASH:
            raise NotPlain(f"a {tag} with more than {MAX_SAME_HASH} items of one hash (hash collisions "
                           "would make it slow to build)")
        counts[code] = seen


def _from_tag(tree, depth):
    if type(tree) is not dict or len(tree) != 1:
        raise NotPlain("malformed value: expected a scalar, a list or a one-key tag")
    (tag, body), = tree.items()
    if tag not in _TAGS:
        raise NotPlain(f"malformed value: unknown tag {tag!r}")
    if tag == "bytes":
        if type(body) is not str:
            raise NotPlain("malformed value: bytes must be hex text")
        return bytes.fromhex(body)
    if type(body) is not list:
        raise NotPlain(f"malformed value: {tag} must hold a list")
    if tag == "complex":
        if len(body) != 2 or not all(type(x) in (int, float) for x in body):
            raise NotPlain("malformed value: complex must hold two numbers")
        return complex(body[0], body[1])
    if tag == "dict":
        pairs = []
        for pair in body:
            if type(pair) is not list or len(pair) != 2:
                raise NotPlain("malformed value: dict must hold [key, value] pairs")
            pairs.append((from_json(pair[0], depth + 1), from_json(pair[1], depth + 1)))
        _check_collisions((key for key, _ in pairs), "dict")
        try:
            return dict(pairs)
        except TypeError as exc:
            raise NotPlain(f"malformed value: {exc}") from None
    items = [from_json(item, depth + 1) for item in body]
    if tag != "tuple":
        _check_collisions(items, tag)
    try:
        return tuple(items) if tag == "tuple" else (set(items) if tag == "set" else frozenset(items))
    except TypeError as exc:
        raise NotPlain(f"malformed value: {exc}") from None


def encode(value):
    """JSON text (one line) of a plain value."""
    return json.dumps(to_json(value), separators=(",", ":"))


def decode(text):
    """The plain value in JSON text; :class:`NotPlain` for anything malformed."""
    try:
        tree = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise NotPlain(f"malformed message: {type(exc).__name__}") from None
    return from_json(tree)


def decode_message(text):
    """A protocol message: a JSON object of string keys whose values are JSON trees (not decoded)."""
    try:
        message = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise NotPlain(f"malformed message: {type(exc).__name__}") from None
    if type(message) is not dict or not all(type(k) is str for k in message):
        raise NotPlain("malformed message: expected a JSON object")
    return message
