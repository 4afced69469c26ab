"""Kubernetes resource quantities (``resource.Quantity``), exact.

A quantity is a signed decimal number with an optional suffix:

* binary SI: ``Ki Mi Gi Ti Pi Ei`` (powers of 1024),
* decimal SI: ``n u m "" k M G T P E`` (powers of 1000),
* decimal exponent: ``e<int>`` / ``E<int>`` (``1e3``).

Values are held as exact :class:`fractions.Fraction` so arithmetic and comparison never
round. Like Kubernetes, a value is rounded *up* to nano precision (1e-9) when parsed, and
the canonical text form keeps the suffix family of the input (binary input that cannot be
written exactly with a binary suffix falls back to decimal SI, as Kubernetes does).

``Quantity`` is immutable and hashable; ``==`` compares values (``1Ki == 1024``), which is
also the semantics of ``==`` on quantities in Kubernetes CEL. The original text is kept in
``text`` so objects round-trip unchanged.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from typing import Final

__all__ = ["Quantity", "QuantityError", "parse_quantity"]

BINARY_SI: Final = "BinarySI"
DECIMAL_SI: Final = "DecimalSI"
DECIMAL_EXPONENT: Final = "DecimalExponent"

_BINARY_SUFFIXES: Final = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_SUFFIXES: Final = {
    "n": -9,
    "u": -6,
    "m": -3,
    "": 0,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}
_DECIMAL_BY_EXP: Final = {v: k for k, v in _DECIMAL_SUFFIXES.items()}
_BINARY_BY_EXP: Final = {v: k for k, v in _BINARY_SUFFIXES.items()}

# sign, digits with optional fraction, then suffix (checked separately).
_NUMBER_RE: Final = re.compile(r"^([+-]?)(\d+\.?\d*|\.\d+)(.*)$")
_EXPONENT_RE: Final = re.compile(r"^[eE]([+-]?\d+)$")
_NANO: Final = Fraction(1, 10**9)


_PARSED: dict[str, Quantity] = {}


class QuantityError(ValueError):
    """The text is not a valid Kubernetes quantity."""


class Quantity:
    """An exact Kubernetes quantity. Immutable; ``==``/``<`` compare numeric values."""

    __slots__ = ("_format", "_nanos", "_text", "_value")

    def __init__(self, value: Fraction | int, fmt: str = DECIMAL_SI, text: str | None = None):
        self._value = Fraction(value)
        self._format = fmt
        self._text = text
        self._nanos: int | None = None

    # -- construction -------------------------------------------------------------------
    @classmethod
    def parse(cls, text: str | int | float) -> Quantity:
        """Parse ``text`` (str, or an int/float as YAML may give); raises QuantityError."""
        if isinstance(text, bool):
            raise QuantityError(f"quantity must be a string or number, not {text!r}")
        if isinstance(text, int):
            return cls(text, DECIMAL_SI, str(text))
        if isinstance(text, float):
            if not math.isfinite(text):
                raise QuantityError(f"quantity {text!r} is not finite")
            return cls(_ceil_nano(Fraction(repr(text))), DECIMAL_SI, repr(text))
        if not isinstance(text, str):
            raise QuantityError(f"quantity must be a string or number, not {type(text).__name__}")
        hit = _PARSED.get(text)
        if hit is not None:
            return hit  # quantities are immutable: equal texts share one object
        value, fmt = _parse_text(text)
        q = cls(value, fmt, text)
        if len(_PARSED) < 100_000:
            _PARSED[text] = q
        return q

    # -- accessors ----------------------------------------------------------------------
    @property
    def value(self) -> Fraction:
        """The exact numeric value."""
        return self._value

    @property
    def format(self) -> str:
        """``BinarySI``, ``DecimalSI`` or ``DecimalExponent`` (the input's family)."""
        return self._format

    @property
    def text(self) -> str:
        """The text this quantity was parsed from, or its canonical form."""
        return self._text if self._text is not None else self.canonical()

    def nanos(self) -> int:
        """The value in integer nano-units (exact: parsed quantities are nano-precise)."""
        n = self._nanos
        if n is None:
            v = self._value * 1_000_000_000
            n = v.numerator // v.denominator
            self._nanos = n
        return n

    def is_integer(self) -> bool:
        return self._value.denominator == 1

    def as_int_ceil(self) -> int:
        """The value rounded up to an integer (Kubernetes ``Value()``)."""
        return math.ceil(self._value)

    def milli_value(self) -> int:
        """The value in milli-units rounded up (Kubernetes ``MilliValue()``)."""
        return math.ceil(self._value * 1000)

    def sign(self) -> int:
        n = self._value.numerator  # a Fraction keeps the sign in the numerator
        return (n > 0) - (n < 0)

    def canonical(self) -> str:
        """The canonical Kubernetes text form (what the API server stores)."""
        return _format_value(self._value, self._format)

    # -- arithmetic ---------------------------------------------------------------------
    def __add__(self, other: Quantity) -> Quantity:
        return Quantity(self._value + other._value, self._format)

    def __sub__(self, other: Quantity) -> Quantity:
        return Quantity(self._value - other._value, self._format)

    def __neg__(self) -> Quantity:
        return Quantity(-self._value, self._format)

    # -- comparison ---------------------------------------------------------------------
    def __eq__(self, other: object) -> bool:
        if isinstance(other, Quantity):
            return self._value == other._value
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._value)

    def __lt__(self, other: Quantity) -> bool:
        return self._value < other._value

    def __le__(self, other: Quantity) -> bool:
        return self._value <= other._value

    def __gt__(self, other: Quantity) -> bool:
        return self._value > other._value

    def __ge__(self, other: Quantity) -> bool:
        return self._value >= other._value

    def __repr__(self) -> str:
        return f"Quantity({self.text!r})"

    def __str__(self) -> str:
        return self.text


