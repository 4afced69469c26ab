"""cert-manager for the Go driver's run: the CRDs are the ones its chart installs with
crds.enabled=true, rendered from the pinned module's chart."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import certmanager
import pytest

from drakit.localcluster.assets import find_binary

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "hack" / "tools" / "cert-manager"


def _chart() -> Path:
    proc = subprocess.run(
        ["go", "list", "-m", "-f", "{{.Dir}}", "github.com/cert-manager/cert-manager"],
        cwd=TOOL,
        capture_output=True,
        text=True,
        check=False,
    )
    chart = Path(proc.stdout.strip()) / "deploy" / "charts" / "cert-manager"
    if proc.returncode != 0 or not proc.stdout.strip() or not chart.is_dir():
        pytest.skip(
            "cert-manager's module is not in the module cache (build-binaries.sh cert-manager)"
        )
    return chart


def test_the_pinned_cert_manager_is_the_version_upstreams_e2e_installs() -> None:
    mod = Path.home() / "go/pkg/mod/sigs.k8s.io/dra-example-driver@v0.4.0/test/e2e/setup-e2e.sh"
    pinned = re.search(
        r"github.com/cert-manager/cert-manager (v\S+)", (TOOL / "go.mod").read_text()
    )
    assert pinned is not None and pinned[1] == certmanager.VERSION
    if not mod.is_file():
        pytest.skip(f"{mod} is not in the module cache (hack/build-binaries.sh reference)")
    chart_version = re.search(r"--version (v\S+)", mod.read_text())
    assert chart_version is not None and chart_version[1] == certmanager.VERSION


def test_the_crds_are_the_charts_cert_manager_and_acme_kinds() -> None:
    helm = find_binary("helm")
    if helm is None:
        pytest.skip("helm is not built (hack/build-binaries.sh helm)")
    crds = certmanager.render_crds(helm, _chart(), "v1.36.3")
    names = sorted(crd["metadata"]["name"] for crd in crds)
    assert names == [
        "certificaterequests.cert-manager.io",
        "certificates.cert-manager.io",
        "challenges.acme.cert-manager.io",
        "clusterissuers.cert-manager.io",
        "issuers.cert-manager.io",
        "orders.acme.cert-manager.io",
    ]
    # The chart's labels, as `helm upgrade -i cert-manager ... --set crds.enabled=true` has them.
    labels = {crd["metadata"]["labels"]["app.kubernetes.io/component"] for crd in crds}
    assert labels == {"crds"}


def test_a_folder_that_is_not_cert_managers_chart_is_refused(tmp_path: Path) -> None:
    (tmp_path / "templates").mkdir()
    with pytest.raises(certmanager.StartError, match="no crd-"):
        certmanager.render_crds(Path("/bin/false"), tmp_path, "v1.36.3")
