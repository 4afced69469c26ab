"""What decoding a JSON body would cost, known from its raw bytes before it is decoded.

``json.loads`` turns 8 MiB of ``[{},{},...]`` into about 180 MiB of dicts, and 8 MiB of
one string with a single emoji in it into 64 MiB (the text, then the string, at four bytes a
character). :func:`check` refuses such a body before any of it becomes a Python object, from
counts over the raw bytes (C speed, no Python loop per byte):

- **cost**: an upper bound of what ``json.loads`` allocates, peak included, must stay within
  :data:`DECODE_BUDGET`. It adds the text ``json.loads`` decodes the bytes into and the
  strings it makes (each at most the body's length times the bytes a character takes: 1 for
  ASCII, 2 or 4 with non-ASCII bytes or ``\\u`` escapes, and a half more with escapes, whose
  strings are built in a growing buffer), plus a measured upper bound per ``,`` (a list slot
  or dict entry and a number), per ``[`` and ``{`` (the container) and per ``"`` (half a
  string object, or of a key in the decoder's memo). The counts include what is inside
  strings, so they too are upper bounds. ``tests/unit/webhook/test_jsonbudget.py`` checks the
  bound against tracemalloc for the worst shapes;
- **nesting**: at most :data:`MAX_NESTING` levels (the bound of
  :mod:`drakit.kubeapi.deepjson` plus the review's own wrapping), so neither the decoder nor
  any walk of the result recurses deeply. Only a body with more containers than that can be
  deeper; its brackets outside strings are counted in one pass of C iterators.

With :data:`DECODE_BUDGET` at 48 MiB, an 8 MiB ASCII review may carry about 500,000 numbers
or 170,000 short strings; the largest claim the API stores (32 configs of 10 KiB parameters each,
twice in an UPDATE) carries at most about 330,000 numbers, real claims hundreds of values.
"""

from __future__ import annotations

import re
from itertools import accumulate

from drakit.kubeapi.deepjson import MAX_DEPTH

__all__ = ["DECODE_BUDGET", "MAX_NESTING", "BodyRefusedError", "check", "decode_cost"]

#: Most bytes decoding one body may allocate.
DECODE_BUDGET = 48 * 1024 * 1024
#: Deepest nesting decoded: deepjson's bound for what drakit keeps as objects, plus the
#: levels an AdmissionReview wraps a claim's parameters in.
MAX_NESTING = MAX_DEPTH + 16
#: Upper bounds, measured, of what one ``,`` (a list slot or dict entry and a number, and
#: for an object member the (key, value) pair the repeated-key hook of
#: :func:`drakit.webhook.review.decode_review` is handed), one ``[`` or ``{`` (the
#: container) and one ``"`` (half a string object, or of a key and its entry in the
#: decoder's memo) cost once decoded.
VALUE_COST = 80
CONTAINER_COST = 192
QUOTE_COST = 64
BASE_COST = 64 * 1024  # the decoder's own state

_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89abAB]")
_ASTRAL = re.compile(rb"[\xf0-\xf4]")  # lead byte of a 4-byte UTF-8 character
_NOT_STRUCTURE = bytes(sorted(set(range(256)) - set(b'[]{}"')))
_STEP = [0] * 256
_STEP[ord("[")] = _STEP[ord("{")] = 1
_STEP[ord("]")] = _STEP[ord("}")] = -1


class BodyRefusedError(ValueError):
    """The body is not decoded: ``status`` (413 too costly, 400 too deep) and why."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status


def decode_cost(body: bytes) -> int:
    """An upper bound of the bytes ``json.loads(body)`` allocates (see the module's doc)."""
    text_width = 1 if body.isascii() else (4 if _ASTRAL.search(body) else 2)
    string_width = text_width
    if b"\\u" in body:
        string_width = max(string_width, 4 if _SURROGATE_ESCAPE.search(body) else 2)
    strings = string_width * len(body)
    if b"\\" in body:
        strings += strings // 2  # a string with escapes is built in a buffer grown by a quarter
    strings += strings // 8  # margin: the model is exact for one long string
    values = body.count(b",") + 1
    containers = body.count(b"[") + body.count(b"{")
    return (
        text_width * len(body)
        + strings
        + VALUE_COST * values
        + CONTAINER_COST * containers
        + QUOTE_COST * body.count(b'"')
        + BASE_COST
    )


def check(body: bytes) -> None:
    """Raise BodyRefusedError when decoding ``body`` would cost more than DECODE_BUDGET or
    nest deeper than MAX_NESTING; return when ``json.loads`` may decode it. Time: a few
    passes over the bytes at C speed."""
    cost = decode_cost(body)
    if cost > DECODE_BUDGET:
        raise BodyRefusedError(
            413,
            f"decoding it could take up to {cost / 2**20:.0f} MiB (its values, strings and "
            f"containers), more than the {DECODE_BUDGET // 2**20} MiB allowed",
        )
    containers = body.count(b"[") + body.count(b"{")
    if containers > MAX_NESTING and nesting(body) > MAX_NESTING:
        raise BodyRefusedError(400, f"JSON nested more than {MAX_NESTING} levels deep")


def nesting(body: bytes) -> int:
    """How deep ``body``'s containers nest, brackets inside strings not counted.

    Escapes are removed first (``\\\\`` pairs, then ``\\"``), so every quote left opens or
    closes a string; then only brackets and quotes are kept, and the depth is a running sum
    over the brackets with an even number of quotes before them. Within the cost budget the
    bytes kept are at most a few hundred thousand.
    """
    text = body.replace(b"\\\\", b"").replace(b'\\"', b"")
    skeleton = text.translate(None, _NOT_STRUCTURE)
    del text
    # Between two quotes is a string: keep every other piece. The pieces are mostly empty
    # or one byte (shared objects), so the list costs a pointer a quote.
    outside = b"".join(skeleton.split(b'"')[::2])
    return max(accumulate(map(_STEP.__getitem__, outside)), default=0)
