"""The health policy: flag parsing and the NoExecute budget (pure logic; the hysteresis is
in test_health_hysteresis_time.py)."""

from __future__ import annotations

import pytest

from drakit.node_plugin.health.budget import ClusterTaints, Holder, cluster_cap, grant
from drakit.node_plugin.health.policy import HealthPolicy, PolicyError, parse_effects

A = ("pool", "a")
B = ("pool", "b")
C = ("pool", "c")


# -- flags ---------------------------------------------------------------------------------


def test_effects_parse_a_default_and_per_reason_effects() -> None:
    default, effects = parse_effects("NoSchedule,DeviceNodeMissing=NoExecute,Xid=None")
    policy = HealthPolicy(default_effect=default, effects=effects)
    assert policy.effect_for("DeviceNodeMissing") == "NoExecute"
    assert policy.effect_for("Xid") == "None"
    assert policy.effect_for("") == "NoSchedule"
    assert policy.may_evict


def test_effects_without_a_bare_effect_default_to_noschedule() -> None:
    assert parse_effects("DeviceNodeMissing=NoExecute")[0] == "NoSchedule"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("Evict", r"'Evict' names no taint effect \(one of None, NoSchedule, NoExecute\)"),
        ("NoSchedule,NoExecute", "more than one default effect"),
        ("a=NoSchedule,a=None", "reason 'a' given twice"),
        ("bad reason=None", "'bad reason' is not a health reason"),
    ],
)
def test_bad_effects_name_the_flag_and_the_item(text: str, message: str) -> None:
    with pytest.raises(PolicyError, match=rf"--health-taint-effect '{text}': .*{message}"):
        parse_effects(text)


def test_a_policy_refuses_dwells_outside_a_day_and_percentages_outside_0_100() -> None:
    with pytest.raises(PolicyError, match=r"healthy_for must be seconds in \[0, 86400\]"):
        HealthPolicy(healthy_for=-1)
    with pytest.raises(PolicyError, match=r"flap_window must be seconds"):
        HealthPolicy(flap_window=float("nan"))
    with pytest.raises(PolicyError, match=r"percentage in \[0, 100\]"):
        HealthPolicy(noexecute_cluster_percent=101)


# -- budget --------------------------------------------------------------------------------


def test_the_cluster_cap_rounds_down_but_allows_one_when_percent_is_positive() -> None:
    assert cluster_cap(100, 10) == 10
    assert cluster_cap(19, 10) == 1
    assert cluster_cap(3, 10) == 1
    assert cluster_cap(100, 0) == 0


def test_at_most_k_devices_of_a_node_get_noexecute_oldest_unhealthy_first() -> None:
    granted = grant("n1", [A, B, C], ClusterTaints(100), per_node=2, percent=100)
    assert granted == {A, B}


def test_a_device_holding_noexecute_keeps_it_over_a_newer_one() -> None:
    cluster = ClusterTaints(100, (Holder("n1", C, "2026-01-01T00:00:00Z"),))
    assert grant("n1", [A, C], cluster, per_node=1, percent=100) == {C}


def test_taints_on_other_nodes_use_up_the_cluster_wide_budget() -> None:
    others = tuple(Holder(f"n{i}", ("p", "d"), "2026-01-01T00:00:00Z") for i in range(2, 4))
    assert grant("n1", [A], ClusterTaints(20, others), per_node=1, percent=10) == set()
    assert grant("n1", [A], ClusterTaints(30, others), per_node=1, percent=10) == {A}


def test_two_nodes_that_raced_agree_the_younger_taint_steps_back() -> None:
    # n1 and n2 both added NoExecute while the cap is 1: both compute the same ranking.
    cluster = ClusterTaints(
        10,
        (Holder("n1", A, "2026-01-01T00:00:01Z"), Holder("n2", A, "2026-01-01T00:00:00Z")),
    )
    assert grant("n1", [A], cluster, per_node=1, percent=10) == set()
    assert grant("n2", [A], cluster, per_node=1, percent=10) == {A}


def test_a_zero_budget_grants_nothing() -> None:
    assert grant("n1", [A], ClusterTaints(100), per_node=0, percent=100) == set()
    assert grant("n1", [A], ClusterTaints(100), per_node=5, percent=0) == set()
