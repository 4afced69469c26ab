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
