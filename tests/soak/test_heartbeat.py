"""The simulated nodes' heartbeat (``--real-node``) against a real apiserver."""

from __future__ import annotations

import uuid
from contextlib import suppress
from typing import Any

from drakit.kubeapi.errors import NotFound
from drakit.kubeapi.resources import LEASES, NODES, PatchType, Resource
from drakit.localcluster.stack import create_ready_node
from soak.heartbeat import LEASE_NAMESPACE, NodeHeartbeat


def _ready(node: dict[str, Any]) -> str:
    conditions = node["status"]["conditions"]
    return str(next(c["status"] for c in conditions if c["type"] == "Ready"))


def test_heartbeat_renews_the_node_lease_and_sets_an_unknown_ready_condition_back(
    api: Any,
) -> None:
    name = f"hb-{uuid.uuid4().hex[:8]}"
    nodes, leases = Resource(api, NODES), Resource(api, LEASES)
    create_ready_node(api, name)
    try:
        heartbeat = NodeHeartbeat(api)
        heartbeat.add(name)
        first = leases.get(name, LEASE_NAMESPACE)["spec"]["renewTime"]
        node = nodes.get(name)
        unknown = {"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown"}
        nodes.patch_status(node, {"status": {"conditions": [unknown]}}, patch_type=PatchType.MERGE)
        assert _ready(nodes.get(name)) == "Unknown"

        heartbeat.beat(name)

        assert _ready(nodes.get(name)) == "True"
        assert leases.get(name, LEASE_NAMESPACE)["spec"]["renewTime"] > first
        assert heartbeat.beats == 2
    finally:
        with suppress(NotFound):
            nodes.delete(name)
        with suppress(NotFound):
            leases.delete(name, LEASE_NAMESPACE)
