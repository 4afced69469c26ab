"""Terminal-safe text: every control character and escape sequence, of every kind, is made
harmless; printable text (non-ASCII letters included) is kept."""

from __future__ import annotations

import json
import sys
import unicodedata

import pytest

from drakit.telemetry.safetext import clean, clean_document, clean_lines, is_clean

# One of each kind a terminal acts on, as an attacker would send it.
HOSTILE = {
    "CSI colour": "\x1b[31mred\x1b[0m",
    "CSI erase line": "\x1b[2K\x1b[1A",
    "CSI without final byte": "\x1b[12;",
    "8-bit CSI": "\x9b2J",
    "OSC title (BEL)": "\x1b]0;owned\x07",
    "OSC 8 hyperlink (ST)": "\x1b]8;;https://evil.example\x1b\\click\x1b]8;;\x1b\\",
    "OSC 52 clipboard, unterminated": "\x1b]52;c;cm0gLXJmIH4=",
    "8-bit OSC": "\x9d0;t\x9c",
    "DCS": "\x1bPq#0;2;0;0;0\x1b\\",
    "APC": "\x1b_Gf=100\x1b\\",
    "ESC c (reset)": "\x1bc",
    "ESC ( 0 (charset)": "\x1b(0",
    "C0: NUL BEL BS": "a\x00b\x07c\x08d",
    "CR overwrite": "safe\rEVIL",
    "newline (fake row)": "x\nnode-z   fake   row",
    "tab, VT, FF": "a\tb\x0bc\x0cd",
    "DEL": "a\x7fb",
    "C1 NEL and others": "a\x85b\x8dc\x9fd",
    "bidi override": "abc\u202egnp.exe",
    "bidi isolates": "\u2066a\u2069\u2067b\u2068",
    "LRM RLM ALM": "\u200e\u200f\u061c",
    "zero width": "gpu\u200b-0\u2060\ufeff",
    "line and paragraph separators": "a\u2028b\u2029c",
    "tag characters": "x\U000e0041\U000e007f",
    "lone surrogate": "a\ud800b",
}
UNSAFE_CATEGORIES = ("Cc", "Cf", "Cs", "Zl", "Zp")


def _raw_controls(text: str) -> list[str]:
    return [hex(ord(c)) for c in text if c != "\n" and unicodedata.category(c) in UNSAFE_CATEGORIES]


@pytest.mark.parametrize("text", HOSTILE.values(), ids=HOSTILE.keys())
def test_clean_leaves_no_control_character_and_stays_on_one_line(text: str) -> None:
    out = clean(text)
    assert _raw_controls(out) == []
    assert "\n" not in out
    out.encode("utf-8")  # a lone surrogate would make printing raise


@pytest.mark.parametrize("text", HOSTILE.values(), ids=HOSTILE.keys())
def test_clean_lines_keeps_lines_apart_but_cleans_each(text: str) -> None:
    out = clean_lines(f"first\n{text}\nlast")
    assert _raw_controls(out) == []
    lines = out.split("\n")
    assert lines[0] == "first"
    assert lines[-1] == "last"  # an unterminated OSC ends at its line, never takes the next


def test_every_code_point_of_an_unsafe_unicode_category_is_unsafe() -> None:
    """The class, not a list of examples: all C0/C1/DEL (Cc), format characters (Cf: bidi
    controls, zero-width, tags), surrogates (Cs) and line/paragraph separators (Zl, Zp)
    known to this Python's Unicode database."""
    missed = [
        hex(cp)
        for cp in range(sys.maxunicode + 1)
        if unicodedata.category(chr(cp)) in UNSAFE_CATEGORIES and is_clean(chr(cp))
    ]
    assert missed == []


def test_a_sequence_becomes_one_mark_and_its_text_around_it_stays() -> None:
    assert clean("a\x1b[1;31mb") == "a?b"
    assert clean("x\x1b]0;title\x07y") == "x?y"
    assert clean("abc\u202edef") == "abc?def"
    assert clean("one\ttwo\nthree") == "one two three"


def test_printable_text_is_kept_as_is() -> None:
    for text in ("gpu-0", "team-a/claim.x", "café", "日本語", "memory 6Gi/16Gi", "a?b", ""):
        assert clean(text) == text
        assert is_clean(text)
    printable_ascii = "".join(chr(c) for c in range(0x20, 0x7F))
    assert clean(printable_ascii) == printable_ascii


def test_clean_takes_any_value() -> None:
    assert clean(None) == ""
    assert clean(42) == "42"


def test_clean_document_cleans_keys_and_values_at_any_depth() -> None:
    doc = {"a\x1b[2J": ["x\x07", {"k": "\u202ev", "n": 3, "b": True, "z": None}]}
    out = clean_document(doc)
    assert out == {"a?": ["x?", {"k": "?v", "n": 3, "b": True, "z": None}]}
    assert _raw_controls(json.dumps(out, ensure_ascii=False)) == []
