"""CEL's ``<string>.format(<list>)`` as Kubernetes 1.37 has it (cel-go ext strings v2).

Kubernetes 1.37 uses the strings extension at version 2, whose formatter is cel-go's first
one (``ext/formatting.go``) with the ``en_US`` locale and no precision limit. Each clause
accepts only some CEL types, and a value of another type is an error, never a conversion:

=========  ===============================================================================
``%s``     string, bool, int, uint, double, bytes (valid UTF-8), null, type, timestamp,
           duration, and lists and maps of those (elements written as CEL literals)
``%d``     int, uint
``%f``     double, or one of the strings "NaN", "Infinity", "-Infinity" (en_US digits
           grouping: ``1,234.500000``; infinity is ``∞``)
``%e``     the same as ``%f`` (``1.234568`` U+00D7 ``10`` and a superscript ``⁰³``;
           the precision is a width)
``%b``     int, uint, bool
``%x %X``  int, uint, string, bytes
``%o``     int, uint
=========  ===============================================================================

The clause rules are applied twice, as in Kubernetes: at compile time to a constant format
string with a list literal (:func:`check_literal_call`, a compile error naming the element)
and at run time to the values (:func:`format_values`, a runtime error that fails the
allocation). Known gap: the engine gives drakit no way to tell a ``type`` value from a
string or a ``uint`` from an ``int``, so those are formatted as a string and an int.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Final

__all__ = ["FormatError", "StaticArg", "check_literal_call", "format_values", "go_float_text"]

DEFAULT_PRECISION: Final = 6
#: Not a cel-go limit: a bound on one clause's output so that ``%.999999999f`` cannot
#: exhaust memory (Kubernetes' own cost limit stops such a selector too).
MAX_PRECISION: Final = 100_000
_INT64_MAX: Final = 2**63 - 1

# cel-go's type names for the Kubernetes object types drakit carries as one-key maps.
_OBJECT_TYPE_NAMES: Final = {
    "__k8s_quantity__": "kubernetes.Quantity",
    "__k8s_semver__": "kubernetes.Semver",
    "__k8s_ip__": "net.IP",
    "__k8s_cidr__": "net.CIDR",
    "__k8s_url__": "kubernetes.URL",
    "__k8s_format__": "kubernetes.NamedFormat",
}
_FLOAT_STRINGS: Final = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
_SUPERSCRIPT: Final = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")


class FormatError(ValueError):
    """A format string or argument Kubernetes refuses; the message is cel-go's.

    ``expr_id`` (static checks only) is the list element the error is about, if any."""

    def __init__(self, message: str, expr_id: int | None = None) -> None:
        super().__init__(message)
        self.expr_id = expr_id


# --------------------------------------------------------------------------- parsing


Render = Callable[[str, int | None, int], str]


def _interpolate(fmt: str, count: int, render: Render) -> tuple[str, int]:
    """cel-go's ``parseFormatString``: the text with each clause replaced by ``render(verb,
    precision, argument index)``, and how many arguments the clauses used. Errors come in
    cel-go's order (a missing argument before a bad clause)."""
    out: list[str] = []
    i = used = 0
    while i < len(fmt):
        if fmt[i] != "%":
            out.append(fmt[i])
            i += 1
            continue
        if i + 1 < len(fmt) and fmt[i + 1] == "%":
            out.append("%")
            i += 2
            continue
        if used >= count:
            raise FormatError(f"index {used} out of range")
        if i + 1 >= len(fmt):
            raise FormatError("unexpected end of string")
        end, verb, precision = _clause(fmt, i + 1)
        try:
            out.append(render(verb, precision, used))
        except FormatError as exc:
            raise FormatError(f"error during formatting: {exc}", exc.expr_id) from None
        i, used = end, used + 1
    return "".join(out), used


def _clause(fmt: str, start: int) -> tuple[int, str, int | None]:
    """(end, verb, precision) of the clause whose text starts at ``start`` (after ``%``)."""
    i, precision = start, None
    if fmt[i] == ".":
        i += 1
        digits_start = i
        while i < len(fmt) and "0" <= fmt[i] <= "9":
            i += 1
        if i >= len(fmt):
            raise _clause_error("error while parsing precision: could not find end of "
                                "precision specifier")  # fmt: skip
        digits = fmt[digits_start:i]
        if not digits or int(digits) > _INT64_MAX:
            why = "invalid syntax" if not digits else "value out of range"
            raise _clause_error(
                "error while parsing precision: error while converting precision to integer: "
                f'strconv.Atoi: parsing "{digits}": {why}'
            )
        precision = int(digits)
    verb = fmt[i]
    if verb not in "sdfebxXo":
        # cel-go reads one byte as the clause: a non-ASCII letter shows as its first byte
        shown = chr(verb.encode("utf-8", "surrogatepass")[0])
        raise _clause_error(f'unrecognized formatting clause "{shown}"')
    return i + 1, verb, precision


