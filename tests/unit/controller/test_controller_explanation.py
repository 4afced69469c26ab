"""The unschedulable message sums the allocator's explanations over the tried nodes."""

from __future__ import annotations

from drakit.allocator.allocate import Allocator
from drakit.allocator.allocated import AllocatedState
from drakit.allocator.inventory import Inventory
from drakit.allocator.model import (
    DeviceClass,
    Node,
    ResourceClaim,
    ResourceSlice,
    with_api_defaults,
)
from drakit.controller.explanation import summarise


def slice_for(node: str) -> ResourceSlice:
    return ResourceSlice.from_dict({
        "metadata": {"name": node},
        "spec": {"driver": "d.example.com", "nodeName": node,
                 "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": "dev-0"}]},
    })  # fmt: skip


def claim(name: str, device: str | None = None, node: str = "n1") -> ResourceClaim:
    data: dict = {
        "metadata": {"name": name, "namespace": "ns", "uid": name},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "c"}}]}},
    }
    if device:
        result = {"request": "gpu", "driver": "d.example.com", "pool": node, "device": device}
        data["status"] = {"allocation": {"devices": {"results": [result]}}}
    return with_api_defaults(ResourceClaim.from_dict(data))


def test_message_counts_devices_in_use_over_all_tried_nodes():
    nodes = ["n1", "n2"]
    state = AllocatedState([claim("old1", "dev-0", "n1"), claim("old2", "dev-0", "n2")])
    device_class = DeviceClass.from_dict({"metadata": {"name": "c"}, "spec": {}})
    allocator = Allocator(Inventory([slice_for(n) for n in nodes]), [device_class], state)
    text = summarise(allocator, [Node.named(n) for n in nodes], [claim("new")])
    assert text.startswith("claim ns/new request gpu (class c) wants")
    assert "0 of 2 device(s) on 2 node(s) suitable" in text
    assert "2 already allocated" in text


def test_message_names_what_two_claims_that_fit_alone_compete_for():
    # One device on n1: each claim fits alone, not both; the message said only that
    # "the claim's constraints or other requests and claims compete".
    device_class = DeviceClass.from_dict({"metadata": {"name": "c"}, "spec": {}})
    allocator = Allocator(Inventory([slice_for("n1")]), [device_class], AllocatedState([]))
    text = summarise(allocator, [Node.named("n1")], [claim("a"), claim("b")])
    assert text.endswith(
        "; enough suitable devices on its own, but not together with the others. "
        "together on node n1: request gpu of claim ns/a and request gpu of claim ns/b want 2 "
        "device(s) together, and only 1 suit any of them: d.example.com/n1/dev-0"
    )