def parse_quantity(text: str | int | float) -> Quantity:
    """Parse a Kubernetes quantity; raises QuantityError naming the bad text."""
    return Quantity.parse(text)


def _parse_text(text: str) -> tuple[Fraction, str]:
    stripped = text.strip()
    if stripped != text or not text:
        raise QuantityError(f"quantity {text!r} is empty or has surrounding whitespace")
    m = _NUMBER_RE.match(text)
    if m is None:
        raise QuantityError(f"quantity {text!r} does not start with a number")
    sign, digits, suffix = m.groups()
    number = Fraction(digits)
    if suffix in _BINARY_SUFFIXES:
        value, fmt = number * (1 << _BINARY_SUFFIXES[suffix]), BINARY_SI
    elif suffix in _DECIMAL_SUFFIXES:
        value, fmt = number * Fraction(10) ** _DECIMAL_SUFFIXES[suffix], DECIMAL_SI
    else:
        em = _EXPONENT_RE.match(suffix)
        if em is None:
            raise QuantityError(f"quantity {text!r} has an unknown suffix {suffix!r}")
        exponent = int(em.group(1))
        if abs(exponent) > 1000:
            raise QuantityError(f"quantity {text!r} has an exponent out of range")
        value, fmt = number * Fraction(10) ** exponent, DECIMAL_EXPONENT
    if sign == "-":
        value = -value
    return _ceil_nano(value), fmt


def _ceil_nano(value: Fraction) -> Fraction:
    """Round up to nano precision, as Kubernetes does when it parses (toward +inf)."""
    if (value / _NANO).denominator == 1:
        return value
    return Fraction(math.ceil(value / _NANO)) * _NANO


def _format_value(value: Fraction, fmt: str) -> str:
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    magnitude = -value if value < 0 else value
    if fmt == BINARY_SI and magnitude.denominator == 1:
        n = int(magnitude)
        if n >= 1024:
            exp = 0
            while exp < 60 and n % (1 << (exp + 10)) == 0:
                exp += 10
            if exp:
                return f"{sign}{n >> exp}{_BINARY_BY_EXP[exp]}"
        # small or not a multiple of 1024: Kubernetes writes it as decimal SI
    mantissa, exp10 = _decimal_mantissa(magnitude)
    if fmt == DECIMAL_EXPONENT:
        return f"{sign}{mantissa}" + (f"e{exp10}" if exp10 else "")
    # decimal SI: exponent must be one of the SI steps (multiples of 3, -9 .. 18)
    while exp10 > 18:
        mantissa *= 10
        exp10 -= 1
    return f"{sign}{mantissa}{_DECIMAL_BY_EXP[exp10]}"


def _decimal_mantissa(magnitude: Fraction) -> tuple[int, int]:
    """Write a nano-precise value as mantissa * 10**exp with exp a multiple of 3 (>= -9)."""
    nanos = int(magnitude / _NANO)
    exp10 = -9
    while nanos % 1000 == 0 and exp10 < 18:
        nanos //= 1000
        exp10 += 3
    return nanos, exp10


#: Nano-units per unit: counters and capacities are summed as integers of this scale.
NANO: Final = 10**9


def nanos(q: Quantity) -> int:
    """A quantity in integer nano-units (exact: quantities are nano-precise)."""
    return q.nanos()
