"""Regular expressions for CEL with RE2 semantics: linear time, RE2 syntax, Go's errors.

Kubernetes evaluates ``matches``, ``find`` and ``findAll`` with Go's ``regexp`` package (RE2
syntax, linear-time automata). Python's ``re`` backtracks, so a selector such as
``"aaaa…b".find("^(a+)+$")`` would take exponential time; this module uses Google's RE2
(``google-re2``) instead, so matching is linear in the subject for every pattern.

* :func:`compile_pattern` compiles (cached) or raises :class:`RegexError` whose message is the
  one Go's ``regexp.Compile`` gives ("error parsing regexp: missing closing ): `(a`").
* :func:`find_all` returns successive non-overlapping matches with Go's rule for empty
  matches (an empty match right after the previous match is not reported).
"""

from __future__ import annotations

import functools
from typing import Final

import re2

__all__ = ["RegexError", "compile_pattern", "compile_text", "find", "find_all", "matches"]

# Patterns are user input: bound their length and RE2's automaton memory.
MAX_PATTERN_LENGTH: Final = 10 * 1024
_MAX_MEM: Final = 8 << 20

# RE2's error text -> Go regexp's error code (both name the same offending fragment).
_GO_CODES: Final = (
    ("missing ): ", "missing closing )"),
    ("missing ]: ", "missing closing ]"),
    ("unexpected ): ", "unexpected )"),
    ("bad repetition operator: ", "invalid nested repetition operator"),
    ("missing argument to repetition operator: ", "missing argument to repetition operator"),
    ("invalid repetition size: ", "invalid repeat count"),
    ("invalid escape sequence: ", "invalid escape sequence"),
    ("invalid character class range: ", "invalid character class range"),
    ("invalid character class: ", "invalid character class"),
    ("invalid perl operator: ", "invalid or unsupported Perl syntax"),
    ("invalid named capture group: ", "invalid named capture"),
    ("trailing \\", "trailing backslash at end of expression"),
    ("invalid UTF-8", "invalid UTF-8"),
)


class RegexError(ValueError):
    """The pattern is not valid RE2 syntax; the message follows Go's ``regexp`` wording."""


def _options() -> re2.Options:
    options = re2.Options()
    options.log_errors = False  # the error is raised to the caller; no stderr noise
    options.max_mem = _MAX_MEM
    return options


_OPTIONS: Final = _options()


def _go_message(re2_message: str) -> str:
    for prefix, code in _GO_CODES:
        if re2_message.startswith(prefix):
            fragment = re2_message[len(prefix) :] if prefix.endswith(": ") else ""
            return f"error parsing regexp: {code}: `{fragment}`"
    return f"error parsing regexp: {re2_message}"


@functools.lru_cache(maxsize=1024)
def compile_pattern(pattern: str) -> re2._Regexp:
    """The compiled RE2 program for ``pattern`` (it matches UTF-8 ``bytes``); raises
    :class:`RegexError`. Subjects are encoded once per call, as the wrapper would re-encode a
    ``str`` on every search."""
    if len(pattern) > MAX_PATTERN_LENGTH:
        raise RegexError(
            f"error parsing regexp: expression too large: longer than {MAX_PATTERN_LENGTH} bytes"
        )
    try:
        return re2.compile(pattern.encode("utf-8", "surrogatepass"), _OPTIONS)
    except re2.error as exc:
        detail = exc.args[0] if exc.args else str(exc)
        text = detail.decode("utf-8", "replace") if isinstance(detail, bytes) else str(detail)
        raise RegexError(_go_message(text)) from None


def compile_text(pattern: str) -> re2._Regexp:
    """A fixed pattern of drakit's own (format validators), matched against ``str``."""
    return re2.compile(pattern, _OPTIONS)


def matches(subject: str, pattern: str) -> bool:
    """Whether ``pattern`` matches anywhere in ``subject`` (CEL ``matches``)."""
    return compile_pattern(pattern).search(_utf8(subject)) is not None


def find(subject: str, pattern: str) -> str:
    """The leftmost match, or "" (Kubernetes ``find``)."""
    m = compile_pattern(pattern).search(_utf8(subject))
    return _text(m.group(0)) if m is not None else ""


def _utf8(s: str) -> bytes:
    return s.encode("utf-8", "surrogatepass")


def _text(b: bytes) -> str:
    return b.decode("utf-8", "surrogatepass")


def _next_char(data: bytes, pos: int) -> int:
    """Offset of the character after the one starting at ``pos`` (UTF-8)."""
    pos += 1
    while pos < len(data) and data[pos] & 0xC0 == 0x80:
        pos += 1
    return pos


def find_all(subject: str, pattern: str, limit: int = -1) -> list[str]:
    """Up to ``limit`` (all if negative) matches, as Go's ``FindAllString``."""
    program = compile_pattern(pattern)
    data = _utf8(subject)
    found: list[str] = []
    pos, prev_end, end = 0, -1, len(data)
    while pos <= end and (limit < 0 or len(found) < limit):
        m = program.search(data, pos)
        if m is None:
            break
        start, stop = m.span()
        accept = not (start == stop == prev_end)
        # an empty match advances by one character; a non-empty one to its end
        pos = _next_char(data, stop) if stop == start else stop
        prev_end = stop
        if accept:
            found.append(_text(data[start:stop]))
    return found
