"""The chart's health-policy values reach ``drakit node-plugin`` as the policy they name, and
the schema refuses what the plugin would refuse."""

from __future__ import annotations

from typing import Any

import pytest
from deploy_support import Helm, one

from drakit.cli import build_parser
from drakit.cmd_node_plugin import health_policy
from drakit.node_plugin.health.policy import HealthPolicy

pytestmark = pytest.mark.integration


def _policy_of(env: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch) -> HealthPolicy:
    """The policy the plugin builds from the DaemonSet's environment (its flags' twins)."""
    for item in env:
        if item["name"].startswith("HEALTH_"):
            monkeypatch.setenv(item["name"], item["value"])
    args = build_parser().parse_args(["node-plugin", "--driver-name", "d.x", "--node-name", "n"])
    return health_policy(args)


def test_the_charts_health_values_become_the_plugins_policy(
    helm: Helm, monkeypatch: pytest.MonkeyPatch
) -> None:
    values = {
        "nodePlugin.health.taintEffect": r"NoSchedule\,DeviceNodeMissing=NoExecute",
        "nodePlugin.health.unhealthyFor": "20",
        "nodePlugin.health.healthyFor": "45",
        "nodePlugin.health.flapWindow": "900",
        "nodePlugin.health.noExecuteBudget.perNode": "2",
        "nodePlugin.health.noExecuteBudget.clusterPercent": "25",
    }
    daemonset = one(helm.render(values=values), "DaemonSet")
    env = daemonset["spec"]["template"]["spec"]["containers"][0]["env"]
    assert _policy_of(env, monkeypatch) == HealthPolicy(
        default_effect="NoSchedule",
        effects=(("DeviceNodeMissing", "NoExecute"),),
        unhealthy_for=20,
        healthy_for=45,
        flap_window=900,
        noexecute_per_node=2,
        noexecute_cluster_percent=25,
    )


def test_the_charts_defaults_are_the_plugins_defaults(
    helm: Helm, monkeypatch: pytest.MonkeyPatch
) -> None:
    daemonset = one(helm.render(), "DaemonSet")
    env = daemonset["spec"]["template"]["spec"]["containers"][0]["env"]
    assert _policy_of(env, monkeypatch) == HealthPolicy()


def test_the_schema_refuses_an_unknown_taint_effect(helm: Helm) -> None:
    proc = helm.template(values={"nodePlugin.health.taintEffect": "Evict"}, check=False)
    assert proc.returncode != 0
    assert "taintEffect" in proc.stderr


def test_the_schema_refuses_a_negative_dwell(helm: Helm) -> None:
    proc = helm.template(values={"nodePlugin.health.healthyFor": "-1"}, check=False)
    assert proc.returncode != 0
    assert "healthyFor" in proc.stderr


def test_the_deprecated_report_counts_of_0_1_still_reach_the_plugin(
    helm: Helm, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A release's values from 0.1 (report counts) upgrade without a schema error: the plugin
    takes them as check intervals (and warns) until 0.3 removes them."""
    values = {
        "nodePlugin.health.unhealthyAfter": "3",
        "nodePlugin.health.healthyAfter": "2",
        "nodePlugin.health.healthyFor": "30",
        "nodePlugin.health.checkInterval": "10",
    }
    daemonset = one(helm.render(values=values), "DaemonSet")
    env = daemonset["spec"]["template"]["spec"]["containers"][0]["env"]
    policy = _policy_of(env, monkeypatch)
    assert (policy.unhealthy_for, policy.healthy_for) == (20, 10)
