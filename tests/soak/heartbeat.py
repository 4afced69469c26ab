"""Heartbeats for the simulated nodes while kube-controller-manager's node-lifecycle
controller runs (it does with ``--real-node``: ``ClusterConfig(real_nodes=True)``).

The node-lifecycle controller marks a node whose Lease in ``kube-node-lease`` was not
renewed for 40 s as unreachable and taints it; the kubelet harness renews no Lease, so
without this thread kube-scheduler would stop placing pods on the simulated nodes a minute
into the soak. :class:`NodeHeartbeat` does what a kubelet does for its node: it renews the
node's Lease every few seconds and sets the Ready condition back to True when the
controller marked it Unknown (after an apiserver outage longer than the grace period, for
example); the controller then lifts its taints again.
"""

from __future__ import annotations

import datetime
import threading
from contextlib import suppress
from typing import Any

from drakit.kubeapi.errors import ApiError, NotFound
from drakit.kubeapi.resources import LEASES, NODES, PatchType, Resource

LEASE_NAMESPACE = "kube-node-lease"
LEASE_SECONDS = 40
INTERVAL = 5.0


def _micro_now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class NodeHeartbeat:
    """Renews the Lease of each node in :attr:`names` every ``interval`` seconds on a
    thread of its own; API errors (faults) are ignored: the next beat tries again."""

    def __init__(self, client: Any, interval: float = INTERVAL) -> None:
        self.leases = Resource(client, LEASES)
        self.nodes = Resource(client, NODES)
        self.interval = interval
        self.names: list[str] = []
        self.beats = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="heartbeat", daemon=True)

    def add(self, name: str) -> None:
        """Keep ``name`` alive from now on (and at once)."""
        self.names.append(name)
        self.beat(name)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=30)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            for name in list(self.names):
                self.beat(name)

    def beat(self, name: str) -> None:
        with suppress(ApiError, OSError):
            self._renew(name)
            self._keep_ready(name)
            self.beats += 1

    def _renew(self, name: str) -> None:
        try:
            lease = self.leases.get(name, LEASE_NAMESPACE)
        except NotFound:
            body = {
                "metadata": {"name": name, "namespace": LEASE_NAMESPACE},
                "spec": {
                    "holderIdentity": name,
                    "leaseDurationSeconds": LEASE_SECONDS,
                    "renewTime": _micro_now(),
                },
            }
            self.leases.create(body, LEASE_NAMESPACE)
            return
        lease["spec"]["renewTime"] = _micro_now()
        self.leases.update(lease)

    def _keep_ready(self, name: str) -> None:
        node = self.nodes.get(name)
        conditions = (node.get("status") or {}).get("conditions") or []
        ready: dict[str, Any] = next((c for c in conditions if c.get("type") == "Ready"), {})
        if ready.get("status") == "True":
            return
        now = _micro_now().split(".")[0] + "Z"
        condition = {
            "type": "Ready",
            "status": "True",
            "reason": "KubeletReady",
            "message": "simulated node (drakit kubelet harness), heartbeat by the soak",
            "lastHeartbeatTime": now,
            "lastTransitionTime": now,
        }
        others = [c for c in conditions if c.get("type") != "Ready"]
        self.nodes.patch_status(
            node, {"status": {"conditions": [*others, condition]}}, patch_type=PatchType.MERGE
        )
