"""cert-manager for the Go driver's run: the CRDs are the ones its chart installs with
crds.enabled=true, rendered from the pinned module's chart."""

from __future__ import annotations

import base64
import re
import subprocess
from pathlib import Path
from typing import Any

import certmanager
import pytest
from cryptography import x509
from helpers.waiting import eventually

from drakit.localcluster import ClusterConfig, LocalCluster
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


@pytest.mark.integration
def test_cert_manager_issues_the_webhooks_certificate_and_injects_its_ca(tmp_path: Path) -> None:
    """What the Go chart asks of cert-manager, against a real apiserver: a selfSigned
    Issuer and a Certificate for the webhook Service's name give a Secret with the key
    pair, and the cainjector puts its CA into the annotated webhook configuration."""
    binary, helm = find_binary("cert-manager"), find_binary("helm")
    if binary is None or helm is None:
        pytest.skip("cert-manager or helm is not built (hack/build-binaries.sh cert-manager helm)")
    from kubernetes import client  # noqa: PLC0415

    with LocalCluster(ClusterConfig()) as cluster:
        certmanager.install_crds(
            cluster.kubeconfig, certmanager.render_crds(helm, _chart(), cluster.kube_version)
        )
        api = cluster.api_client()
        client.CoreV1Api(api).create_namespace({"metadata": {"name": "drv"}})
        custom = client.CustomObjectsApi(api)
        group = ("cert-manager.io", "v1", "drv")
        custom.create_namespaced_custom_object(
            *group, "issuers", {**_meta("Issuer", "issuer"), "spec": {"selfSigned": {}}}
        )
        spec = {
            "dnsNames": ["wh.drv.svc"],
            "issuerRef": {"kind": "Issuer", "name": "issuer"},
            "secretName": "wh-cert",
        }
        custom.create_namespaced_custom_object(
            *group, "certificates", {**_meta("Certificate", "wh-cert"), "spec": spec}
        )
        admission = client.AdmissionregistrationV1Api(api)
        admission.create_validating_webhook_configuration(_webhook_config())
        core = client.CoreV1Api(api)

        def issued() -> Any:
            secrets = core.list_namespaced_secret("drv", field_selector="metadata.name=wh-cert")
            return secrets.items[0] if secrets.items else None

        def injected() -> bytes:
            config = admission.read_validating_webhook_configuration("wh-config")
            return base64.b64decode(config.webhooks[0].client_config.ca_bundle or "")

        with certmanager.running(binary, cluster.kubeconfig, tmp_path / "logs"):
            secret = eventually(issued, "the Certificate's Secret", timeout=60)
            ca = base64.b64decode(secret.data["ca.crt"])
            cert = x509.load_pem_x509_certificate(base64.b64decode(secret.data["tls.crt"]))
            names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
            assert names.get_values_for_type(x509.DNSName) == ["wh.drv.svc"]
            assert base64.b64decode(secret.data["tls.key"])
            assert eventually(injected, "the caBundle", timeout=60) == ca


def _meta(kind: str, name: str) -> dict[str, object]:
    return {"apiVersion": "cert-manager.io/v1", "kind": kind, "metadata": {"name": name}}


def _webhook_config() -> dict[str, object]:
    return {
        "metadata": {
            "name": "wh-config",
            "annotations": {"cert-manager.io/inject-ca-from": "drv/wh-cert"},
        },
        "webhooks": [
            {
                "name": "wh.example.com",
                "clientConfig": {"service": {"namespace": "drv", "name": "wh", "port": 443}},
                "rules": [
                    {
                        "apiGroups": ["example.com"],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE"],
                        "resources": ["nothings"],
                    }
                ],
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
            }
        ],
    }
