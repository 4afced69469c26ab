"""deploy/Dockerfile refers to files that exist and ships every drakit package.

These fast checks catch the usual breakage (a new top-level package missing
from the image, a COPY of a moved file, a build context that .dockerignore
empties) without building; the real-node tier (tests/node, root) builds the
image with buildah and runs it under a real kubelet.
"""

from __future__ import annotations

import fnmatch
import tomllib

import pytest
from deploy_support import ROOT

pytestmark = pytest.mark.integration

DOCKERFILE = ROOT / "deploy" / "Dockerfile"


def _instructions() -> list[list[str]]:
    """Instructions as word lists, continuation lines joined, comments dropped."""
    joined = DOCKERFILE.read_text().replace("\\\n", " ")
    lines = [line.strip() for line in joined.splitlines()]
    return [line.split() for line in lines if line and not line.startswith("#")]


def _context_copies() -> list[str]:
    """Sources of every COPY from the build context (not from another stage)."""
    sources: list[str] = []
    for words in _instructions():
        if words[0] == "COPY" and not any(w.startswith("--from=") for w in words):
            sources += [w for w in words[1:-1] if not w.startswith("--")]
    return sources


def _ignored(path: str) -> bool:
    """Whether .dockerignore (last matching rule wins) keeps ``path`` out of the context."""
    ignored = False
    for raw in (ROOT / ".dockerignore").read_text().splitlines():
        rule = raw.strip()
        if not rule or rule.startswith("#"):
            continue
        negate = rule.startswith("!")
        pattern = rule.lstrip("!").rstrip("/")
        if fnmatch.fnmatch(path, pattern):
            ignored = not negate
    return ignored


def test_every_copied_file_exists_and_is_in_the_build_context() -> None:
    sources = _context_copies()
    assert sources, "no COPY from the build context found"
    missing = [s for s in sources if not (ROOT / s).exists()]
    assert missing == []
    assert [s for s in sources if _ignored(s)] == []


def test_image_ships_every_package_the_wheel_declares() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    declared = {
        p.rstrip("*") for p in pyproject["tool"]["setuptools"]["packages"]["find"]["include"]
    }
    assert declared <= set(_context_copies())


def test_build_is_multi_stage_and_runtime_is_non_root() -> None:
    instructions = _instructions()
    stages = [words for words in instructions if words[0] == "FROM"]
    assert len(stages) == 2
    runtime = instructions[instructions.index(stages[-1]) :]
    users = [words[1] for words in runtime if words[0] == "USER"]
    assert users and not users[-1].startswith(("0", "root"))
    assert ["ENTRYPOINT", '["drakit"]'] in runtime
