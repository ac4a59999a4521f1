"""The plain-data codec: exact built-in types round-trip; subclasses and malformed text never pass."""

from __future__ import annotations

import json
import math

import pytest

from engine.sandbox.guest.plain import MAX_DEPTH, NotPlain, decode, decode_message, encode, from_json, to_json


@pytest.mark.parametrize("value", [
    None, True, False, 0, -7, 10 ** 40, 1.5, -0.0, float("inf"), "text\nwith\0nul", b"\x00\xff",
    [1, [2, [3]]], (1, "a", (2.0,)), (), {"a": 1, 2: [3], (1, 2): None}, {1, 2, 3}, frozenset({"x"}),
    complex(1, -2), [{"k": {(1,): frozenset({b"z"})}}],
])
def test_plain_values_round_trip_with_their_exact_types(value):
    back = decode(encode(value))
    assert back == value
    assert repr(back) == repr(value)  # tuple stays tuple, 1 stays int, -0.0 keeps its sign


def test_nan_round_trips():
    assert math.isnan(decode(encode(float("nan"))))


def test_distinct_types_stay_distinct():
    # the tests compare with ==, so True must not become 1 and 1 must not become 1.0
    assert [type(v) for v in decode(encode([True, 1, 1.0, (1,), [1]]))] == [bool, int, float, tuple, list]


class AlwaysEqual:
    def __eq__(self, other):
        return True


class Int(int):
    def __eq__(self, other):
        return True

    __hash__ = int.__hash__


class Str(str):
    pass


class List(list):
    pass


class Dict(dict):
    pass


@pytest.mark.parametrize("value", [AlwaysEqual(), Int(3), Str("a"), List([1]), Dict(a=1), [1, [Int(2)]],
                                   (Str("x"),), {1: AlwaysEqual()}, {Int(1)}, len, object(), bytearray(b"x")])
def test_non_plain_values_are_refused_with_their_type_named(value):
    with pytest.raises(NotPlain, match="not plain data"):
        encode(value)


def test_depth_is_bounded_both_ways():
    deep = []
    for _ in range(MAX_DEPTH + 5):
        deep = [deep]
    with pytest.raises(NotPlain, match="deeper"):
        encode(deep)
    text = "[" * 100_000 + "]" * 100_000  # a hostile sender skips our encoder
    with pytest.raises(NotPlain):
        decode(text)


@pytest.mark.parametrize("text", [
    "{", '{"passed": 1}', '{"tuple": 3}', '{"dict": [[1]]}', '{"dict": [[[1], 2]]}', '{"set": [[1]]}',
    '{"bytes": "zz"}', '{"complex": ["a", 1]}', '{"tuple": [], "set": []}', "1" * 5000, "\x00",
])
def test_malformed_text_is_refused(text):
    with pytest.raises((NotPlain, ValueError)):
        decode(text)


def test_decoding_builds_only_builtin_types():
    tree = json.loads(encode({"a": [(1, {2})]}))
    value = from_json(tree)
    assert type(value) is dict and type(value["a"]) is list and type(value["a"][0]) is tuple
    assert to_json(value) == tree


def test_messages_must_be_objects_with_string_keys():
    assert decode_message('{"id": 1, "value": [1]}') == {"id": 1, "value": [1]}
    for text in ("[1]", "3", "nope", '{"a": 1'):
        with pytest.raises(NotPlain):
            decode_message(text)


def test_hash_colliding_sets_and_dicts_are_refused_in_linear_time():
    """Every multiple of 2**61-1 hashes to 0: a set of 38,000 of them took the judge 12 s to build
    (quadratic, in C, past its step alarm); now the decoder refuses it before building anything."""
    import time

    from engine.sandbox.guest.plain import MAX_SAME_HASH

    p = 2 ** 61 - 1
    colliding = [p * k for k in range(1, 38_001)]
    started = time.monotonic()
    for text in (json.dumps({"set": colliding}), json.dumps({"frozenset": colliding}),
                 json.dumps({"dict": [[k, 0] for k in colliding]}), json.dumps([{"set": colliding}])):
        with pytest.raises(NotPlain, match="items of one hash"):
            decode(text)
    assert time.monotonic() - started < 2.0
    # a few values that share a hash by nature (-1 and -2; equal-hash tuples) still decode
    ok = [-1, -2] + [p * k for k in range(1, MAX_SAME_HASH - 1)]
    assert decode(encode(set(ok))) == set(ok)
    assert decode(encode({k: k for k in ok})) == {k: k for k in ok}
