"""Request bodies in the JSON form Go's ``encoding/json`` writes, for every drakit client.

Why: a RawExtension (a claim's opaque config ``parameters``, a device status' ``data``) is
kept by the apiserver with the bytes it received. To apply any patch (JSON, merge,
strategic, apply) it encodes the stored object as Go does: compact, UTF-8, ``<`` ``>``
``&`` U+2028 U+2029 escaped (``\\u003c``...), everything else (key order, number spellings,
other escapes) as received. It then compares the old and new ``spec`` and
``status.allocation`` byte for byte. Bytes received in another form (the ``", "``
separators of Python's ``json.dumps``, a raw ``<``) come out of that re-encoding changed,
and every later patch of the claim, by any client, is refused: "spec: field is immutable",
"status.allocation: field cannot be modified once set".

Bytes written by :func:`dumps` are already in that form, so they stay the same through the
apiserver's patches. Both of drakit's clients write their bodies with it: the light client
(:mod:`drakit.kubeapi.lightclient`) and the ``kubernetes`` client drakit builds
(:class:`drakit.kubeapi.client.RateLimitedApiClient`, whose REST layer would otherwise use
``json.dumps``' defaults).
"""

from __future__ import annotations

import json
from functools import partial
from typing import Any

from drakit.kubeapi import deepjson

__all__ = ["GO_ESCAPES", "dumps", "dumps_fast"]

#: The characters Go's encoder escapes inside strings (``SetEscapeHTML(true)``, its default).
GO_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028",
              "\u2029": "\\u2029"}  # fmt: skip
_ESCAPE_TABLE = str.maketrans(GO_ESCAPES)
_ESCAPE_BYTES = [(k.encode(), v.encode()) for k, v in GO_ESCAPES.items()]


def _compact_dumps(body: Any, *, default: Any = None, ensure_ascii: bool = False) -> str:
    return json.dumps(body, default=default, separators=(",", ":"), ensure_ascii=ensure_ascii)


def dumps(body: Any) -> bytes:
    """``body`` (plain JSON values or :class:`~drakit.kubeapi.deepjson.DeepJSON`) as Go
    writes it. A lone surrogate, which UTF-8 cannot hold, is written ``\\udXXX``."""
    text: str = deepjson.encode(body, _compact_dumps)
    try:
        data = text.translate(_ESCAPE_TABLE).encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: escaped (\udXXX) as json does by default
        ascii_dumps = partial(_compact_dumps, ensure_ascii=True)
        data = deepjson.encode(body, ascii_dumps).translate(_ESCAPE_TABLE).encode()
    return data


def dumps_fast(body: Any) -> bytes:
    """:func:`dumps` with orjson (about 10x faster; imported on first use), the same bytes
    for what orjson writes, :func:`dumps` for what only ``json`` can write."""
    import orjson  # noqa: PLC0415  (loaded only by a client that asks for speed)

    try:
        data: bytes = deepjson.encode(body, orjson.dumps)
    except TypeError:  # what only json can write (an int beyond 64 bits, a non-str key,
        return dumps(body)  # nesting beyond orjson's 255 levels, a lone surrogate)
    # orjson is compact and UTF-8 already; these characters can only be inside strings.
    for raw, escaped in _ESCAPE_BYTES:
        if raw in data:
            data = data.replace(raw, escaped)
    return data
