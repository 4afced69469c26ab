"""Paths of the example driver's tests and the environment of its subprocesses.

A module of its own (not conftest): drakit's tests/conftest.py is also importable as
``conftest`` when both test folders run in one pytest session.
"""

from __future__ import annotations

import os
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[1]
ROOT = EXAMPLE.parents[1]
SRC = EXAMPLE / "src"
CHART = EXAMPLE / "deployments" / "helm" / "example-driver"


def subprocess_env() -> dict[str, str]:
    """The environment for a drakit subprocess that must import example_driver."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SRC), env.get("PYTHONPATH", "")) if p)
    return env
