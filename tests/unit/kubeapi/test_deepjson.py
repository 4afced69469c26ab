"""The depth bound of kubeapi.deepjson: what its decoders give at every depth, whatever the
fast parser, and how deep parts are written back."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from helpers.deepshapes import plain_depth
from hypothesis import given, settings
from hypothesis import strategies as st

from drakit.kubeapi.deepjson import (
    MAX_DEPTH,
    DeepJSON,
    depth_problem,
    depth_safe,
    encode,
    loads,
    loads_bounded,
    within_depth,
)

DEEP_LIST = "[" * 4500 + "]" * 4500
FAST = {"orjson": orjson.loads, "json": json.loads}


def claim_text(parameters: str) -> bytes:
    return (
        '{"metadata":{"name":"c"},"spec":{"devices":{"config":[{"opaque":'
        f'{{"driver":"d","parameters":{{"a":{parameters},"s":"[[{{\\"x"}}}}}}]}}}}}}'
    ).encode()


def nested_text(levels: int) -> str:
    """An object ``levels`` objects deep (``{"n":{"n":…{}}}``), built as text."""
    return '{"n":' * (levels - 1) + "{}" + "}" * (levels - 1)


def compact_dumps(value: Any, default: Any = None) -> str:
    return json.dumps(value, default=default, ensure_ascii=False, separators=(",", ":"))


def reference_depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((reference_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((reference_depth(v) for v in value), default=0)
    return 0


def expanded(value: Any) -> Any:
    """``value`` with every DeepJSON leaf decoded (for comparing with the original)."""
    if isinstance(value, DeepJSON):
        return json.loads(value.text)
    if isinstance(value, dict):
        return {k: expanded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [expanded(v) for v in value]
    return value


# Strings full of what a depth scan could mistake for structure.
TRICKY = st.text(alphabet=["[", "]", "{", "}", '"', "\\", "a", "é", "\n", "/"], max_size=6)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | TRICKY,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TRICKY, inner, max_size=3),
    max_leaves=40,
)


# -- the bound, whatever parser is fast ------------------------------------------------------


@pytest.mark.parametrize("fast", sorted(FAST))
@pytest.mark.parametrize("levels", [150, 200, 201, 450, 600, 1023, 1025, 4500])
def test_no_decoded_object_nests_deeper_than_the_bound_at_any_depth(fast: str, levels: int):
    # Objects 450 to 1,024 levels deep used to come out of orjson as plain containers,
    # past what copy.deepcopy can copy (about 490 levels).
    text = nested_text(levels)
    decoded = depth_safe(FAST[fast])(text.encode())
    assert plain_depth(decoded) == min(levels, MAX_DEPTH)
    assert encode(decoded, compact_dumps) == text  # nothing lost
    assert (depth_problem(decoded) is None) == (levels <= MAX_DEPTH)


def test_an_object_keeps_its_deep_part_at_the_same_field_alone_in_a_list_or_in_an_event():
    # The bound counts from the API object, not from the text's root: a template read by a
    # GET, in a LIST page and in a watch event refuses or passes the same way.
    obj = nested_text(MAX_DEPTH)  # exactly at the bound: plain everywhere
    for text, outer, unwrap in (
        (obj, 0, lambda v: v),
        (f'{{"type":"ADDED","object":{obj}}}', 1, lambda v: v["object"]),
        (f'{{"kind":"List","items":[{obj}]}}', 2, lambda v: v["items"][0]),
    ):
        assert depth_problem(unwrap(loads(text.encode(), outer))) is None
    deeper = nested_text(MAX_DEPTH + 1)
    for text, outer, unwrap in (
        (deeper, 0, lambda v: v),
        (f'{{"type":"ADDED","object":{deeper}}}', 1, lambda v: v["object"]),
        (f'{{"kind":"List","items":[{deeper}]}}', 2, lambda v: v["items"][0]),
    ):
        problem = depth_problem(unwrap(loads(text.encode(), outer)))
        assert problem == f"n.n.n.n.n.n.n.n.n.n.n.n…: nested more than {MAX_DEPTH} levels deep"


@pytest.mark.parametrize("fast", sorted(FAST))
def test_a_claim_nested_4500_levels_decodes_with_the_deep_part_kept_as_text(fast: str):
    decoded = depth_safe(FAST[fast])(claim_text(DEEP_LIST))
    parameters = decoded["spec"]["devices"]["config"][0]["opaque"]["parameters"]
    value, levels = parameters["a"], 7  # root, spec, devices, config, [0], opaque, parameters
    while isinstance(value, list):
        (value,), levels = value, levels + 1
    assert isinstance(value, DeepJSON)
    assert levels == MAX_DEPTH
    assert value.text == DEEP_LIST[levels - 7 : -(levels - 7)]
    assert parameters["s"] == '[[{"x'  # brackets and quotes inside strings are not nesting


@settings(max_examples=400, deadline=None)
@given(JSON_VALUES, st.integers(min_value=0, max_value=6), st.booleans())
def test_within_depth_agrees_with_the_parsed_depth(value: Any, limit: int, ascii_only: bool):
    text = json.dumps(value, ensure_ascii=ascii_only)
    assert within_depth(text, limit) == (reference_depth(value) <= limit)
    assert within_depth(text.encode(), limit) == (reference_depth(value) <= limit)


@settings(max_examples=400, deadline=None)
@given(JSON_VALUES, st.integers(min_value=1, max_value=5))
def test_bounded_decoding_keeps_every_byte_and_nothing_plain_past_the_limit(value: Any, limit: int):
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    decoded = loads_bounded(text, limit)
    assert plain_depth(decoded) <= limit
    assert expanded(decoded) == value
    assert encode(decoded, compact_dumps) == text


# -- writing back ----------------------------------------------------------------------------


@pytest.mark.parametrize("dumps", [orjson.dumps, json.dumps], ids=["orjson", "json"])
def test_a_decoded_deep_object_is_written_back_byte_for_byte(dumps):
    text = claim_text(DEEP_LIST)
    written = encode(loads_bounded(text), dumps)
    written = written if isinstance(written, bytes) else written.encode()
    assert written.replace(b" ", b"") == text


def test_json_within_the_depth_limit_decodes_as_plain_containers():
    text = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    value = loads_bounded(text)
    for _ in range(MAX_DEPTH - 1):
        value = value[0]
    assert value == []


def test_text_that_is_not_json_is_still_refused():
    decode = depth_safe(orjson.loads)
    for text in (b'{"a": [' + b"[" * 2000 + b"}", b"not json", b"]" * 300, b'"' + b"[" * 300):
        with pytest.raises(ValueError):
            decode(text)


def test_encode_refuses_other_unknown_types_with_type_error():
    with pytest.raises(TypeError):
        encode({"a": object()}, json.dumps)


# -- naming the deep part --------------------------------------------------------------------


def test_depth_problem_names_the_first_deep_field_with_a_readable_path():
    value = {"ok": [1, 2], "spec": {"devices": {"config": [{"opaque": {"p": [[[]]]}}]}}}
    assert depth_problem(value, limit=8) == (
        "spec.devices.config[0].opaque.p[0][0]: nested more than 8 levels deep"
    )
    assert depth_problem(value, limit=9) is None
    hostile = {"a\x1b[31m\n": DeepJSON("[]")}
    assert depth_problem(hostile, root="data") == (
        f'data["a\\u001b[31m\\n"]: nested more than {MAX_DEPTH} levels deep'
    )


def test_depth_problem_ends_on_a_value_that_contains_itself():
    loop: list[Any] = []
    loop.append(loop)
    assert depth_problem(loop) == f"{'[0]' * 12}…: nested more than {MAX_DEPTH} levels deep"


def test_depth_problem_walks_shared_parts_once():
    # YAML aliases share one value many times: 2**60 paths, 60 containers.
    value: Any = []
    for _ in range(60):
        value = [value, value]
    assert depth_problem(value) is None


def test_the_callers_decoder_also_decodes_the_part_above_a_deep_one():
    # The webhook's decoder marks repeated keys with a hook: a review with a part past the
    # bound must not lose that for the rest of it.
    pairs_seen: list[list[tuple[str, Any]]] = []

    def hooked(text: bytes) -> Any:
        return json.loads(text, object_pairs_hook=lambda p: pairs_seen.append(p) or dict(p))

    deep = nested_text(MAX_DEPTH + 50)
    decoded = depth_safe(hooked)(f'{{"a":1,"a":2,"deep":{deep}}}'.encode())
    assert decoded["a"] == 2 and depth_problem(decoded) is not None
    assert pairs_seen[-1][:2] == [("a", 1), ("a", 2)]