def _clause_error(message: str) -> FormatError:
    return FormatError(f"could not parse formatting clause: {message}")


# --------------------------------------------------------------------------- run time


def format_values(fmt: str, args: Sequence[Any]) -> str:
    """``fmt.format(args)``; raises :class:`FormatError` with cel-go's message."""

    def render(verb: str, precision: int | None, index: int) -> str:
        return _RENDERERS[verb](args[index], precision, verb)

    return _interpolate(fmt, len(args), render)[0]


def _type_name(v: Any) -> str:
    """cel-go's ``TypeName()`` of the CEL value ``v`` (bool before int: a bool is an int)."""
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, dict):
        key = next(iter(v), None) if len(v) == 1 else None
        return _OBJECT_TYPE_NAMES.get(key, "map") if isinstance(key, str) else "map"
    for kind, name in _TYPE_NAMES:
        if isinstance(v, kind):
            return name
    return "optional_type" if type(v).__name__ == "OptionalValue" else type(v).__name__


_TYPE_NAMES: Final = (
    (int, "int"),
    (float, "double"),
    (str, "string"),
    (bytes, "bytes"),
    (type(None), "null_type"),
    (list, "list"),
    (datetime.datetime, "google.protobuf.Timestamp"),
    (datetime.timedelta, "google.protobuf.Duration"),
)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_map(v: Any) -> bool:
    return isinstance(v, dict) and _type_name(v) == "map"


def _string_clause(v: Any, _precision: int | None = None, _verb: str = "s") -> str:
    """cel-go's ``FormatString``."""
    if isinstance(v, list):
        return _list_text(v)
    if _is_map(v):
        return _map_text(v)
    if isinstance(v, bool):
        return "true" if v else "false"
    if _is_int(v) or isinstance(v, str):
        return str(v)
    if isinstance(v, float):
        return go_float_text(v)
    if isinstance(v, bytes):
        return _utf8(v)
    if v is None:
        return "null"
    if isinstance(v, datetime.datetime):
        return _timestamp_text(v)
    if isinstance(v, datetime.timedelta):
        return _duration_text(v)
    raise FormatError(
        "string clause can only be used on strings, bools, bytes, ints, doubles, maps, lists, "
        f"types, durations, and timestamps, was given {_type_name(v)}"
    )


def _utf8(v: bytes) -> str:
    try:
        return v.decode("utf-8")
    except UnicodeDecodeError:
        raise FormatError(
            'could not convert argument "invalid UTF-8 in bytes, cannot convert to string" '
            "to string"
        ) from None


def _element_text(v: Any) -> str:
    """A list element, map key or map value: cel-go's ``clauseForType`` then ``quoteForCEL``
    (strings and bytes quoted, doubles with six decimals)."""
    if isinstance(v, bool) or _is_int(v) or v is None or isinstance(v, (list, dict)):
        if isinstance(v, dict) and not _is_map(v):
            raise FormatError(f"no formatting function for {_type_name(v)}")
        return _string_clause(v)
    if isinstance(v, str):
        return go_quote(v)
    if isinstance(v, bytes):
        return "b" + go_quote(_utf8(v))
    if isinstance(v, float):
        if math.isinf(v) or math.isnan(v):
            return go_quote(go_float_text(v))
        return f"{v:.{DEFAULT_PRECISION}f}"
    if isinstance(v, datetime.datetime):
        return f'timestamp("{_timestamp_text(v)}")'
    if isinstance(v, datetime.timedelta):
        return f'duration("{_duration_text(v)}")'
    raise FormatError(f"no formatting function for {_type_name(v)}")


def _list_text(items: list[Any]) -> str:
    return "[" + ", ".join(_element_text(x) for x in items) + "]"


def _map_text(m: Mapping[Any, Any]) -> str:
    pairs = []
    for key, value in m.items():
        if isinstance(key, bool) or _is_int(key) or isinstance(key, str):
            key_text = _element_text(key)
        else:
            raise FormatError(f"no formatting function for map key of type {_type_name(key)}")
        pairs.append((key_text, _element_text(value)))
    pairs.sort(key=lambda kv: kv[0])
    return "{" + ", ".join(f"{k}:{v}" for k, v in pairs) + "}"


def _decimal_clause(v: Any, _precision: int | None, _verb: str) -> str:
    if _is_int(v):
        return str(v)
    raise FormatError(f"decimal clause can only be used on integers, was given {_type_name(v)}")


