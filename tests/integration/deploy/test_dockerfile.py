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
from packaging.requirements import Requirement

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


LOCK = ROOT / "requirements" / "runtime.txt"


def _locked() -> dict[str, tuple[str, int]]:
    """Name -> (version, number of hashes) of every requirement in the runtime lock."""
    entries: dict[str, tuple[str, int]] = {}
    current = ""
    for line in LOCK.read_text().splitlines():
        text = line.strip()
        if "==" in text and not text.startswith(("#", "--")):
            name, version = text.split(" ")[0].split("==")
            current = name.lower()
            entries[current] = (version, 0)
        elif text.startswith("--hash=sha256:") and current:
            version, count = entries[current]
            entries[current] = (version, count + 1)
    return entries


def test_image_installs_its_dependencies_from_the_hashed_lock_only() -> None:
    """Every pip install in the image checks hashes, takes binary wheels only, or installs
    drakit's own wheel without resolving more (so nothing unhashed slips in)."""
    installs = [w for w in _instructions() if "install" in w]
    assert installs, "no pip install in the Dockerfile"
    words = " ".join(" ".join(w) for w in installs).split("&&")
    pip_installs = [step.split() for step in words if " install " in f" {step} "]
    assert len(pip_installs) == 2
    locked, own = pip_installs
    assert {"--require-hashes", "--only-binary=:all:", "--no-deps"} <= set(locked)
    assert "requirements/runtime.txt" in locked
    assert "--no-deps" in own and any(w.startswith("/wheels/drakit-") for w in own)


def test_runtime_lock_pins_what_pyproject_pins_and_hashes_every_entry() -> None:
    """The lock is regenerated (hack/update-lock.sh) whenever a dependency changes."""
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    locked = _locked()
    for requirement in map(Requirement, dependencies):
        name = requirement.name.lower()
        assert name in locked, f"{name} is missing from {LOCK.name}"
        assert requirement.specifier.contains(locked[name][0]), (
            f"{name}: the lock's {locked[name][0]} is outside pyproject's {requirement.specifier}"
        )
    unhashed = sorted(name for name, (_v, hashes) in locked.items() if hashes == 0)
    assert unhashed == []
