"""The launcher's version choice: one list of versions, gates each minor accepts."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from drakit.localcluster.kubeversions import (
    check_feature_gates,
    default_feature_gates,
    minor_of,
    resolve_version,
)
from drakit.version import KUBERNETES_VERSION, SUPPORTED_KUBERNETES_VERSIONS

ROOT = Path(__file__).resolve().parents[3]


def _versions_env() -> dict[str, str]:
    text = (ROOT / "hack" / "versions.env").read_text()
    return {m[1]: m[2].strip('"') for m in re.finditer(r"^([A-Z_]+)=(.*)$", text, re.M)}


def test_supported_versions_are_the_ones_hack_versions_env_pins() -> None:
    env = _versions_env()
    assert tuple(env["KUBE_VERSIONS"].split()) == SUPPORTED_KUBERNETES_VERSIONS
    assert env["KUBE_VERSION"] == KUBERNETES_VERSION


@pytest.mark.parametrize("version", SUPPORTED_KUBERNETES_VERSIONS)
def test_every_older_version_has_its_pinned_go_modules(version: str) -> None:
    if version == KUBERNETES_VERSION:
        return
    minor = version.rsplit(".", 1)[0]
    for module in ("hack/tools/kube", "hack/kubelet-harness"):
        modfile = ROOT / module / f"go-{minor}.mod"
        assert f"k8s.io/kubernetes {version}" in modfile.read_text()
        assert (ROOT / module / f"go-{minor}.sum").is_file()


def test_a_minor_resolves_to_its_pinned_patch() -> None:
    assert resolve_version("v1.36") == "v1.36.3"
    assert resolve_version("1.35") == "v1.35.4"
    assert resolve_version(None) == KUBERNETES_VERSION


def test_an_unsupported_version_is_refused_with_the_supported_list() -> None:
    with pytest.raises(ValueError, match=r"'v1\.34\.4' is not supported \(supported: v1\.35\.4"):
        resolve_version("v1.34.4")


def test_1_35_gets_no_gate_it_does_not_know() -> None:
    assert "DRAListTypeAttributes" not in default_feature_gates("v1.35.4")
    assert default_feature_gates("v1.37.2") == "DRAListTypeAttributes=true"


def test_a_dra_gate_unknown_to_the_minor_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"'DRAListTypeAttributes' does not exist in .*v1\.35\.4"):
        check_feature_gates("DRAListTypeAttributes=true", "v1.35.4")
    check_feature_gates("DRAListTypeAttributes=true,SomeOtherGate=false", "v1.36.3")


def test_minor_of_rejects_what_is_not_a_release() -> None:
    assert minor_of("v1.36.3") == 36
    with pytest.raises(ValueError, match="not a Kubernetes release"):
        minor_of("latest")


def test_local_cluster_refuses_an_unsupported_version_before_starting_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from drakit.cli import main  # noqa: PLC0415

    assert main(["local-cluster", "run", str(tmp_path), "--kube-version", "v1.34"]) == 2
    assert "'v1.34' is not supported (supported: v1.35.4, v1.36.3, v1.37.2)" in (
        capsys.readouterr().err
    )
