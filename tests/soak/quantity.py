"""Kubernetes resource quantities ("40Gi", "500m", "1e3") as exact fractions.

The checker's own reading of the format (it shares no code with drakit's allocator): a
signed decimal number followed by at most one suffix, a binary one (Ki Mi Gi Ti Pi Ei), a
decimal one (n u m k M G T P E) or an exponent (e3, E-2). Anything else raises ValueError
naming the text, so a malformed slice is reported rather than silently read as zero.
"""

from __future__ import annotations

import re
from fractions import Fraction

_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_QUANTITY = re.compile(r"([+-]?)(\d+(?:\.\d*)?|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?")
#: Longer texts are not quantities the apiserver would have accepted.
MAX_LENGTH = 64


def parse_quantity(text: object) -> Fraction:
    """The exact value of ``text`` (a quantity string or an int); ValueError if malformed."""
    if isinstance(text, bool):
        raise ValueError(f"quantity {text!r} is a boolean, not a quantity")
    if isinstance(text, int):
        return Fraction(text)
    if not isinstance(text, str) or len(text) > MAX_LENGTH:
        raise ValueError(f"quantity {str(text)[:MAX_LENGTH]!r} is not a quantity string")
    match = _QUANTITY.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"quantity {text!r} is malformed")
    sign, number, suffix = match.group(1), match.group(2), match.group(3) or ""
    value = Fraction(number)
    if suffix in _BINARY:
        value *= 1024 ** _BINARY[suffix]
    elif suffix in _DECIMAL:
        value *= Fraction(10) ** _DECIMAL[suffix]
    else:  # an exponent
        exponent = int(suffix[1:])
        if abs(exponent) > 30:
            raise ValueError(f"quantity {text!r} has an exponent out of range")
        value *= Fraction(10) ** exponent
    return -value if sign == "-" else value