def _as_double(v: Any, clause: str) -> float:
    if isinstance(v, float):
        return v
    if isinstance(v, str) and v in _FLOAT_STRINGS:
        return _FLOAT_STRINGS[v]
    raise FormatError(f"{clause} clause can only be used on doubles, was given {_type_name(v)}")


def _bounded(precision: int | None) -> int:
    if precision is None:
        return DEFAULT_PRECISION
    if precision > MAX_PRECISION:
        raise FormatError(f"precision {precision} exceeds the maximum {MAX_PRECISION}")
    return precision


def _fixed_clause(v: Any, precision: int | None, _verb: str) -> str:
    """en_US fixed point: digits grouped by three, no sign on zero, ``∞`` for infinity."""
    x = _as_double(v, "fixed-point")
    digits = _bounded(precision)
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "∞" if x > 0 else "-∞"
    return f"{x + 0.0 if x == 0 else x:,.{digits}f}"


def _scientific_clause(v: Any, precision: int | None, _verb: str) -> str:
    """en_US scientific: ``1.234568``, U+00D7, ``10``, superscript ``⁰³``; six decimals
    always: cel-go passes the clause's precision as the *width* (right-aligned)."""
    x = _as_double(v, "scientific")
    width = _bounded(precision)
    if math.isnan(x):
        text = "NaN"
    elif math.isinf(x):
        text = "∞" if x > 0 else "-∞"
    else:
        mantissa, exponent = f"{x + 0.0 if x == 0 else x:.{DEFAULT_PRECISION}e}".split("e")
        power = int(exponent)
        sign = "-" if power < 0 else ""
        text = f"{mantissa}\u00d710{(sign + format(abs(power), '02d')).translate(_SUPERSCRIPT)}"
    return text.rjust(width)


def _binary_clause(v: Any, _precision: int | None, _verb: str) -> str:
    if isinstance(v, bool):
        return "1" if v else "0"
    if _is_int(v):
        return format(v, "b")
    raise FormatError(
        f"only integers and bools can be formatted as binary, was given {_type_name(v)}"
    )


def _hex_clause(v: Any, _precision: int | None, verb: str) -> str:
    if _is_int(v):
        return format(v, verb)
    if isinstance(v, (str, bytes)):
        raw = v.encode("utf-8", "surrogatepass") if isinstance(v, str) else v
        return raw.hex() if verb == "x" else raw.hex().upper()
    raise FormatError(
        "only integers, byte buffers, and strings can be formatted as hex, "
        f"was given {_type_name(v)}"
    )


def _octal_clause(v: Any, _precision: int | None, _verb: str) -> str:
    if _is_int(v):
        return format(v, "o")
    raise FormatError(f"octal clause can only be used on integers, was given {_type_name(v)}")


_RENDERERS: Final[Mapping[str, Callable[[Any, int | None, str], str]]] = {
    "s": _string_clause,
    "d": _decimal_clause,
    "f": _fixed_clause,
    "e": _scientific_clause,
    "b": _binary_clause,
    "x": _hex_clause,
    "X": _hex_clause,
    "o": _octal_clause,
}


# --------------------------------------------------------------------------- Go texts


