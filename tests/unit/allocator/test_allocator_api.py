"""The allocator's Python API: reuse across calls, time limit, cancellation, share IDs,
allocated state bookkeeping and the double-use check, explanations."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from alloc_builders import (
    DRIVER,
    allocated,
    claim,
    consumes,
    counter_slice,
    dclass,
    device,
    gpus,
    match,
    req,
    result,
    rslice,
)

from drakit.allocator import (
    AllocatedState,
    AllocationCancelledError,
    AllocationError,
    AllocationTimeoutError,
    Allocator,
    DeviceClass,
    DeviceID,
    Inventory,
    Node,
    NodeUnsuitableError,
    Quantity,
    ResourceClaim,
    ResourceSlice,
    with_api_defaults,
)
from drakit.allocator.explain import explain, render


def _allocator(
    slices: list[dict[str, Any]],
    allocated_claims: list[dict[str, Any]] = (),  # type: ignore[assignment]
    classes: list[dict[str, Any]] | None = None,
    **kw: Any,
) -> Allocator:
    inv = Inventory([ResourceSlice.from_dict(s) for s in slices])
    cls = [DeviceClass.from_dict(c) for c in (classes or [dclass()])]
    state = AllocatedState([ResourceClaim.from_dict(c) for c in allocated_claims])
    return Allocator(inv, cls, state, **kw)


def _claims(*raw: dict[str, Any]) -> list[ResourceClaim]:
    return [with_api_defaults(ResourceClaim.from_dict(c)) for c in raw]


NODE = Node.named("node-1")


def test_allocator_is_reusable_across_nodes_and_calls() -> None:
    slices = [rslice("a", gpus(2), node="node-1"), rslice("b", gpus(1), node="node-2")]
    a = _allocator(slices)
    claims = _claims(claim("c", req(count=2)))
    first = a.allocate(NODE, claims)
    assert first is not None
    assert a.allocate(Node.named("node-2"), claims) is None
    assert a.allocate(NODE, claims) == first


def test_selector_results_are_cached_per_device_across_calls() -> None:
    a = _allocator([rslice("a", gpus(2))])
    a.allocate(NODE, _claims(claim("c", req())))
    entry = a.inventory.pools_for_node(NODE).candidates[0]
    assert entry.selector_cache  # filled by the first call
    assert list(entry.selector_cache.values()) == [True]


def test_inventory_pools_are_cached_per_node() -> None:
    inv = Inventory([ResourceSlice.from_dict(rslice("a", gpus(2)))])
    assert inv.pools_for_node(NODE) is inv.pools_for_node(Node.named("node-1"))


def test_share_id_generator_is_injectable() -> None:
    shared = device("nic", allowMultipleAllocations=True, capacity={"bw": {"value": "4Gi"}})
    ids = (f"00000000-0000-0000-0000-00000000000{i}" for i in itertools.count())
    a = _allocator([rslice("s", [shared])], share_id=lambda: next(ids))
    results = a.allocate(
        NODE,
        _claims(
            claim("a", req(capacity={"requests": {"bw": "1Gi"}})),
            claim("b", req(capacity={"requests": {"bw": "1Gi"}})),
        ),
    )
    assert results is not None
    assert [r.devices.results[0].share_id for r in results] == [
        "00000000-0000-0000-0000-000000000000",
        "00000000-0000-0000-0000-000000000001",
    ]
    assert results[0].devices.results[0].consumed_capacity == {"bw": Quantity.parse("1Gi")}


def _hard_search() -> tuple[Allocator, list[ResourceClaim]]:
    devs = [device(f"d{i}", {"g": {"int": i}}) for i in range(24)]
    a = _allocator([rslice("s", devs)])
    claims = _claims(claim("c", req(count=8), constraints=[match(f"{DRIVER}/g")]))
    return a, claims


def test_time_limit_stops_an_exhaustive_search() -> None:
    a, claims = _hard_search()
    with pytest.raises(AllocationTimeoutError):
        a.allocate(NODE, claims, timeout=0.0)


def test_cancellation_stops_the_search() -> None:
    a, claims = _hard_search()
    with pytest.raises(AllocationCancelledError):
        a.allocate(NODE, claims, timeout=None, cancelled=lambda: True)


def test_invalid_pool_is_reported_only_when_nothing_fits() -> None:
    bad = [rslice("s1", gpus(1), pool="bad", count=2), rslice("s2", gpus(1), pool="bad", count=2)]
    with pytest.raises(NodeUnsuitableError):
        _allocator(bad).allocate(NODE, _claims(claim("c", req())))
    ok = _allocator([*bad, rslice("ok", gpus(1, "ok"), pool="ok")])
    assert ok.allocate(NODE, _claims(claim("c", req()))) is not None


def test_fatal_error_names_claim_and_request() -> None:
    with pytest.raises(AllocationError) as info:
        _allocator([rslice("s", gpus(1))]).allocate(NODE, _claims(claim("c", req(cls="nope"))))
    assert info.value.claim == "default/c"
    assert info.value.request == "r"
    assert "nope" in str(info.value)


# --------------------------------------------------------------------------- allocated state


def _claim_with(name: str, *results: dict[str, Any]) -> ResourceClaim:
    return ResourceClaim.from_dict(allocated(name, *results))


def test_allocated_state_tracks_dedicated_shared_and_capacity() -> None:
    state = AllocatedState(
        [
            _claim_with("a", result("gpu-0")),
            _claim_with("b", result("nic", shareID="s1", consumedCapacity={"bw": "1Gi"})),
            _claim_with("c", result("gpu-1", adminAccess=True)),
        ]
    )
    gpu0 = DeviceID(DRIVER, "node-1", "gpu-0")
    nic = DeviceID(DRIVER, "node-1", "nic")
    assert state.is_dedicated(gpu0)
    assert state.is_allocated(nic) and not state.is_dedicated(nic)
    assert state.consumed_capacity(nic) == {"bw": Quantity.parse("1Gi")}
    assert not state.is_allocated(DeviceID(DRIVER, "node-1", "gpu-1"))


def test_remove_forgets_a_claim_and_add_is_idempotent() -> None:
    c = _claim_with("a", result("nic", shareID="s1", consumedCapacity={"bw": "1Gi"}))
    state = AllocatedState([c])
    state.add(c)
    nic = DeviceID(DRIVER, "node-1", "nic")
    assert state.consumed_capacity(nic) == {"bw": Quantity.parse("1Gi")}
    state.remove(c.metadata.uid)
    assert not state.is_allocated(nic)
    state.remove("unknown")  # no-op
    assert state.claims() == []


def test_snapshot_keeps_its_state_while_the_original_changes() -> None:
    a = _claim_with("a", result("gpu-0"))
    b = _claim_with("b", result("nic", shareID="s1", consumedCapacity={"bw": "1Gi"}))
    c = _claim_with("c", result("nic", shareID="s2", consumedCapacity={"bw": "2Gi"}))
    state = AllocatedState([a, b])
    snapshot = state.copy()
    state.remove(a.metadata.uid)
    state.add(c)
    state.add(_claim_with("d", result("gpu-0")))
    gpu0 = DeviceID(DRIVER, "node-1", "gpu-0")
    nic = DeviceID(DRIVER, "node-1", "nic")
    assert snapshot.claims() == [a.metadata.uid, b.metadata.uid]
    assert snapshot.dedicated[gpu0] == {a.metadata.uid}
    assert snapshot.consumed_capacity(nic) == {"bw": Quantity.parse("1Gi")}
    assert state.consumed_capacity(nic) == {"bw": Quantity.parse("3Gi")}
    snapshot.remove(b.metadata.uid)  # and the other way round
    assert state.consumed_capacity(nic) == {"bw": Quantity.parse("3Gi")}


def test_conflicts_reports_double_use_of_a_dedicated_device() -> None:
    state = AllocatedState([_claim_with("a", result("gpu-0"))])
    other = _claim_with("b", result("gpu-0"))
    conflicts = state.conflicts(other)
    assert len(conflicts) == 1
    assert conflicts[0].device == DeviceID(DRIVER, "node-1", "gpu-0")
    assert conflicts[0].holders == ("default/a",)
    assert "allocated exclusively" in str(conflicts[0])


def test_conflicts_ignores_the_claim_itself_and_admin_access() -> None:
    mine = _claim_with("a", result("gpu-0"))
    state = AllocatedState([mine])
    assert state.conflicts(mine) == []
    admin = _claim_with("b", result("gpu-0", adminAccess=True))
    assert state.conflicts(admin) == []


def test_conflicts_checks_shared_capacity() -> None:
    state = AllocatedState(
        [_claim_with("a", result("nic", shareID="s1", consumedCapacity={"bw": "3Gi"}))]
    )
    more = _claim_with("b", result("nic", shareID="s2", consumedCapacity={"bw": "2Gi"}))
    nic = DeviceID(DRIVER, "node-1", "nic")
    assert state.conflicts(more, {nic: {"bw": Quantity.parse("8Gi")}}) == []
    conflicts = state.conflicts(more, {nic: {"bw": Quantity.parse("4Gi")}})
    assert ["capacity bw would be exceeded" in str(c) for c in conflicts] == [True]
    same_share = _claim_with("c", result("nic", shareID="s1", consumedCapacity={"bw": "1Gi"}))
    assert "already in use" in str(state.conflicts(same_share)[0])


def test_conflicts_dedicated_use_of_a_shared_device() -> None:
    state = AllocatedState([_claim_with("a", result("nic", shareID="s1"))])
    dedicated = _claim_with("b", result("nic"))
    assert "shared by other claims" in str(state.conflicts(dedicated)[0])


# --------------------------------------------------------------------------- explanations


def test_explanation_counts_rejections_per_reason() -> None:
    slices = [
        rslice(
            "s",
            [
                device("a", {"model": {"string": "x"}}),
                device("b", {"model": {"string": "y"}}),
                device(
                    "c", {"model": {"string": "y"}}, taints=[{"key": "k", "effect": "NoSchedule"}]
                ),
                device("d", {"model": {"string": "y"}}),
            ],
        )
    ]
    a = _allocator(slices, [allocated("o", result("d"))])
    claims = _claims(
        claim("c", req("r", "gpu", 'device.attributes["gpu.example.com"].model == "y"', count=2))
    )
    assert a.allocate(NODE, claims) is None
    ex = explain(a, NODE, claims)
    r = ex.claims[0].requests[0]
    assert (r.considered, r.suitable) == (4, 1)
    assert {k: v for k, v in r.rejected.items() if v} == {
        "request_selector": 1,
        "taint": 1,
        "in_use": 1,
    }
    text = render(ex)
    assert "1 of 4 device(s) suitable" in text
    assert "1 tainted" in text and "1 already allocated" in text


def test_explanation_lists_incomplete_and_invalid_pools_and_counters() -> None:
    slices = [
        rslice("inc", gpus(1, "i"), pool="inc", count=2),
        rslice("s1", gpus(1), pool="bad", count=2),
        rslice("s2", gpus(1), pool="bad", count=2),
        counter_slice("cs", {"m": {"mem": "1"}}, pool="part", count=2),
        rslice("p", [device("p0", consumesCounters=consumes("m", mem="1"))], pool="part", count=2),
    ]
    a = _allocator(slices, [allocated("o", result("p0", pool="part"))])
    ex = explain(a, NODE, _claims(claim("c", req())))
    assert ex.incomplete_pools == [f"{DRIVER}/inc"]
    assert ex.invalid_pools == {f"{DRIVER}/bad": "duplicate device name gpu-0"}
    assert ex.claims[0].requests[0].rejected["in_use"] == 1
    assert "incomplete" in render(ex) and "invalid" in render(ex)


def test_explanation_of_an_unknown_class() -> None:
    a = _allocator([rslice("s", gpus(1))])
    ex = explain(a, NODE, _claims(claim("c", req(cls="nope"))))
    assert "does not exist" in ex.claims[0].requests[0].error
    assert ex.to_dict()["claims"][0]["requests"][0]["error"]


def test_explanation_blames_constraints() -> None:
    slices = [
        rslice(
            "s", [device("a", {"numa": {"int": 0}}), device("b", {"numa": {"int": 1}}), device("c")]
        )
    ]
    a = _allocator(slices)
    claims = _claims(claim("c", req(count=2), constraints=[match(f"{DRIVER}/numa")]))
    assert a.allocate(NODE, claims) is None
    r = explain(a, NODE, claims).claims[0].requests[0]
    assert r.rejected["constraint"] == 1
    assert r.suitable == 2
    assert r.constraint_notes == [
        f"matchAttribute {DRIVER}/numa: at most 1 suitable device(s) share a value, 2 needed"
    ]
    assert "constraint: matchAttribute" in render(explain(a, NODE, claims))


def test_guarded_selectors_evaluated_ahead_are_answered_from_the_cache(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from drakit.allocator.cel import sandbox  # noqa: PLC0415

    a = _allocator([rslice("n1", gpus(3), node="node-1")])
    selector = f'cel.bind(i, device.attributes["{DRIVER}"].index, i == 2)'
    claims = _claims(claim("c", req("r", "gpu", selector)))
    a.evaluate_guarded_selectors(claims)

    def no_more_children(*_: Any, **__: Any) -> Any:
        raise AssertionError("a guarded selector was evaluated again")

    monkeypatch.setattr(sandbox, "run_guarded", no_more_children)
    results = a.allocate(NODE, claims)
    assert results is not None
    assert [r.device for r in results[0].devices.results] == ["gpu-2"]


def test_ahead_evaluation_leaves_invalid_claims_to_allocate() -> None:
    a = _allocator([rslice("n1", gpus(1), node="node-1")])
    claims = _claims(claim("c", req("r", "missing-class", "cel.bind(x, 1, x == 1)")))
    a.evaluate_guarded_selectors(claims)  # no error here
    with pytest.raises(AllocationError, match="missing-class"):
        a.allocate(NODE, claims)
