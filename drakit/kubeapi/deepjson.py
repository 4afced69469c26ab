"""One depth bound for every JSON value that enters drakit, and lossless decoding past it.

The apiserver stores opaque device parameters and device status ``data`` of up to 10 KiB,
and nothing limits how deep they nest: ``{"a":[[[[…]]]]}`` reaches about 5,000 levels.
Python's parsers and every recursive walk of a decoded value have limits far below that,
and different ones: orjson refuses more than 1,024 levels, ``json`` and ``copy.deepcopy``
raise RecursionError somewhere below Python's recursion limit (1,000 frames; ``deepcopy``
spends two per level, so at most 497 levels, fewer on a deeper stack), orjson's encoder
refuses more than 254. Between those limits a value decoded fine and broke the first code
that walked it (a claim template copied into a claim, a status entry copied for a patch).

What holds, exactly:

* **The bound.** :func:`depth_safe` decoders (every API answer and watch event through
  :class:`drakit.kubeapi.resources.Resource`, the webhook's AdmissionReviews) and
  :data:`loads` give values whose plain ``dict``/``list`` containers nest at most
  :data:`MAX_DEPTH` levels, counted from the API object (the object itself is level 1,
  whether it came alone, in a List's ``items`` or in a watch event). Each container that
  opens deeper is a :class:`DeepJSON` leaf instead: its exact text, opaque (no walk
  recurses into it), written back byte for byte by :func:`encode`. Whether a text needs
  that is decided before any parser runs (:func:`within_depth`, linear, no recursion), so
  no parser ever recurses past the bound either.
* **Input that is not API data** (``drakit allocate`` files, configuration documents,
  a backend's device status) is checked with :func:`depth_problem` and refused with the
  field path when it nests deeper; :mod:`drakit.kubeapi.documents` stops YAML composition
  at the bound.
* **Who refuses what.** Code that would copy, send or hand to driver code a value holding
  a DeepJSON leaf refuses the object instead, with a Warning Event of reason
  :data:`EVENT_REASON` naming the object and the field path (:func:`depth_problem`), and
  does not retry it until the object changes: claim generation (the template),
  the driver controller (the claim). Readers that only count allocations keep counting
  (fail closed): :mod:`drakit.allocator.holdings`. The allocator's model refuses free-form
  data nested more than 64 levels below its field (``drakit.allocator._codec``), which
  every DeepJSON leaf is.

Why 100 levels: no Kubernetes object drakit reads nests more than about 20 levels outside
free-form fields, and the allocator's model refuses free-form data 64 levels below its
field anyway. The recursive walks drakit does over decoded values take at most three
Python frames a level (PyYAML's composer; ``copy.deepcopy`` two; ``json.dumps``, ``==``,
``repr`` one; orjson's encoder refuses past 254 levels, more than a List page's 102), so at
most 300 frames: every walk still works with half of Python's default recursion limit
(1,000) taken by its caller (tests/unit/kubeapi/test_depth_bound.py).
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Mapping
from typing import Any, Protocol

__all__ = [
    "EVENT_REASON",
    "MAX_DEPTH",
    "Decoder",
    "DeepJSON",
    "depth_problem",
    "depth_safe",
    "encode",
    "loads",
    "loads_bounded",
    "within_depth",
]

#: Containers nested deeper than this below an API object's root are DeepJSON leaves.
MAX_DEPTH = 100

#: The reason of the Warning Event on an object refused for its depth.
EVENT_REASON = "NestedTooDeep"

#: Field path segments shown in a message before it is cut short with "…".
_PATH_SEGMENTS = 12
_KEY_CHARS = 64
_SIMPLE_KEY = re.compile(r"[A-Za-z0-9_.:/-]{1,64}")

#: Every byte but brackets and quotes, for bytes.translate's delete argument.
_NOT_STRUCTURE = bytes(set(range(256)) - set(b'[]{}"'))
#: Objects and arrays nest alike: one bracket pair for both.
_SQUARE = bytes.maketrans(b"{}", b"[]")
#: A bracket, or a whole string (so that brackets inside strings are skipped).
_TOKEN = re.compile(rb'[\[\]{}]|"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_OPEN = frozenset(b"[{")

#: Where a part of a value is: (path of its container, its key or index); None for the value.
_Path = tuple[Any, Any] | None


class DeepJSON:
    """A JSON container nested past :data:`MAX_DEPTH`, kept as its exact text (immutable)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DeepJSON) and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)

    def __repr__(self) -> str:
        return f"DeepJSON({len(self.text)} characters)"

    def __copy__(self) -> DeepJSON:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> DeepJSON:
        return self  # immutable: a copy of a value holding it may share it


class Decoder(Protocol):
    """A JSON decoder keeping the bound; ``outer`` is how many levels wrap the API object
    in the text (a watch event 1, a List 2: its ``items`` array and the List)."""

    def __call__(self, data: bytes | str, outer: int = 0) -> Any: ...


