"""Builds drakit's documentation site once per test session, as `make docs` does.

``build_site()`` runs ``mkdocs build --strict`` (mkdocs.yml: every internal link and anchor
checked, a missing snippet or API object fails) into build/site and returns its output, so
the tests can check the built pages and what the build said. Without the docs extra
(mkdocs) the tests that need the site skip, saying so.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
SITE = ROOT / "build" / "site"
#: The three pages whose screenshots `make docs` keeps.
SCREENSHOT_PAGES = ("index.html", "benchmarks.html", "reference/plugin.html")
SCREENSHOTS = ROOT / "build" / "docs-screenshots"


@dataclass(frozen=True)
class Built:
    """The built site and what mkdocs printed."""

    site: Path
    returncode: int
    output: str


@functools.cache
def _build() -> Built:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # Material's notice about MkDocs 2.0
    run = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--clean", "-f",
         str(ROOT / "mkdocs.yml"), "-d", str(SITE)],
        cwd=ROOT, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    return Built(SITE, run.returncode, run.stdout + run.stderr)


def build_site() -> Built:
    """The site, built once per session; skips without mkdocs, fails when the build fails."""
    pytest.importorskip(
        "mkdocs", reason="the docs extra is not installed (pip install drakit[docs])"
    )
    built = _build()
    assert built.returncode == 0, f"mkdocs build --strict failed:\n{built.output}"
    return built


def nav_pages() -> list[str]:
    """Every page of mkdocs.yml's nav, as the .html path the site serves."""

    class _Loader(yaml.SafeLoader):
        pass

    # mkdocs.yml may use !ENV / !!python tags; the nav needs none of them.
    _Loader.add_multi_constructor("", lambda loader, suffix, node: None)
    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=_Loader)

    def walk(entries: list[object]) -> list[str]:
        pages: list[str] = []
        for entry in entries:
            value = next(iter(entry.values())) if isinstance(entry, dict) else entry
            if isinstance(value, list):
                pages += walk(value)
            elif isinstance(value, str):
                pages.append(value.removesuffix(".md") + ".html")
        return pages

    return walk(config["nav"])
