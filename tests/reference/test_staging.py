"""The staged charts carry this node's facts: rendered with helm, upstream's Go chart puts
its pods on the host network with the apiserver at 127.0.0.1:PORT, this node's plugin
folders and CDI folder, no fixed host ports; a patch that no longer applies is refused."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import staging
import yaml

from drakit.localcluster.assets import find_binary

FACTS = staging.NodeFacts("127.0.0.1", 41234, Path("/tmp/dkab12/kubelet"), Path("/tmp/dkab12/cdi"))


def _upstream_chart() -> Path:
    mod = Path.home() / "go/pkg/mod/sigs.k8s.io/dra-example-driver@v0.4.0"
    chart = mod / "deployments/helm/dra-example-driver"
    if not chart.is_dir():
        pytest.skip(f"{chart} is not in the module cache (hack/build-binaries.sh reference)")
    return chart


def _render(chart: Path, *sets: str) -> list[dict[str, Any]]:
    helm = find_binary("helm")
    if helm is None:
        pytest.skip("helm is not built (hack/build-binaries.sh helm)")
    argv = [str(helm), "template", "rel", str(chart), "--namespace", "ns", "--kube-version=1.37.2"]
    for item in sets:
        argv += ["--set", item]
    out = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=60).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def _pod_spec(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    obj = next(d for d in docs if d["kind"] == kind)
    spec: dict[str, Any] = obj["spec"]["template"]["spec"]
    return spec


def test_go_chart_runs_on_the_host_network_with_this_nodes_apiserver_and_folders(
    tmp_path: Path,
) -> None:
    chart = staging.stage_chart(
        _upstream_chart(), tmp_path / "chart", staging.go_values(FACTS), staging.GO_PATCHES
    )
    docs = _render(chart, "controller.plugins={BindingConditions}")
    plugin = _pod_spec(docs, "DaemonSet")
    assert plugin["hostNetwork"] is True
    env = {e["name"]: e.get("value") for e in plugin["containers"][0]["env"]}
    assert env["KUBERNETES_SERVICE_HOST"] == "127.0.0.1"
    assert env["KUBERNETES_SERVICE_PORT"] == "41234"
    assert env["KUBELET_REGISTRAR_DIRECTORY_PATH"] == "/tmp/dkab12/kubelet/plugins_registry"
    assert env["KUBELET_PLUGINS_DIRECTORY_PATH"] == "/tmp/dkab12/kubelet/plugins"
    # No health or metrics listener: parallel releases share the host's ports.
    assert "HEALTHCHECK_PORT" not in env and "METRICS_PORT" not in env
    assert "ports" not in plugin["containers"][0]
    cdi = next(v for v in plugin["volumes"] if v["name"] == "cdi")
    assert cdi["hostPath"]["path"] == "/tmp/dkab12/cdi"
    controller = _pod_spec(docs, "Deployment")
    assert controller["hostNetwork"] is True
    controller_env = {e["name"]: e["value"] for e in controller["containers"][0]["env"]}
    assert controller_env["KUBERNETES_SERVICE_HOST"] == "127.0.0.1"


def test_the_suites_own_values_still_override_the_staged_defaults(tmp_path: Path) -> None:
    chart = staging.stage_chart(
        _upstream_chart(), tmp_path / "chart", staging.go_values(FACTS), staging.GO_PATCHES
    )
    plugin = _pod_spec(_render(chart, "kubeletPlugin.numDevices=4"), "DaemonSet")
    env = {e["name"]: e.get("value") for e in plugin["containers"][0]["env"]}
    assert env["NUM_DEVICES"] == "4"


def test_a_patch_whose_text_is_gone_is_refused_naming_file_and_reason(tmp_path: Path) -> None:
    source = tmp_path / "src"
    (source / "templates").mkdir(parents=True)
    (source / "Chart.yaml").write_text("apiVersion: v2\nname: x\nversion: 0.1.0\n")
    (source / "values.yaml").write_text("a: 1\n")
    (source / "templates" / "kubeletplugin.yaml").write_text("kind: DaemonSet\n")
    with pytest.raises(staging.StagingError, match=r"kubeletplugin\.yaml: the text to patch"):
        staging.stage_chart(source, tmp_path / "out", {}, staging.GO_PATCHES)


def test_values_are_merged_key_by_key_into_the_defaults(tmp_path: Path) -> None:
    source = tmp_path / "src"
    source.mkdir()
    (source / "Chart.yaml").write_text("apiVersion: v2\nname: x\nversion: 0.1.0\n")
    (source / "values.yaml").write_text("image:\n  repository: a\n  pullPolicy: IfNotPresent\n")
    out = staging.stage_chart(source, tmp_path / "out", {"image": {"repository": "b"}})
    values = yaml.safe_load((out / "values.yaml").read_text())
    assert values["image"] == {"repository": "b", "pullPolicy": "IfNotPresent"}


def test_a_folder_without_chart_yaml_is_refused(tmp_path: Path) -> None:
    with pytest.raises(staging.StagingError, match="is not a Helm chart"):
        staging.stage_chart(tmp_path, tmp_path / "out", {})


def test_go_webhook_runs_on_the_host_network_behind_its_service_with_cert_managers_cert(
    tmp_path: Path,
) -> None:
    """The webhook's Pod listens on the node (the apiserver reaches its Service's endpoint)
    at the staged port; everything cert-manager provides is upstream's: the Certificate
    for the Service's name, the Secret the Pod mounts, the cainjector annotation."""
    values = staging.go_values(FACTS, webhook_port=40443)
    chart = staging.stage_chart(_upstream_chart(), tmp_path / "chart", values, staging.GO_PATCHES)
    docs = _render(chart, "webhook.enabled=true")
    by_kind = {(d["kind"], d["metadata"]["name"]): d for d in docs}
    webhook = next(
        d["spec"]["template"]["spec"]
        for d in docs
        if d["kind"] == "Deployment" and d["metadata"]["name"].endswith("-webhook")
    )
    assert webhook["hostNetwork"] is True
    container = webhook["containers"][0]
    assert "--port=40443" in container["args"]
    assert container["ports"] == [{"name": "webhook", "containerPort": 40443}]
    service = by_kind[("Service", "rel-dra-example-driver-webhook")]
    assert service["spec"]["ports"][0]["port"] == 443
    assert service["spec"]["ports"][0]["targetPort"] == "webhook"
    certificate = by_kind[("Certificate", "rel-dra-example-driver-webhook-cert")]
    assert certificate["spec"]["dnsNames"] == ["rel-dra-example-driver-webhook.ns.svc"]
    secret = next(v for v in webhook["volumes"] if v["name"] == "cert")["secret"]["secretName"]
    assert secret == certificate["spec"]["secretName"]
    config = by_kind[("ValidatingWebhookConfiguration", "rel-dra-example-driver-webhook-config")]
    assert config["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == (
        "ns/rel-dra-example-driver-webhook-cert"
    )
    assert config["webhooks"][0]["clientConfig"]["service"]["name"] == service["metadata"]["name"]


def test_drakits_staged_chart_calls_its_webhook_on_the_hosts_loopback(tmp_path: Path) -> None:
    """The node has no service proxy: the chart's default (a Service) would never answer."""
    chart = Path(__file__).resolve().parents[2] / "examples/example-driver/deployments/helm"
    staged = staging.stage_chart(
        chart / "example-driver", tmp_path / "chart",
        staging.drakit_values(FACTS, "localhost/x", "t", 18443),
    )  # fmt: skip
    docs = _render(staged, "webhook.enabled=true", "driverName=gpu.example.com")
    config = next(d for d in docs if d["kind"] == "ValidatingWebhookConfiguration")
    assert config["webhooks"][0]["clientConfig"] == {
        "url": "https://127.0.0.1:18443/validate-resource-claim-parameters"
    }
    webhook = next(d for d in docs if d["kind"] == "Deployment")
    assert webhook["spec"]["replicas"] == 1
    assert webhook["spec"]["template"]["spec"]["hostNetwork"] is True
