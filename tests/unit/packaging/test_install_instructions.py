"""Every ``pip install`` a user is told to run names a distribution and extras that exist."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
DISTRIBUTIONS = {
    "drakit": ROOT / "pyproject.toml",
    "drakit-localcluster": ROOT / "distributions" / "drakit-localcluster" / "pyproject.toml",
}
# `pip install 'name[extra,...]'`, `pip install name` (quotes optional).
INSTALL = re.compile(r"pip install '?([A-Za-z][\w.-]*)(?:\[([\w,\s-]+)\])?'?")


def _extras(name: str) -> set[str]:
    project = tomllib.loads(DISTRIBUTIONS[name].read_text())["project"]
    return set(project.get("optional-dependencies", {}))


def _texts() -> dict[str, str]:
    texts = {str(p.relative_to(ROOT)): p.read_text() for p in (ROOT / "docs").glob("*.md")}
    for extra in ("README.md", "distributions/drakit-localcluster/README.md"):
        texts[extra] = (ROOT / extra).read_text()
    for source in (ROOT / "drakit").rglob("*.py"):
        texts[str(source.relative_to(ROOT))] = source.read_text()
    for source in (ROOT / "distributions/drakit-localcluster/src").rglob("*.py"):
        texts[str(source.relative_to(ROOT))] = source.read_text()
    for command in ("dev", "local-node", "local-cluster", "webhook"):
        texts[f"drakit {command} --help"] = subprocess.run(
            [sys.executable, "-m", "drakit", command, "--help"],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout
    return texts


def test_every_pip_install_names_an_existing_distribution_and_extra() -> None:
    wrong = []
    for where, text in _texts().items():
        for match in INSTALL.finditer(text):
            name, extras = match.group(1), match.group(2)
            if name not in DISTRIBUTIONS:
                continue  # another project's package (uv, build, ...)
            missing = {e.strip() for e in (extras or "").split(",") if e.strip()} - _extras(name)
            if missing:
                wrong.append(f"{where}: {match.group(0)!r}: no extra {sorted(missing)}")
    assert wrong == []


def test_the_test_kit_distribution_brings_pytest() -> None:
    project = tomllib.loads(DISTRIBUTIONS["drakit-localcluster"].read_text())["project"]
    assert any(dep.startswith("pytest") for dep in project["dependencies"])
