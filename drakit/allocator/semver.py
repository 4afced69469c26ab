"""Strict semantic versions (semver.org 2.0.0), as Kubernetes validates version attributes."""

from __future__ import annotations

import re
from typing import Final

__all__ = ["is_semver"]

_SEMVER: Final = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$"
)


def is_semver(value: str) -> bool:
    """True for a strict semver 2.0.0 version (no leading ``v``, no missing parts)."""
    return _SEMVER.match(value) is not None
