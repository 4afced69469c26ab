"""The hashed locks agree with pyproject.toml's ranges (hack/update-lock.sh regenerates them):
requirements/dev.txt (make venv) locks every extra, requirements/runtime.txt (the image) the
runtime dependencies alone, at the dev lock's versions, every entry with its hashes."""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[3]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
REGENERATE = "run hack/update-lock.sh"


def _locked(name: str) -> dict[str, tuple[str, int]]:
    """Name -> (version, number of hashes) of every entry of requirements/NAME."""
    entries: dict[str, tuple[str, int]] = {}
    current = ""
    for line in (ROOT / "requirements" / name).read_text().splitlines():
        text = line.strip()
        if "==" in text and not text.startswith(("#", "--")):
            package, version = text.split(" ")[0].split("==")
            current = canonicalize_name(package)
            entries[current] = (version, 0)
        elif text.startswith("--hash=sha256:") and current:
            version, count = entries[current]
            entries[current] = (version, count + 1)
    return entries


def _outside(requirements: list[str], locked: dict[str, tuple[str, int]]) -> list[str]:
    """The requirements (not drakit's own extras) that the lock lacks or pins outside range."""
    problems = []
    for requirement in map(Requirement, requirements):
        name = canonicalize_name(requirement.name)
        if name == "drakit":
            continue
        if name not in locked:
            problems.append(f"{name}: missing")
        elif not requirement.specifier.contains(locked[name][0]):
            problems.append(f"{name}: {locked[name][0]} outside {requirement.specifier}")
    return problems


def test_dev_lock_holds_every_dependency_and_extra_within_its_range() -> None:
    everything = PROJECT["dependencies"] + [
        r for extra in PROJECT["optional-dependencies"].values() for r in extra
    ]
    assert _outside(everything, _locked("dev.txt")) == [], REGENERATE


def test_runtime_lock_is_the_runtime_dependencies_at_the_dev_locks_versions() -> None:
    runtime, dev = _locked("runtime.txt"), _locked("dev.txt")
    assert _outside(PROJECT["dependencies"], runtime) == [], REGENERATE
    differing = {n: (v, dev.get(n, ("-", 0))[0]) for n, (v, _) in runtime.items()}
    assert {n: vs for n, vs in differing.items() if vs[0] != vs[1]} == {}, REGENERATE
    # Extras stay out of the image: kubernetes (and what only it pulls in) and the test tools;
    # the webhook extra is in (`drakit webhook` runs from the image), so cryptography is too.
    assert not {"kubernetes", "aiohttp", "pytest"} & set(runtime)
    assert "cryptography" in runtime


def test_every_locked_entry_carries_hashes() -> None:
    for name in ("runtime.txt", "dev.txt"):
        unhashed = sorted(n for n, (_v, hashes) in _locked(name).items() if hashes == 0)
        assert unhashed == [], f"{name}: {unhashed}"
