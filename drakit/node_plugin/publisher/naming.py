"""Slice names: ``<index as lowercase hex, zero-padded to at least 5 digits>-<driver>-<node>-``.

This is the Go resourceslice controller's ``generateName`` rule (k8s.io/dynamic-resource-
allocation v0.37.2); the apiserver appends a random suffix. The index comes first because the
scheduler's allocator visits slices first-fit in name order. The digits are as many as the
largest index of the pool needs, at least five; an existing slice whose prefix has another
length or is not hex does not match any index and is obsolete.
"""

from __future__ import annotations

import string

__all__ = ["MIN_INDEX_DIGITS", "decode_index", "generate_name", "index_digits"]

MIN_INDEX_DIGITS = 5
_SEPARATOR = "-"
_HEX = frozenset(string.hexdigits)


def index_digits(slice_count: int) -> int:
    """Digits of the index prefix for a pool of ``slice_count`` slices."""
    return max(MIN_INDEX_DIGITS, len(format(max(slice_count - 1, 0), "x")))


def generate_name(index: int, slice_count: int, driver: str, node: str) -> str:
    """The ``metadata.generateName`` of slice ``index`` of a pool of ``slice_count`` slices."""
    return f"{index:0{index_digits(slice_count)}x}-{driver}-{node}-"


def decode_index(name: str, digits: int | None = None) -> int | None:
    """The index encoded in a slice name, or None if the name carries none.

    With ``digits`` the prefix must have exactly that many digits (the Go rule); without, any
    prefix of at least ``MIN_INDEX_DIGITS`` hex digits is read.
    """
    prefix, sep, _rest = name.partition(_SEPARATOR)
    if not sep:
        return None
    if digits is not None and len(prefix) != digits:
        return None
    if len(prefix) < MIN_INDEX_DIGITS or not all(c in _HEX for c in prefix):
        return None
    return int(prefix, 16)
