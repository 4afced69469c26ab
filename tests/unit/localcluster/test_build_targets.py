"""Each make target builds the Kubernetes binaries its own run starts, and no others.

A cold Go build of one control-plane binary takes minutes on a small machine: `make demo`
must not build what only a test needs (another minor's control plane, a controller-manager
the demo never starts), and `make test` must build, before pytest, every version a test
pins, since a build inside a test outlasts its timeout (the cold-cache CI run of fd985e2).
What each recipe would run is read from `make -n`, which prints the commands without
running them.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from drakit.localcluster import assets
from drakit.localcluster.cluster import ClusterConfig, LocalCluster
from drakit.version import KUBERNETES_VERSION

ROOT = Path(__file__).resolve().parents[3]


def _recipe_lines(target: str) -> list[str]:
    """The shell commands `make TARGET` would run, backslash continuations joined."""
    proc = subprocess.run(
        ["make", "-n", "-C", str(ROOT), "--no-print-directory", target],
        capture_output=True,
        text=True,
        check=True,
    )
    return proc.stdout.replace("\\\n", " ").splitlines()


def _builds(lines: list[str]) -> list[tuple[int, str, str]]:
    """(line number, Kubernetes version, target) for every hack/build-binaries.sh call.

    Understands the two forms the Makefile uses: a plain call (the default version, or
    DRAKIT_KUBE_VERSION=V before it) and ``for v in V...; do DRAKIT_KUBE_VERSION=$v ...``.
    """
    found: list[tuple[int, str, str]] = []
    for number, line in enumerate(lines):
        for call in re.finditer(
            r"(?:DRAKIT_KUBE_VERSION=(\S+)\s+)?\S*build-binaries\.sh([^;&|>]*)", line
        ):
            version = call[1] or KUBERNETES_VERSION
            versions = [version]
            if version == "$v" and (loop := re.search(r"for v in ([^;]+);", line)):
                versions = loop[1].split()
            targets = call[2].split() or ["kube", "etcd"]
            found += [(number, v, t) for v in versions for t in targets]
    return found


def _pytest_line(lines: list[str]) -> int:
    """The main pytest run (not the docs site's, `pytest tests/site`)."""
    return next(i for i, line in enumerate(lines) if re.search(r"bin/pytest(?! tests/site)", line))


def test_make_demo_builds_only_the_default_versions_apiserver_scheduler_and_etcd() -> None:
    # drakit/demo/flow.py starts etcd, kube-apiserver and kube-scheduler, no
    # kube-controller-manager; the kubelet harness it builds itself (first run only).
    built = {(version, target) for _, version, target in _builds(_recipe_lines("demo"))}
    assert built == {
        (KUBERNETES_VERSION, "etcd"),
        (KUBERNETES_VERSION, "kube-apiserver"),
        (KUBERNETES_VERSION, "kube-scheduler"),
    }


def _pinned_test_versions() -> dict[str, list[str]]:
    """Kubernetes versions other than the default that a test run by `make test` starts a
    LocalCluster of (``ClusterConfig(kube_version="v1.X.Y", ...)``), with the test files.
    tests/reference is the reference suite's harness (hack/test-reference.sh builds)."""
    pinned: dict[str, list[str]] = {}
    for path in sorted((ROOT / "tests").rglob("*.py")):
        if "reference" in path.relative_to(ROOT / "tests").parts or path == Path(__file__):
            continue
        for version in re.findall(
            r'ClusterConfig\([^)]*kube_version="(v[\d.]+)"', path.read_text()
        ):
            if version != KUBERNETES_VERSION:
                pinned.setdefault(version, []).append(str(path.relative_to(ROOT)))
    return pinned


def test_make_test_builds_every_version_a_test_pins_before_pytest_starts() -> None:
    pinned = _pinned_test_versions()
    assert pinned, "no test pins another version: this check would check nothing"
    lines = _recipe_lines("test")
    before_pytest = {
        (version, target) for n, version, target in _builds(lines) if n < _pytest_line(lines)
    }
    for version, files in pinned.items():
        for binary in ("kube-apiserver", "etcd"):
            assert (version, binary) in before_pytest or (version, "kube") in before_pytest, (
                f"{files} start a {version} control plane, but `make test` builds no {version} "
                f"{binary} before pytest: a cold build inside the test outlasts its timeout"
            )


@pytest.mark.parametrize(
    ("config", "missing", "expected"),
    [
        # An apiserver-only cluster of another minor: its controller-manager and scheduler
        # are never built (make test's v1.36.3 test).
        (ClusterConfig(kube_version="v1.36.3"), {"kube-apiserver"}, ("kube-apiserver",)),
        (
            ClusterConfig(with_scheduler=True),
            {"kube-scheduler", "etcd"},
            ("etcd", "kube-scheduler"),
        ),
        (ClusterConfig(with_scheduler=True, with_controller_manager=True), set(), None),
    ],
)
def test_a_cluster_builds_only_the_binaries_it_starts_that_are_missing(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    config: ClusterConfig,
    missing: set[str],
    expected: tuple[str, ...] | None,
) -> None:
    built: list[tuple[tuple[str, ...], str | None]] = []
    monkeypatch.setattr(
        assets,
        "find_binary",
        lambda name, version=None: None if name in missing and not built else tmp_path / name,
    )
    monkeypatch.setattr(assets, "require_binary", lambda name, **_: tmp_path / name)
    monkeypatch.setattr(
        assets, "build_binaries", lambda targets, version=None: built.append((targets, version))
    )
    cluster = LocalCluster(config)
    try:
        cluster._binaries()
    finally:
        cluster.stop()
    assert built == ([] if expected is None else [(expected, cluster.kube_version)])


def test_every_control_plane_binary_is_a_build_target_of_its_own() -> None:
    script = (ROOT / "hack" / "build-binaries.sh").read_text()
    cases = re.search(r'case "\$t" in(.*?)esac', script, re.S)
    assert cases is not None
    for binary in ("kube-apiserver", "kube-scheduler", "kube-controller-manager", "etcd"):
        assert re.search(rf"(^|\s|\|){binary}(\s|\||\))", cases[1]), binary