def go_float_text(x: float) -> str:
    """Go's ``strconv.FormatFloat(x, 'g', -1, 64)``: CEL's ``string(double)``."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "+Inf" if x > 0 else "-Inf"
    sign = "-" if math.copysign(1.0, x) < 0 else ""
    if x == 0:
        return sign + "0"
    digits, point = _shortest_digits(abs(x))
    exponent = point - 1
    if exponent < -4 or exponent >= 6:  # shortest digits: Go decides with precision 6
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{sign}{mantissa}e{'-' if exponent < 0 else '+'}{abs(exponent):02d}"
    return sign + _fixed_digits(digits, point)


def _shortest_digits(x: float) -> tuple[str, int]:
    """The shortest decimal digits that read back as ``x`` (> 0), and the position of the
    decimal point relative to them (Python's ``repr`` and Go pick the same digits)."""
    _, digit_tuple, exponent = Decimal(repr(x)).normalize().as_tuple()
    digits = "".join(map(str, digit_tuple))
    assert isinstance(exponent, int)
    return digits, len(digits) + exponent


def _fixed_digits(digits: str, point: int) -> str:
    if point <= 0:
        return "0." + "0" * -point + digits
    if point >= len(digits):
        return digits + "0" * (point - len(digits))
    return digits[:point] + "." + digits[point:]


def _seconds_text(seconds: float) -> str:
    """Go's ``strconv.FormatFloat(seconds, 'f', -1, 64)``."""
    if seconds == 0:
        return "0"
    digits, point = _shortest_digits(abs(seconds))
    return ("-" if seconds < 0 else "") + _fixed_digits(digits, point)


def _duration_text(d: datetime.timedelta) -> str:
    return _seconds_text(d.total_seconds()) + "s"


def _timestamp_text(t: datetime.datetime) -> str:
    """RFC 3339 with the fraction's trailing zeros dropped (Go's ``time.RFC3339Nano``)."""
    text = t.strftime("%Y-%m-%dT%H:%M:%S")
    if t.microsecond:
        text += f".{t.microsecond:06d}".rstrip("0")
    offset = t.utcoffset()
    if offset is None or not offset:
        return text + "Z"
    minutes = int(offset.total_seconds()) // 60
    sign = "-" if minutes < 0 else "+"
    return f"{text}{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


def go_quote(s: str) -> str:
    """Go's ``strconv.Quote``: printable characters kept, others escaped."""
    out = ['"']
    for ch in s:
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ch.isprintable() and ch != "\x7f":
            out.append(ch)
        else:
            out.append(_escaped(ord(ch)))
    out.append('"')
    return "".join(out)


_SHORT_ESCAPES: Final = {7: "\\a", 8: "\\b", 12: "\\f", 10: "\\n", 13: "\\r", 9: "\\t", 11: "\\v"}


def _escaped(code: int) -> str:
    if code in _SHORT_ESCAPES:
        return _SHORT_ESCAPES[code]
    if code < 0x20 or code == 0x7F:
        return f"\\x{code:02x}"
    if 0xD800 <= code <= 0xDFFF:
        code = 0xFFFD
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


# --------------------------------------------------------------------------- compile time


@dataclass(frozen=True)
class StaticArg:
    """A list-literal element of a format call, as the type checker sees it.

    ``kind``: "dyn", a primitive ("int", "uint", "double", "bool", "string", "bytes"),
    "null", "list", "map", "timestamp", "duration", "type", or "other"; ``name``: cel-go's
    type name for messages; ``parts``: for a list or map *literal*, its elements (a map's
    keys and values in order), checked as ``%s`` checks them."""

    expr_id: int
    kind: str
    name: str
    parts: tuple[StaticArg, ...] = field(default=())


_STATIC_KINDS: Final[Mapping[str, frozenset[str]]] = {
    "d": frozenset({"int", "uint"}),
    "f": frozenset({"double", "string"}),
    "e": frozenset({"double", "string"}),
    "b": frozenset({"int", "uint", "bool"}),
    "x": frozenset({"int", "uint", "string", "bytes"}),
    "X": frozenset({"int", "uint", "string", "bytes"}),
    "o": frozenset({"int", "uint"}),
}
_STRING_KINDS: Final = frozenset(
    {"list", "map", "int", "uint", "double", "bool", "string", "timestamp", "bytes",
     "duration", "type", "null"}
)  # fmt: skip
_STATIC_MESSAGES: Final = {
    "d": "decimal clause can only be used on integers",
    "f": "fixed-point clause can only be used on doubles",
    "e": "scientific clause can only be used on doubles",
    "b": "only integers and bools can be formatted as binary",
    "x": "only integers, byte buffers, and strings can be formatted as hex",
    "X": "only integers, byte buffers, and strings can be formatted as hex",
    "o": "octal clause can only be used on integers",
}


def check_literal_call(fmt: str, args: Sequence[StaticArg]) -> FormatError | None:
    """cel-go's ``stringFormatValidator`` for ``"<fmt>".format([<args>])``: the compile
    error (its ``expr_id`` the element at fault, or None for the call), or None."""

    def render(verb: str, _precision: int | None, index: int) -> str:
        arg = args[index]
        if verb == "s":
            bad = _string_violation(arg)
            if bad is not None:
                raise FormatError(
                    "string clause can only be used on strings, bools, bytes, ints, doubles, "
                    f"maps, lists, types, durations, and timestamps, was given {bad.name}",
                    bad.expr_id,
                )
        elif arg.kind != "dyn" and arg.kind not in _STATIC_KINDS[verb]:
            raise FormatError(f"{_STATIC_MESSAGES[verb]}, was given {arg.name}", arg.expr_id)
        return ""

    try:
        used = _interpolate(fmt, len(args), render)[1]
    except FormatError as exc:
        return exc
    if len(args) > used:
        return FormatError(
            f"too many arguments supplied to string.format (expected {used}, got {len(args)})"
        )
    return None


def _string_violation(arg: StaticArg) -> StaticArg | None:
    if arg.kind != "dyn" and arg.kind not in _STRING_KINDS:
        return arg
    for part in arg.parts:
        bad = _string_violation(part)
        if bad is not None:
            return bad
    return None
