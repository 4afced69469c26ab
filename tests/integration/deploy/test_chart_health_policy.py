"""The chart's health-policy values reach ``drakit node-plugin`` as the policy they name, its
NoExecute budget reaches ``drakit controller``, and the schema refuses what either would
refuse."""

from __future__ import annotations

from typing import Any

import pytest
from deploy_support import CHART, Helm, one, set_args

from drakit.cli import build_parser
from drakit.cli.controller import build_config
from drakit.cli.node_plugin import health_policy
from drakit.controller.noexecute.decision import Budget
from drakit.localcluster import LocalCluster
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
    }
    daemonset = one(helm.render(values=values), "DaemonSet")
    env = daemonset["spec"]["template"]["spec"]["containers"][0]["env"]
    assert _policy_of(env, monkeypatch) == HealthPolicy(
        default_effect="NoSchedule",
        effects=(("DeviceNodeMissing", "NoExecute"),),
        unhealthy_for=20,
        healthy_for=45,
        flap_window=900,
    )


def _budget_of(env: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch) -> Budget | None:
    """The budget the controller builds from its Deployment's environment."""
    for item in env:
        if item["name"].startswith("NOEXECUTE_"):
            monkeypatch.setenv(item["name"], item["value"])
    args = build_parser().parse_args(["controller"])
    return build_config(args).controller.noexecute


def test_the_charts_noexecute_budget_reaches_the_controller(
    helm: Helm, monkeypatch: pytest.MonkeyPatch
) -> None:
    values = {
        "controller.noExecuteBudget.perNode": "2",
        "controller.noExecuteBudget.clusterPercent": "25",
        "controller.noExecuteBudget.forgetAfter": "120",
    }
    deployment = one(helm.render(values=values), "Deployment")
    env = deployment["spec"]["template"]["spec"]["containers"][0]["env"]
    assert _budget_of(env, monkeypatch) == Budget(per_node=2, percent=25, forget_after=120)


def test_the_charts_default_budget_is_the_controllers_default(
    helm: Helm, monkeypatch: pytest.MonkeyPatch
) -> None:
    deployment = one(helm.render(), "Deployment")
    env = deployment["spec"]["template"]["spec"]["containers"][0]["env"]
    assert _budget_of(env, monkeypatch) == Budget()


def test_the_schema_refuses_a_budget_above_100_percent(helm: Helm) -> None:
    proc = helm.template(values={"controller.noExecuteBudget.clusterPercent": "101"}, check=False)
    assert proc.returncode != 0
    assert "clusterPercent" in proc.stderr


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


def _controller_budget(
    helm: Helm, values: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> Budget | None:
    deployment = one(helm.render(values=values), "Deployment")
    env = deployment["spec"]["template"]["spec"]["containers"][0]["env"]
    return _budget_of(env, monkeypatch)


def _notes(helm: Helm, cluster: LocalCluster, values: dict[str, str]) -> str:
    """The NOTES ``helm install`` prints for these values (a client-side dry run: nothing is
    installed; helm only asks the apiserver for its version)."""
    out = helm.run(
        "install", "notes", str(CHART), "--dry-run=client", "--kubeconfig", cluster.kubeconfig,
        "--namespace", "drakit-system", *set_args(values),
    ).stdout  # fmt: skip
    return out[out.index("NOTES:") :]


def test_the_deprecated_plugin_budget_of_0_1_still_reaches_the_controller(
    helm: Helm, monkeypatch: pytest.MonkeyPatch
) -> None:
    """0.1's ``nodePlugin.health.noExecuteBudget`` passes the schema and, while
    ``controller.noExecuteBudget`` keeps its defaults, becomes the controller's budget (the
    node plugin no longer has one) until 0.3 removes it."""
    values = {
        "nodePlugin.health.noExecuteBudget.perNode": "3",
        "nodePlugin.health.noExecuteBudget.clusterPercent": "25",
    }
    assert _controller_budget(helm, values, monkeypatch) == Budget(per_node=3, percent=25)


def test_the_deprecated_plugin_budget_passes_only_the_keys_it_sets(
    helm: Helm, monkeypatch: pytest.MonkeyPatch
) -> None:
    values = {"nodePlugin.health.noExecuteBudget.perNode": "0"}
    assert _controller_budget(helm, values, monkeypatch) == Budget(per_node=0)


def test_a_changed_controller_budget_wins_over_the_deprecated_one(
    helm: Helm, monkeypatch: pytest.MonkeyPatch
) -> None:
    values = {
        "nodePlugin.health.noExecuteBudget.perNode": "3",
        "controller.noExecuteBudget.clusterPercent": "20",
    }
    assert _controller_budget(helm, values, monkeypatch) == Budget(percent=20)


def test_the_schema_still_checks_the_deprecated_plugin_budget(helm: Helm) -> None:
    values = {"nodePlugin.health.noExecuteBudget.clusterPercent": "101"}
    proc = helm.template(values=values, check=False)
    assert proc.returncode != 0
    assert "noExecuteBudget/clusterPercent" in proc.stderr


@pytest.mark.parametrize(
    ("values", "fate"),
    [
        ({"nodePlugin.health.noExecuteBudget.perNode": "3"}, "passed to the controller"),
        (
            {
                "nodePlugin.health.noExecuteBudget.perNode": "3",
                "controller.noExecuteBudget.perNode": "2",
            },
            "It is ignored",
        ),
    ],
)
def test_the_notes_warn_that_the_plugin_budget_moved_to_the_controller(
    helm: Helm, cluster: LocalCluster, values: dict[str, str], fate: str
) -> None:
    notes = _notes(helm, cluster, values)
    assert "nodePlugin.health.noExecuteBudget is deprecated" in notes
    assert "controller.noExecuteBudget" in notes and fate in notes


def test_the_notes_say_nothing_of_the_plugin_budget_when_it_is_not_set(
    helm: Helm, cluster: LocalCluster
) -> None:
    assert "noExecuteBudget" not in _notes(helm, cluster, {})
