"""The health policy: flag parsing, hysteresis and the NoExecute budget (pure logic)."""

from __future__ import annotations

import pytest

from drakit.node_plugin.health.budget import ClusterTaints, Holder, cluster_cap, grant
from drakit.node_plugin.health.hysteresis import Hysteresis, Observation
from drakit.node_plugin.health.policy import HealthPolicy, PolicyError, parse_effects

A = ("pool", "a")
B = ("pool", "b")
C = ("pool", "c")


def _report(**health: str) -> list[Observation]:
    return [
        Observation(("pool", name), h, reason="Bad" if h == "Unhealthy" else "")
        for name, h in health.items()
    ]


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


def test_a_policy_refuses_counts_below_one_and_percentages_outside_0_100() -> None:
    with pytest.raises(PolicyError, match="at least 1"):
        HealthPolicy(unhealthy_after=0)
    with pytest.raises(PolicyError, match=r"percentage in \[0, 100\]"):
        HealthPolicy(noexecute_cluster_percent=101)


# -- hysteresis ----------------------------------------------------------------------------


def test_a_device_turns_unhealthy_only_after_n_consecutive_bad_reports() -> None:
    h = Hysteresis(unhealthy_after=3, healthy_after=1)
    assert h.observe(_report(a="Unhealthy")) == []
    assert h.observe(_report(a="Unhealthy")) == []
    (t,) = h.observe(_report(a="Unhealthy"))
    assert (t.key, t.direction, t.reason) == (A, "Unhealthy", "Bad")
    assert h.unhealthy() == {A: "Bad"}


def test_a_good_report_breaks_a_run_of_bad_ones() -> None:
    h = Hysteresis(unhealthy_after=2, healthy_after=1)
    for health in ("Unhealthy", "Healthy", "Unhealthy"):
        assert h.observe(_report(a=health)) == []
    assert h.unhealthy() == {}


def test_a_device_recovers_only_after_m_consecutive_good_reports() -> None:
    h = Hysteresis(unhealthy_after=1, healthy_after=2)
    h.observe(_report(a="Unhealthy"))
    assert h.observe(_report(a="Healthy")) == []
    assert h.observe(_report(a="Unhealthy")) == []  # the run of good reports starts over
    assert h.observe(_report(a="Healthy")) == []
    (t,) = h.observe(_report(a="Healthy"))
    assert (t.key, t.direction) == (A, "Recovered")
    assert h.unhealthy() == {}


def test_unknown_reports_neither_extend_nor_break_a_run() -> None:
    h = Hysteresis(unhealthy_after=2, healthy_after=1)
    h.observe(_report(a="Unhealthy"))
    assert h.observe(_report(a="Unknown")) == []
    (t,) = h.observe(_report(a="Unhealthy"))
    assert t.direction == "Unhealthy"


def test_seeded_devices_start_unhealthy_and_need_m_good_reports() -> None:
    h = Hysteresis(unhealthy_after=1, healthy_after=2)
    h.seed({A: "DeviceNodeMissing"})
    assert h.observe(_report(a="Healthy")) == []
    assert h.unhealthy() == {A: "DeviceNodeMissing"}
    assert [t.direction for t in h.observe(_report(a="Healthy"))] == ["Recovered"]


def test_a_device_missing_from_a_report_is_forgotten() -> None:
    h = Hysteresis(unhealthy_after=1, healthy_after=1)
    h.observe(_report(a="Unhealthy", b="Unhealthy"))
    assert h.observe(_report(b="Unhealthy")) == []
    assert h.unhealthy() == {B: "Bad"}


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
