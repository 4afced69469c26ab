"""Paths of the example driver's tests and the environment of their subprocesses.

A module of its own (not conftest): another test folder's conftest may also be importable
as ``conftest`` when both run in one pytest session.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[1]
SRC = EXAMPLE / "src"
CHART = EXAMPLE / "deployments" / "helm" / "example-driver"


def subprocess_env() -> dict[str, str]:
    """The environment for a drakit subprocess that must import example_driver (from its
    source folder when it is not installed)."""
    env = dict(os.environ)
    installed = importlib.util.find_spec("example_driver")
    if installed is None or not installed.origin or SRC in Path(installed.origin).parents:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SRC), env.get("PYTHONPATH", "")) if p)
    return env
