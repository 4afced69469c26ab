"""The test folders hold no two test modules of one name: pytest imports them by basename
(the folders have no __init__.py), and a second one fails the whole collection."""

from __future__ import annotations

import tomllib
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_no_two_test_modules_share_a_name() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    paths = config["tool"]["pytest"]["ini_options"]["testpaths"]
    seen: dict[str, list[str]] = defaultdict(list)
    for folder in paths:
        for module in (ROOT / folder).rglob("*.py"):
            if module.name == "conftest.py" or "__pycache__" in module.parts:
                continue  # pytest keeps conftests apart by folder
            if not (module.parent / "__init__.py").exists():
                seen[module.name].append(str(module.relative_to(ROOT)))
    clashes = {name: where for name, where in seen.items() if len(where) > 1}
    assert clashes == {}
