"""The reference harness's helpers (hack/reference/*.py) are scripts, not a package:
their folder goes on sys.path for these tests."""

from __future__ import annotations

import sys
from pathlib import Path

HACK_REFERENCE = Path(__file__).resolve().parents[2] / "hack" / "reference"
sys.path.insert(0, str(HACK_REFERENCE))