def within_depth(data: bytes | bytearray | memoryview | str, limit: int = MAX_DEPTH) -> bool:
    """Whether JSON text nests at most ``limit`` objects and arrays deep.

    No recursion, and a few passes of C-speed byte operations over the text (the last
    ones over its brackets only), at most ``limit`` of them. For text that is not JSON
    the answer means nothing, but True still guarantees that a parser reading the text
    from the start never nests more than ``limit`` levels before it finds the error.
    """
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return True
    # Escapes first (an escaped backslash, then an escaped quote): what is left of a string
    # is its quotes and whatever brackets it holds, and the strings go with the quotes.
    brackets = raw.replace(b"\\\\", b"").replace(b'\\"', b"").translate(_SQUARE, _NOT_STRUCTURE)
    brackets = brackets.replace(b'""', b"")  # most strings hold no bracket: gone in C
    if b'"' in brackets:
        brackets = b"".join(brackets.split(b'"')[::2])
    for _ in range(limit):
        if len(brackets) <= 2:
            return brackets in (b"", b"[]")
        # Each pass removes exactly the innermost level: bytes.replace matches in the text
        # as it was, so a pair closed up by this pass waits for the next one.
        brackets = brackets.replace(b"[]", b"")
    return not brackets


def depth_safe(fast: Callable[[Any], Any]) -> Decoder:
    """A :class:`Decoder` that uses ``fast`` (``json.loads``, ``orjson.loads``) for text
    within the bound and :func:`loads_bounded` for the rest; text that is not JSON raises
    ValueError (as ``fast`` raises it)."""

    def decode(data: bytes | str, outer: int = 0) -> Any:
        limit = MAX_DEPTH + outer
        if within_depth(data, limit):
            return fast(data)
        return loads_bounded(data, limit, fast)

    return decode


#: The standard library's ``json.loads``, keeping the bound.
loads: Decoder = depth_safe(json.loads)


def loads_bounded(
    data: bytes | bytearray | str,
    limit: int = MAX_DEPTH,
    fast: Callable[[Any], Any] = json.loads,
) -> Any:
    """Decode JSON, keeping every container that opens deeper than ``limit`` as a DeepJSON.

    ``fast`` decodes the rest, with the deep parts replaced by placeholders (a decoder with
    a hook, such as the webhook's, keeps its meaning for everything above the limit).
    Raises ValueError when the text is not JSON (the text of a DeepJSON leaf is taken as
    it is: the apiserver never sends anything else). Linear in the size of the text.
    """
    raw = data.encode() if isinstance(data, str) else bytes(data)
    spans = _deep_spans(raw, limit)
    if not spans:
        return fast(raw)
    token = f"drakit-deep-json-{uuid.uuid4().hex}-"
    pieces: list[bytes] = []
    kept: dict[str, DeepJSON] = {}
    start = 0
    for index, (begin, end) in enumerate(spans):
        name = f"{token}{index}"
        try:
            kept[name] = DeepJSON(raw[begin:end].decode())
        except UnicodeDecodeError as err:
            raise ValueError(f"not JSON: {err}") from None
        pieces += [raw[start:begin], b'"', name.encode(), b'"']
        start = end
    pieces.append(raw[start:])
    return _restore(fast(b"".join(pieces)), kept)


def _deep_spans(raw: bytes, limit: int) -> list[tuple[int, int]]:
    """(start, end) of each outermost container that opens deeper than ``limit``."""
    spans: list[tuple[int, int]] = []
    depth = 0
    begin = -1
    for match in _TOKEN.finditer(raw):
        byte = raw[match.start()]
        if byte == 0x22:  # a string: nothing in it nests
            continue
        if byte in _OPEN:
            depth += 1
            if depth == limit + 1:
                begin = match.start()
            continue
        if depth == limit + 1:
            spans.append((begin, match.end()))
        depth -= 1
        if depth < 0:
            raise ValueError("not JSON: a closing bracket without an opening one")
    if depth:
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


def depth_problem(value: Any, limit: int = MAX_DEPTH, root: str = "") -> str | None:
    """``"<field path>: nested more than <limit> levels deep"`` for the first part of
    ``value`` that is a DeepJSON leaf or a container deeper than ``limit`` (``value``
    itself is level 1); None when there is none.

    Iterative, and linear in the containers of ``value`` also when parts are shared (YAML
    aliases): a container is walked again only when met deeper than before, so a value
    that contains itself is reported as too deep instead of walked forever. ``root`` is
    the path of ``value`` itself (``"spec"``).
    """
    seen: dict[int, int] = {}
    stack: list[tuple[Any, int, _Path]] = [(value, 1, None)]
    while stack:
        item, depth, path = stack.pop()
        if isinstance(item, DeepJSON):
            return _too_deep(root, path, limit)
        if isinstance(item, Mapping):
            children: Any = item.items()
        elif isinstance(item, list | tuple):
            children = enumerate(item)
        else:
            continue
        if depth > limit:
            return _too_deep(root, path, limit)
        if seen.get(id(item), 0) >= depth:
            continue
        seen[id(item)] = depth
        # Reversed, so that the first child is looked at first (the path named is the first).
        stack.extend((child, depth + 1, (path, key)) for key, child in reversed(list(children)))
    return None


def _too_deep(root: str, path: _Path, limit: int) -> str:
    return f"{_render(root, path)}: nested more than {limit} levels deep"


def _render(root: str, path: _Path) -> str:
    """``spec.devices.config[0].opaque.parameters.a.b…``: the path, cut short."""
    keys: list[Any] = []
    while path is not None:
        path, key = path
        keys.append(key)
    keys.reverse()
    out = root
    for key in keys[:_PATH_SEGMENTS]:
        if isinstance(key, int):
            out += f"[{key}]"
        elif isinstance(key, str) and _SIMPLE_KEY.fullmatch(key):
            out += f".{key}" if out else key
        else:  # control characters, spaces, very long keys: quoted and clipped
            out += f"[{json.dumps(str(key)[:_KEY_CHARS])}]"
    if len(keys) > _PATH_SEGMENTS:
        out += "…"
    return out or "(the value itself)"


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
