"""Slice names: the Go controller's generateName rule and index decoding."""

from __future__ import annotations

from drakit.node_plugin.publisher.naming import decode_index, generate_name, index_digits


def test_generate_name_pads_the_hex_index_to_five_digits() -> None:
    assert generate_name(10, 12, "gpu.example.com", "node-1") == "0000a-gpu.example.com-node-1-"


def test_index_digits_grow_with_the_largest_index() -> None:
    assert index_digits(1) == 5
    assert index_digits(0x100000) == 5
    assert index_digits(0x100001) == 6


def test_decode_index_reads_the_prefix_of_a_generated_name() -> None:
    assert decode_index("0000a-gpu.example.com-node-1-x7k2p", 5) == 10


def test_decode_index_rejects_a_prefix_of_the_wrong_length_or_not_hex() -> None:
    assert decode_index("000a-gpu-node-abc", 5) is None
    assert decode_index("0000a-gpu-node-abc", 6) is None
    assert decode_index("0x00a-gpu-node-abc") is None
    assert decode_index("1_000-gpu-node-abc") is None
    assert decode_index("node-1-gpu-abc") is None
    assert decode_index("nohyphen") is None
