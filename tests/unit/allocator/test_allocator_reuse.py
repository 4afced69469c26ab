"""What the allocator keeps between calls and between allocators (counters left per pool,
results per device, selectors per node name) never leaks one state's or one request's
answer into another's."""

from __future__ import annotations

from typing import Any

import pytest
from alloc_builders import (
    NODE,
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
    AllocationResult,
    Allocator,
    DeviceClass,
    Inventory,
    Node,
    ResourceClaim,
    ResourceSlice,
    with_api_defaults,
)
from drakit.allocator.features import Features

CLASSES = [DeviceClass.from_dict(dclass())]


def _claims(*raw: dict[str, Any]) -> list[ResourceClaim]:
    return [with_api_defaults(ResourceClaim.from_dict(c)) for c in raw]


def _state(*raw: dict[str, Any]) -> AllocatedState:
    return AllocatedState([ResourceClaim.from_dict(c) for c in raw])


def _devices(results: list[AllocationResult] | None) -> list[str]:
    assert results is not None
    return [r.device for a in results for r in a.devices.results]


def _partitioned_gpu() -> Inventory:
    """One GPU of 2 memory units: two halves of one unit each, or the whole of two."""
    slices = [
        counter_slice("counters", {"gpu": {"memory": "2"}}, pool="p", count=2),
        rslice(
            "devices",
            [
                device("whole", consumesCounters=consumes("gpu", memory="2")),
                device("half-0", consumesCounters=consumes("gpu", memory="1")),
                device("half-1", consumesCounters=consumes("gpu", memory="1")),
            ],
            pool="p",
            count=2,
        ),
    ]
    return Inventory([ResourceSlice.from_dict(s) for s in slices])


def _in_pool(name: str, dev: str) -> dict[str, Any]:
    return allocated(name, result(dev, pool="p"))


def test_counters_left_follow_the_allocated_state_across_allocators() -> None:
    inventory = _partitioned_gpu()
    node = Node.named(NODE)
    one = _claims(claim("c", req()))
    state = _state()
    assert _devices(Allocator(inventory, CLASSES, state).allocate(node, one)) == ["whole"]
    state.add(ResourceClaim.from_dict(_in_pool("held", "half-0")))
    # a later allocator over the changed state must not reuse the counters left before
    assert _devices(Allocator(inventory, CLASSES, state).allocate(node, one)) == ["half-1"]
    state.add(ResourceClaim.from_dict(_in_pool("held-too", "half-1")))
    assert Allocator(inventory, CLASSES, state).allocate(node, one) is None
    state.remove("uid-default-held")
    state.remove("uid-default-held-too")
    assert _devices(Allocator(inventory, CLASSES, state).allocate(node, one)) == ["whole"]


def test_diverging_copies_of_a_state_each_see_their_own_counters() -> None:
    inventory = _partitioned_gpu()
    node = Node.named(NODE)
    one = _claims(claim("c", req()))
    base = _state()
    left, right = base.copy(), base.copy()
    left.add(ResourceClaim.from_dict(_in_pool("on-left", "half-0")))
    right.add(ResourceClaim.from_dict(_in_pool("on-right", "whole")))
    assert left.pool_stamp(("gpu.example.com", "p")) != right.pool_stamp(("gpu.example.com", "p"))
    assert _devices(Allocator(inventory, CLASSES, left).allocate(node, one)) == ["half-1"]
    assert Allocator(inventory, CLASSES, right).allocate(node, one) is None
    assert _devices(Allocator(inventory, CLASSES, left).allocate(node, one)) == ["half-1"]
    assert _devices(Allocator(inventory, CLASSES, base).allocate(node, one)) == ["whole"]


def test_pool_stamp_changes_with_every_change_of_the_pool_only() -> None:
    state = _state()
    pool, other = ("gpu.example.com", "p"), ("gpu.example.com", "q")
    assert state.pool_stamp(pool) == 0
    state.add(ResourceClaim.from_dict(_in_pool("a", "half-0")))
    first = state.pool_stamp(pool)
    assert first != 0
    assert state.pool_stamp(other) == 0
    state.add(ResourceClaim.from_dict(allocated("b", result("x", pool="q"))))
    assert state.pool_stamp(pool) == first
    state.remove("uid-default-a")
    assert state.pool_stamp(pool) not in (0, first)
    assert state.copy().pool_stamp(pool) == state.pool_stamp(pool)


