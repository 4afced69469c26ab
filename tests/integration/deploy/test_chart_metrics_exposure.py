"""Who can reach the metrics ports the chart opens: both components bind their pod IP, not
every interface, and a NetworkPolicy per component (on by default, switchable) admits only
the configured scrapers, only to the metrics port (issue 30, item 4)."""

from __future__ import annotations

from typing import Any

import pytest
from deploy_support import Helm, by_kind, one

pytestmark = pytest.mark.integration

COMPONENTS = {"DaemonSet": "node-plugin", "Deployment": "controller"}


def _policies(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {
        p["metadata"]["labels"]["app.kubernetes.io/component"]: p
        for p in by_kind(objects, "NetworkPolicy")
    }


def test_each_metrics_port_admits_only_the_configured_scrapers(helm: Helm) -> None:
    objects = helm.render(
        values={
            "metricsNetworkPolicy.namespaceSelector.matchLabels.team": "observability",
            "metricsNetworkPolicy.podSelector.matchLabels.app": "prometheus",
        }
    )
    policies = _policies(objects)
    assert sorted(policies) == ["controller", "node-plugin"]
    for kind, component in COMPONENTS.items():
        pod_template = one(objects, kind)["spec"]["template"]
        (port,) = pod_template["spec"]["containers"][0]["ports"]
        spec = policies[component]["spec"]
        assert spec["podSelector"]["matchLabels"] == pod_template["metadata"]["labels"]
        assert spec["policyTypes"] == ["Ingress"]
        (rule,) = spec["ingress"]
        assert rule["ports"] == [{"protocol": "TCP", "port": port["containerPort"]}]
        (source,) = rule["from"]
        assert source["namespaceSelector"]["matchLabels"]["team"] == "observability"
        assert source["podSelector"] == {"matchLabels": {"app": "prometheus"}}


def test_metrics_network_policy_is_switched_off_by_its_value(helm: Helm) -> None:
    assert _policies(helm.render(values={"metricsNetworkPolicy.enabled": "false"})) == {}


def test_a_component_without_metrics_gets_no_metrics_network_policy(helm: Helm) -> None:
    objects = helm.render(values={"controller.metrics.enabled": "false"})
    assert sorted(_policies(objects)) == ["node-plugin"]


def test_both_components_bind_metrics_to_their_pod_ip(helm: Helm) -> None:
    objects = helm.render()
    for kind in COMPONENTS:
        container = one(objects, kind)["spec"]["template"]["spec"]["containers"][0]
        env = {e["name"]: e for e in container["env"]}
        assert env["POD_IP"]["valueFrom"] == {"fieldRef": {"fieldPath": "status.podIP"}}
        address = env.get("METRICS_ADDRESS", {}).get("value") or next(
            a.split("=", 1)[1] for a in container["args"] if a.startswith("--metrics-address=")
        )
        assert address.startswith(":")  # the host part comes from POD_IP


def test_metrics_host_value_overrides_the_pod_ip_for_both_components(helm: Helm) -> None:
    objects = helm.render(
        values={
            "nodePlugin.metrics.host": "127.0.0.1",
            "controller.metrics.host": "127.0.0.1",
        }
    )
    plugin = one(objects, "DaemonSet")["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in plugin["env"]}
    assert env["METRICS_ADDRESS"] == "127.0.0.1:9400"
    controller = one(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    assert "--metrics-address=127.0.0.1:9401" in controller["args"]
