"""JSON that nests deeper than Python's parsers go, decoded without losing a byte.

The apiserver stores opaque device parameters of up to 10 KiB, and nothing limits how deep
they nest: ``{"a":[[[[…]]]]}`` reaches about 5,000 levels. orjson refuses more than 1,024
levels and the standard library's parser recurses until RecursionError, so one such claim
made every LIST of claims (and every watch event carrying it) fail in every drakit
component: a denial of service by any user who may create a claim.

:func:`depth_safe` wraps a client's fast decoder. When the decoder gives up on depth, the
text is decoded again with every container nested more than :data:`MAX_DEPTH` levels kept
whole as a :class:`DeepJSON` leaf: its exact text, opaque to code that walks the object
(nothing recurses into it), and written back unchanged by :func:`encode` (so a status write
of such a claim sends what the apiserver stored). The model decoder refuses a DeepJSON
inside free-form data as too deep (:mod:`drakit.allocator.holdings` then counts the claim by its
allocation).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

__all__ = ["MAX_DEPTH", "DeepJSON", "depth_safe", "encode", "loads_bounded"]

#: Containers nested deeper than this are kept as text. Far below what the parsers and any
#: recursive walk of a decoded object (copy, ==, json.dumps) can take.
MAX_DEPTH = 200

_OPEN = frozenset(b"[{")
_CLOSE = frozenset(b"]}")
_QUOTE = ord('"')
_BACKSLASH = ord("\\")


class DeepJSON:
    """A JSON container nested too deep to decode, kept as its exact text."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DeepJSON) and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)

    def __repr__(self) -> str:
        return f"DeepJSON({len(self.text)} characters)"


def depth_safe(loads: Callable[[bytes], Any]) -> Callable[[bytes], Any]:
    """``loads`` that falls back to :func:`loads_bounded` where ``loads`` gives up on depth.

    Other errors (text that is not JSON) are raised as ``loads`` raised them.
    """

    def decode(data: bytes) -> Any:
        try:
            return loads(data)
        except RecursionError:
            pass
        except ValueError as err:
            if "depth" not in str(err) and "recursion" not in str(err):
                raise
        return loads_bounded(data)

    return decode


def loads_bounded(data: bytes | str) -> Any:
    """Decode JSON, keeping every container deeper than :data:`MAX_DEPTH` as a DeepJSON.

    Raises ValueError when the text is not JSON. Linear in the size of the text.
    """
    raw = data.encode() if isinstance(data, str) else bytes(data)
    token = f"drakit-deep-json-{uuid.uuid4().hex}-"
    spans = _deep_spans(raw)
    if not spans:
        return json.loads(raw)
    pieces: list[bytes] = []
    kept: dict[str, DeepJSON] = {}
    start = 0
    for index, (begin, end) in enumerate(spans):
        name = f"{token}{index}"
        kept[name] = DeepJSON(raw[begin:end].decode())
        pieces += [raw[start:begin], b'"', name.encode(), b'"']
        start = end
    pieces.append(raw[start:])
    return _restore(json.loads(b"".join(pieces)), kept)


def _deep_spans(raw: bytes) -> list[tuple[int, int]]:
    """(start, end) of each outermost container that opens deeper than MAX_DEPTH."""
    spans: list[tuple[int, int]] = []
    depth = 0
    in_string = escaped = False
    begin = -1
    for i, byte in enumerate(raw):
        if in_string:
            if escaped:
                escaped = False
            elif byte == _BACKSLASH:
                escaped = True
            elif byte == _QUOTE:
                in_string = False
        elif byte == _QUOTE:
            in_string = True
        elif byte in _OPEN:
            depth += 1
            if depth == MAX_DEPTH + 1:
                begin = i
        elif byte in _CLOSE:
            if depth == MAX_DEPTH + 1 and begin >= 0:
                spans.append((begin, i + 1))
                begin = -1
            depth -= 1
    if depth or in_string:
        raise ValueError("not JSON: unbalanced brackets or an unterminated string")
    return spans


def _restore(value: Any, kept: dict[str, DeepJSON]) -> Any:
    """Put the DeepJSON leaves back where their placeholders are (iteratively)."""
    if isinstance(value, str):
        return kept.get(value, value)
    stack: list[Any] = [value]
    while stack:
        container = stack.pop()
        items = container.items() if isinstance(container, dict) else enumerate(container)
        for key, item in list(items):
            if isinstance(item, str) and item in kept:
                container[key] = kept[item]
            elif isinstance(item, dict | list):
                stack.append(item)
    return value


def encode(body: Any, dumps: Callable[..., Any]) -> Any:
    """``dumps(body)``, writing each DeepJSON leaf as its text.

    ``dumps`` is a JSON encoder taking ``default=`` (json.dumps or orjson.dumps); the result
    has the type ``dumps`` returns (str or bytes).
    """
    leaves: dict[str, str] = {}
    tokens: list[str] = []  # made on the first DeepJSON only: most bodies have none

    def placeholder(value: Any) -> str:
        if not isinstance(value, DeepJSON):
            raise TypeError(f"{type(value).__name__} is not JSON serializable")
        if not tokens:
            tokens.append(f"drakit-deep-json-{uuid.uuid4().hex}-")
        name = f"{tokens[0]}{len(leaves)}"
        leaves[name] = value.text
        return name

    text = dumps(body, default=placeholder)
    if not leaves:
        return text
    as_bytes = isinstance(text, bytes)
    out = text.decode() if as_bytes else text
    for name, leaf in leaves.items():
        out = out.replace(f'"{name}"', leaf, 1)
    return out.encode() if as_bytes else out
