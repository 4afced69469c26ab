"""The budget's census of the driver's slices: current generations only, and one node's
published devices and holders bounded (pure logic; the real apiserver's side is in
tests/integration/publisher/test_health_budget_cache.py)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from drakit.node_plugin.health.budget import Holder, grant
from drakit.node_plugin.health.census import Census, census, summarize

KEY = "gpu.example.com/unhealthy"
LABEL = "resource.drakit.dev/node"
OLD = "2020-01-01T00:00:00Z"
NEW = "2026-01-01T00:00:00Z"


def _slice(
    node: str,
    devices: int,
    *,
    pool: str | None = None,
    generation: int = 1,
    holders: dict[int, str] | None = None,
    name: str = "",
) -> dict[str, Any]:
    items: list[dict[str, Any]] = []
    for i in range(devices):
        device: dict[str, Any] = {"name": f"gpu-{i}"}
        if holders and i in holders:
            device["taints"] = [{"key": KEY, "effect": "NoExecute", "timeAdded": holders[i]}]
        items.append(device)
    return {
        "metadata": {"name": name or f"{node}-{pool or node}-{generation}", "resourceVersion": "1"},
        "spec": {
            "driver": "gpu.example.com",
            "nodeName": node,
            "pool": {"name": pool or node, "generation": generation, "resourceSliceCount": 1},
            "devices": items,
        },
    }


def _census(*slices: dict[str, Any]) -> Census:
    return census(summarize(s, taint_key=KEY, node_label=LABEL) for s in slices)


def _summary(node: str, devices: int) -> dict[str, Any]:
    """A summarized slice of ``devices`` devices (what a huge slice summarizes to)."""
    summary = summarize(_slice(node, 0), taint_key=KEY, node_label=LABEL)
    summary["healthSummary"]["devices"] = devices
    return summary


def test_the_summary_keeps_only_what_the_budget_reads() -> None:
    obj = _slice("n1", 3, holders={1: OLD})
    obj["spec"]["devices"][0]["attributes"] = {"model": {"string": "x" * 1000}}
    obj["spec"]["devices"][2]["taints"] = [{"key": "other/key", "effect": "NoExecute"}]
    summary = summarize(obj, taint_key=KEY, node_label=LABEL)
    assert summary == {
        "metadata": {"name": "n1-n1-1", "resourceVersion": "1"},
        "healthSummary": {
            "node": "n1",
            "pool": "n1",
            "generation": 1,
            "devices": 3,
            "holders": [["gpu-1", OLD]],
        },
    }


def test_a_per_device_slice_belongs_to_its_label_node_and_others_to_no_node() -> None:
    per_device = _slice("", 1)
    per_device["spec"].pop("nodeName")
    per_device["spec"]["perDeviceNodeSelection"] = True
    per_device["metadata"]["labels"] = {LABEL: "n7"}
    assert summarize(per_device, taint_key=KEY, node_label=LABEL)["healthSummary"]["node"] == "n7"
    per_device["spec"]["perDeviceNodeSelection"] = False  # a label alone names no owner
    assert summarize(per_device, taint_key=KEY, node_label=LABEL)["healthSummary"]["node"] == ""


def test_only_the_current_generation_of_a_pool_counts_devices_and_holders() -> None:
    view = _census(
        _slice("n1", 4, generation=2),
        _slice("n1", 100, generation=1, holders={0: OLD}),  # left behind by generation 2
        _slice("n2", 4, generation=5),
    )
    assert view.total_devices == 8
    assert view.holders == ()


def test_a_node_cannot_make_another_nodes_pool_stale() -> None:
    # n2 publishes a pool named like n1's, with a higher generation: n1's pool still counts.
    view = _census(
        _slice("n1", 4, generation=1, holders={0: NEW}),
        _slice("n2", 4, pool="n1", generation=9, name="fake"),
        _slice("n3", 4),
    )
    assert view.total_devices == 12
    assert view.holders == (Holder("n1", ("n1", "gpu-0"), NEW),)


def test_a_node_that_publishes_many_devices_counts_as_the_median_node() -> None:
    honest = [_slice(f"n{i}", 8) for i in range(4)]
    inflated = [_slice("evil", 128, pool="evil", generation=1, name=f"evil-{i}") for i in range(8)]
    assert _census(*honest).total_devices == 32
    assert _census(*honest, *inflated).total_devices == 40  # one more node of 8
    assert _census(*honest, *inflated).published_devices == 32 + 1024


@given(
    honest=st.lists(st.integers(min_value=1, max_value=500), min_size=2, max_size=12),
    inflated=st.integers(min_value=0, max_value=10**6),
)
def test_whatever_one_node_publishes_it_counts_as_at_most_the_largest_other_node(
    honest: list[int], inflated: int
) -> None:
    """The documented bound: the denominator is at most what it would be if that node had as
    many devices as the largest other node, and so at most the other nodes' devices plus the
    largest of them."""
    slices = [_summary(f"n{i}", count) for i, count in enumerate(honest)]
    with_inflated = census([*slices, _summary("evil", inflated)])
    as_largest = census([*slices, _summary("evil", max(honest))])
    assert with_inflated.total_devices <= as_largest.total_devices
    assert with_inflated.total_devices <= sum(honest) + min(inflated, max(honest))
    assert with_inflated.per_node_cap <= max(honest)


def test_duplicate_holders_count_once_with_their_oldest_time() -> None:
    view = _census(
        _slice("n1", 2, holders={0: NEW}, name="a"),
        _slice("n1", 2, holders={0: OLD}, name="b"),
    )
    assert view.holders == (Holder("n1", ("n1", "gpu-0"), OLD),)


def test_fake_holders_of_one_node_take_at_most_per_node_places_of_the_budget() -> None:
    # "evil" claims 50 old NoExecute taints; with 2 per node and 4 places cluster-wide, n1
    # still gets the places that evil's surplus would have taken.
    view = _census(
        _slice("evil", 50, holders=dict.fromkeys(range(50), OLD)),
        *(_slice(f"n{i}", 50) for i in range(1, 4)),
    )
    wanted = [("n1", "gpu-0"), ("n1", "gpu-1")]
    assert grant("n1", wanted, view, per_node=2, percent=2) == set(wanted)