def test_results_on_a_reused_device_name_each_claims_own_request_and_tolerations() -> None:
    inventory = Inventory([ResourceSlice.from_dict(rslice("a", gpus(1)))])
    allocator = Allocator(inventory, CLASSES, AllocatedState())
    node = Node.named(NODE)
    toleration = {"key": "k", "operator": "Exists"}
    plain = allocator.allocate(node, _claims(claim("c1", req("first"))))
    renamed = allocator.allocate(node, _claims(claim("c2", req("second"))))
    tolerant_claim = claim("c3", req("first", tolerations=[toleration]))
    tolerant = allocator.allocate(node, _claims(tolerant_claim))
    admin = allocator.allocate(node, _claims(claim("c4", req("first", adminAccess=True))))
    again = allocator.allocate(node, _claims(claim("c5", req("first"))))
    assert plain is not None and renamed is not None and tolerant is not None
    assert admin is not None and again is not None
    first, second = plain[0].devices.results[0], renamed[0].devices.results[0]
    assert (first.request, second.request) == ("first", "second")
    assert first.device == second.device == "gpu-0"
    assert first.tolerations == ()
    assert [t.key for t in tolerant[0].devices.results[0].tolerations] == ["k"]
    assert admin[0].devices.results[0].admin_access is True
    assert first.admin_access is None
    assert again[0].devices.results[0] == first


def test_results_stay_right_past_the_per_device_bound_of_kept_results() -> None:
    inventory = Inventory([ResourceSlice.from_dict(rslice("a", gpus(1)))])
    allocator = Allocator(inventory, CLASSES, AllocatedState())
    node = Node.named(NODE)
    names = [f"request-{i}" for i in range(40)]
    for name in names * 2:
        results = allocator.allocate(node, _claims(claim(f"c-{name}", req(name))))
        assert results is not None
        assert results[0].devices.results[0].request == name
    entry = inventory.pools_for_node(node).candidates[0]
    assert entry.result_cache is not None
    assert 0 < len(entry.result_cache) <= 16


def test_node_bound_allocations_select_the_node_they_were_made_on() -> None:
    slices = [rslice("a", gpus(1), node="node-a"), rslice("b", gpus(1), node="node-b")]
    inventory = Inventory([ResourceSlice.from_dict(s) for s in slices])
    allocator = Allocator(inventory, CLASSES, AllocatedState())
    claims = _claims(claim("c", req()))
    for name in ("node-a", "node-b", "node-a"):
        results = allocator.allocate(Node.named(name), claims)
        assert results is not None
        selector = results[0].node_selector
        assert selector is not None
        (term,) = selector.node_selector_terms
        assert [(f.key, f.operator, f.values) for f in term.match_fields] == [
            ("metadata.name", "In", (name,))
        ]


def test_a_device_whose_capacity_is_in_use_is_not_taken_whole() -> None:
    shared = device(
        "shared",
        allowMultipleAllocations=True,
        capacity={"memory": {"value": "10"}},
    )
    inventory = Inventory([ResourceSlice.from_dict(rslice("a", [shared]))])
    node = Node.named(NODE)
    one = _claims(claim("c", req()))
    assert _devices(Allocator(inventory, CLASSES, AllocatedState()).allocate(node, one)) == [
        "shared"
    ]
    held = allocated(
        "holder",
        result("shared", shareID="00000000-0000-0000-0000-000000000001",
               consumedCapacity={"memory": "1"}),
    )  # fmt: skip
    assert Allocator(inventory, CLASSES, _state(held)).allocate(node, one) is None
    # and within one call: the second whole request no longer fits once the first took it
    two = _claims(claim("c", req("a"), req("b")))
    assert Allocator(inventory, CLASSES, AllocatedState()).allocate(node, two) is None


