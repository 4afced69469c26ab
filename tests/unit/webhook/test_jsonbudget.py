"""The webhook's cost model of a JSON body, read from its raw bytes before decoding
(drakit.webhook.jsonbudget): an upper bound of what json.loads allocates for every shape an
attacker may choose, nesting counted outside strings only, and no refusal of the largest
review of a claim the API can store."""

from __future__ import annotations

import gc
import json
import tracemalloc
from collections.abc import Callable

import pytest

from drakit.webhook.jsonbudget import (
    DECODE_BUDGET,
    MAX_NESTING,
    BodyRefusedError,
    check,
    decode_cost,
    nesting,
)
from drakit.webhook.review import decode_review

EMOJI = "\U0001f600".encode()


def joined(
    item: Callable[[int], bytes], count: int, open_: bytes = b"[", close: bytes = b"]"
) -> bytes:
    return open_ + b",".join(item(i) for i in range(count)) + close


#: Shapes that make json.loads allocate the most per byte of text, each about 1 MiB or less.
SHAPES: dict[str, bytes] = {
    "empty dicts": joined(lambda i: b"{}", 50_000),
    "one-key dicts": joined(lambda i: b'{"a":0}', 50_000),
    "six-key dicts (grown tables)": joined(
        lambda i: b'{"a":0,"b":0,"c":0,"d":0,"e":0,"f":0}', 20_000
    ),
    "one-item lists": joined(lambda i: b"[0]", 50_000),
    "numbers": joined(lambda i: b"1000", 100_000),
    "floats": joined(lambda i: b"1.5", 100_000),
    "big integers": joined(lambda i: b"9" * 40, 20_000),
    "short strings": joined(lambda i: b'"ab"', 100_000),
    "unique keys": joined(lambda i: b'"k%d":0' % i, 50_000, b"{", b"}"),
    "unique keys and strings": joined(lambda i: b'"k%d":"v%d"' % (i, i), 50_000, b"{", b"}"),
    "unique keys to dicts": joined(lambda i: b'"k%d":{}' % i, 50_000, b"{", b"}"),
    "nested unique keys": joined(lambda i: b'{"k%d":{"j%d":[1,2]}}' % (i, i), 25_000),
    "escaped strings": joined(lambda i: b'"a\\nb"', 50_000),
    "escaped emoji strings": joined(lambda i: b'"\\ud83d\\ude00"', 50_000),
    "raw emoji strings": joined(lambda i: b'"' + EMOJI + b'"', 50_000),
    "one ASCII string": b'["' + b"a" * 2**20 + b'"]',
    "one string with an escape": b'["\\n' + b"a" * 2**20 + b'"]',
    "one string with an escaped emoji": b'["\\ud83d\\ude00' + b"a" * 2**20 + b'"]',
    "one string with an escaped CJK character": b'["\\u4e00' + b"a" * 2**20 + b'"]',
    "one string with a raw emoji": b'["' + EMOJI + b"a" * 2**20 + b'"]',
    "one string with a raw emoji and an escape": b'["' + EMOJI + b"\\n" + b"a" * 2**20 + b'"]',
    "escaped quotes": b'["' + b'\\"' * 2**19 + b'"]',
    "nested lists": joined(lambda i: b"[" * 100 + b"]" * 100, 1000),
}


def decoded_peak(body: bytes) -> int:
    """Bytes the webhook's decoder (decode_review: json.loads with the repeated-key hook)
    allocated at its peak for ``body`` (the body itself not counted)."""
    gc.collect()
    tracemalloc.start()
    try:
        value = decode_review(body)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    del value
    return peak


@pytest.mark.parametrize("shape", SHAPES)
def test_the_cost_of_a_body_bounds_what_decoding_it_allocates(shape: str) -> None:
    body = SHAPES[shape]
    assert decoded_peak(body) <= decode_cost(body)


def test_a_body_of_many_small_values_is_refused_by_cost_before_decoding() -> None:
    body = joined(lambda i: b"{}", 2_700_000)  # 8 MiB: about 180 MiB once decoded
    with pytest.raises(BodyRefusedError) as refused:
        check(body)
    assert refused.value.status == 413
    assert f"more than the {DECODE_BUDGET // 2**20} MiB allowed" in str(refused.value)


def test_a_long_string_with_one_emoji_is_refused_where_an_ascii_one_is_not() -> None:
    ascii_text = b'["' + b"a" * (8 * 2**20 - 10) + b'"]'
    check(ascii_text)  # 8 MiB of text, 8 MiB of string
    with pytest.raises(BodyRefusedError):
        check(b'["' + EMOJI + ascii_text[2:])  # 32 MiB of text, 32 MiB of string


@pytest.mark.parametrize(
    ("body", "depth"),
    [
        (b"[]", 1),
        (b'{"a":[{"b":[]}]}', 4),
        (b'["[[[[", "]]]]", {"x": "{"}]', 2),  # brackets inside strings do not count
        (b'["\\"[[[", [[]]]', 3),  # nor after an escaped quote
        (b'["\\\\", [[]]]', 3),  # an escaped backslash does not escape the closing quote
        (b'["]]]]]]", ' + b"[" * 300 + b"]" * 300 + b"]", 301),  # closings in a string hide nothing
    ],
)
def test_nesting_counts_only_brackets_outside_strings(body: bytes, depth: int) -> None:
    assert nesting(body) == depth


def test_a_body_nested_too_deep_is_refused_even_behind_closing_brackets_in_strings() -> None:
    deep = b"[" * (MAX_NESTING + 1) + b"]" * (MAX_NESTING + 1)
    for body in (deep, b'["' + b"]" * 500 + b'", ' + deep + b"]"):
        with pytest.raises(BodyRefusedError) as refused:
            check(body)
        assert refused.value.status == 400
        assert f"nested more than {MAX_NESTING} levels" in str(refused.value)
    check(b"[" * MAX_NESTING + b"]" * MAX_NESTING)


def test_the_largest_review_of_a_claim_the_api_stores_is_not_refused() -> None:
    # 32 configs of 10 KiB of parameters (the API's limits), packed with numbers, in both
    # object and oldObject of an UPDATE; and annotations with every character escaped.
    params = {"values": [0] * 5_000}
    configs = [{"opaque": {"driver": "gpu.example.com", "parameters": params}}] * 32
    claim = {
        "metadata": {"name": "c", "annotations": {"note": "<&>" * 80_000}},
        "spec": {"devices": {"config": configs}},
    }
    review = {"request": {"uid": "u", "object": claim, "oldObject": claim}}
    body = json.dumps(review).replace("<", "\\u003c").encode()  # as Go writes it
    assert len(body) > 2 * 2**20
    check(body)
    assert decoded_peak(body) <= decode_cost(body) <= DECODE_BUDGET
