"""Decoding JSON deeper than Python's parsers go (kubeapi.deepjson), and writing it back."""

from __future__ import annotations

import json

import orjson
import pytest

from drakit.kubeapi.deepjson import MAX_DEPTH, DeepJSON, depth_safe, encode, loads_bounded

DEEP_LIST = "[" * 4500 + "]" * 4500


def claim_text(parameters: str) -> bytes:
    return (
        '{"metadata":{"name":"c"},"spec":{"devices":{"config":[{"opaque":'
        f'{{"driver":"d","parameters":{{"a":{parameters},"s":"[[{{\\"x"}}}}}}]}}}}}}'
    ).encode()


@pytest.mark.parametrize("fast", [orjson.loads, json.loads], ids=["orjson", "json"])
def test_a_claim_nested_4500_levels_decodes_with_the_deep_part_kept_as_text(fast):
    decoded = depth_safe(fast)(claim_text(DEEP_LIST))
    parameters = decoded["spec"]["devices"]["config"][0]["opaque"]["parameters"]
    value, levels = parameters["a"], 7  # root, spec, devices, config, [0], opaque, parameters
    while isinstance(value, list):
        (value,), levels = value, levels + 1
    assert isinstance(value, DeepJSON)
    assert levels == MAX_DEPTH
    assert value.text == DEEP_LIST[levels - 7 : -(levels - 7)]
    assert parameters["s"] == '[[{"x'  # brackets and quotes inside strings are not nesting


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
    with pytest.raises(ValueError):
        depth_safe(orjson.loads)(b'{"a": [' + b"[" * 2000 + b"}")
    with pytest.raises(ValueError):
        depth_safe(orjson.loads)(b"not json")


def test_encode_refuses_other_unknown_types_with_type_error():
    with pytest.raises(TypeError):
        encode({"a": object()}, json.dumps)