def test_a_device_selected_on_one_node_is_not_taken_on_a_node_it_does_not_serve() -> None:
    per_device = rslice(
        "pd",
        [device("a", nodeName="node-a"), device("b", nodeName="node-b")],
        node=None,
        pool="pd",
        perDeviceNodeSelection=True,
    )
    inventory = Inventory([ResourceSlice.from_dict(per_device)])
    allocator = Allocator(inventory, CLASSES, AllocatedState())
    claims = _claims(claim("c", req()))
    # both devices' selector answers are kept after node-b's call
    assert _devices(allocator.allocate(Node.named("node-b"), claims)) == ["b"]
    assert _devices(allocator.allocate(Node.named("node-a"), claims)) == ["a"]
    assert _devices(allocator.allocate(Node.named("node-b"), claims)) == ["b"]


def test_a_device_with_binding_conditions_stays_out_when_the_feature_is_off() -> None:
    gated = rslice("a", [device("gated", bindingConditions=["ready"],
                                bindingFailureConditions=["failed"])])  # fmt: skip
    inventory = Inventory([ResourceSlice.from_dict(gated)])
    claims = _claims(claim("c", req()))
    node = Node.named(NODE)
    on = Allocator(inventory, CLASSES, AllocatedState(), features=Features())
    assert _devices(on.allocate(node, claims)) == ["gated"]  # its selector answer is kept
    off = Features(device_binding_conditions=False)
    assert (
        Allocator(inventory, CLASSES, AllocatedState(), features=off).allocate(node, claims) is None
    )


def test_one_device_bound_to_the_node_of_each_allocation_names_that_node() -> None:
    shared = rslice("net", [device("port", bindsToNode=True)], node=None, pool="net", allNodes=True)
    inventory = Inventory([ResourceSlice.from_dict(shared)])
    allocator = Allocator(inventory, CLASSES, AllocatedState())
    claims = _claims(claim("c", req()))
    seen = []
    for name in ("node-a", "node-b", "node-a"):
        results = allocator.allocate(Node.named(name), claims)
        assert results is not None
        selector = results[0].node_selector
        assert selector is not None
        seen.append(selector.node_selector_terms[0].match_fields[0].values)
        assert [r.device for r in results[0].devices.results] == ["port"]
    assert seen == [("node-a",), ("node-b",), ("node-a",)]


def test_a_search_cancelled_midway_stops() -> None:
    # 64 devices, no two share an index: four of them that match never exist, and the
    # search tries every combination unless it is stopped
    inventory = Inventory([ResourceSlice.from_dict(rslice("a", gpus(64)))])
    allocator = Allocator(inventory, CLASSES, AllocatedState())
    claims = _claims(claim("c", req(count=4), constraints=[match("gpu.example.com/index")]))
    asked = []

    def cancelled() -> bool:
        asked.append(True)
        return len(asked) > 1

    with pytest.raises(AllocationCancelledError):
        allocator.allocate(Node.named(NODE), claims, timeout=None, cancelled=cancelled)
    assert allocator.allocate(Node.named(NODE), claims, timeout=None) is None


def test_a_kept_one_device_allocation_is_reused_only_for_the_same_request_signature() -> None:
    inventory = Inventory([ResourceSlice.from_dict(rslice("a", gpus(1)))])
    node = Node.named(NODE)
    toleration = {"key": "k", "operator": "Exists"}

    def allocate(raw: dict[str, Any]) -> AllocationResult:
        # a new allocator per pod, as a scheduler makes: the device keeps what is reused
        results = Allocator(inventory, CLASSES, AllocatedState()).allocate(node, _claims(raw))
        assert results is not None
        return results[0]

    first = allocate(claim("c1", req("first")))
    second = allocate(claim("c2", req("second")))
    tolerant = allocate(claim("c3", req("first", tolerations=[toleration])))
    admin = allocate(claim("c4", req("first", adminAccess=True)))
    again = allocate(claim("c5", req("first")))
    assert again is first  # same request signature on the same device and node: kept
    assert len({id(a) for a in (first, second, tolerant, admin)}) == 4
    assert [r.request for r in second.devices.results] == ["second"]
    assert [len(r.tolerations) for r in tolerant.devices.results] == [1]
    assert [r.admin_access for r in admin.devices.results] == [True]
    assert [(r.request, r.tolerations, r.admin_access) for r in first.devices.results] == [
        ("first", (), None)
    ]
