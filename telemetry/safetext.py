"""Text that is safe to print on a terminal, whoever wrote it.

Names, messages and values read from the API server (or from a node plugin's HTTP endpoint)
are written by other people: a user who may create a claim, a pod or an Event, or whoever
controls a pod. Printed raw, such a string can move the cursor, rewrite lines already on the
screen, change the window title, plant an OSC 8 hyperlink or an OSC 52 clipboard write, or
reorder what the reader sees with bidirectional overrides (U+202E). Every user-facing command
of drakit passes what it prints through this module:

* :func:`clean` for one value (a table cell, a name, a message): every escape or control
  sequence (CSI, OSC, DCS, SOS, PM, APC, in their 7-bit ``ESC``-introduced and 8-bit C1 forms,
  and two-byte ``ESC`` sequences) becomes one ``?``; so does every other unsafe character
  (C0 and C1 controls, DEL, Unicode format characters (category Cf: bidirectional
  controls, zero-width characters, tag characters), lone surrogates). Line and tab
  controls (``\\t \\n \\v \\f \\r``, NEL, U+2028, U+2029) become a space, so one value stays
  on one line and cannot forge a row of its own. ``?`` rather than nothing: a name
  with a hidden character never looks the same as a name without one.
* :func:`clean_lines` for text that drakit assembled itself: the same, line by line, keeping
  the newlines that separate the lines. The commands apply it to their whole output as a
  last pass, so a value that a renderer forgot to clean is still harmless (it cannot start
  a new line, but it can no longer do anything else).
* :func:`clean_document` for JSON/YAML documents: every string, keys included, cleaned.
* :func:`escape_json` for JSON text that must keep its values exactly (log lines): every
  unsafe character left by ``json.dumps(..., ensure_ascii=False)`` (which escapes only C0)
  becomes its ``\\uXXXX`` escape, so the line decodes to the same value and shows none.

The result is ASCII-safe only where the input was: printable non-ASCII letters (``café``,
``日本``) are kept.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

__all__ = ["REPLACEMENT", "clean", "clean_document", "clean_lines", "escape_json", "is_clean"]

REPLACEMENT: Final = "?"

# Control strings: OSC, DCS, SOS, PM, APC (7-bit ESC ] P X ^ _, 8-bit 0x9d 0x90 0x98 0x9e
# 0x9f) run to BEL or ST (ESC \ or 0x9c); one that never ends is cut at the end of the line,
# so it cannot take the lines after it with it.
_STRING_BODY: Final = r"[^\x07\x1b\x9c\n]*(?:\x07|\x1b\\|\x9c)?"
_SEQUENCE: Final = re.compile(
    r"(?:\x1b[\]PX^_]|[\x9d\x90\x98\x9e\x9f])" + _STRING_BODY  # control strings
    + r"|(?:\x1b\[|\x9b)[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]?"  # CSI: params, intermediates, final
    + r"|\x1b[\x20-\x2f]*[\x30-\x7e]?"  # other ESC sequences (ESC c, ESC ( B, ESC 7, ...)
)  # fmt: skip
# Become a space: they break a line or jump to a column.
_SPACES: Final = "\t\n\x0b\x0c\r\x85\u2028\u2029"
# Unicode category Cf (format characters; Unicode 16). tests/unit/telemetry/test_safetext.py
# checks this list against unicodedata for every code point, so a newer Unicode cannot
# silently add one that passes.
_FORMAT: Final = (
    "\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f"
    "\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb"
    "\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3"
    "\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f"
)
_SPACE_CLASS: Final = re.compile(f"[{re.escape(_SPACES)}]")
_UNSAFE: Final = re.compile(f"[\x00-\x1f\x7f-\x9f{_FORMAT}\ud800-\udfff\u2028\u2029]")


def clean(value: object) -> str:
    """``value`` as text with nothing a terminal would act on (see the module docstring);
    ``None`` is the empty string, anything else goes through ``str``."""
    text = "" if value is None else value if isinstance(value, str) else str(value)
    if is_clean(text):
        return text
    text = _SEQUENCE.sub(REPLACEMENT, text)
    text = _SPACE_CLASS.sub(" ", text)
    return _UNSAFE.sub(REPLACEMENT, text)


def is_clean(text: str) -> bool:
    """Whether ``text`` has no character :func:`clean` would change."""
    return _UNSAFE.search(text) is None


def clean_lines(text: str) -> str:
    """``text`` with every line cleaned and the newlines between them kept."""
    if is_clean(text.replace("\n", "")):
        return text
    return "\n".join(clean(line) for line in text.split("\n"))


def clean_document(doc: Any) -> Any:
    """A copy of a JSON-like document (dicts, lists, scalars) with every string cleaned,
    mapping keys included; other scalars unchanged. The documents are drakit's own, built
    a few levels deep, so plain recursion is fine."""
    if isinstance(doc, str):
        return clean(doc)
    if isinstance(doc, Mapping):
        return {clean(k): clean_document(v) for k, v in doc.items()}
    if isinstance(doc, list | tuple):
        return [clean_document(v) for v in doc]
    return doc


def escape_json(text: str) -> str:
    """JSON text with every unsafe character written as a ``\\uXXXX`` escape (a surrogate
    pair beyond the BMP). Only valid for JSON text: outside strings JSON has no such
    characters, and inside a string the escape means the same character."""
    if is_clean(text):
        return text
    return _UNSAFE.sub(_json_escape, text)


def _json_escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
