"""ResourceSlice publisher: time and API writes to publish a pool, apply one change, repair.

Against a real etcd + kube-apiserver v1.37.2 (``drakit.localcluster``), with the plugin's
default client (QPS 50, burst 100). For each size, on a fresh Node:

* **from scratch**: the backend reports the pool; time until the sync that wrote it ended;
* **one change**: one device's attribute changes; time until that sync ended;
* **repair** (1,024 only): every slice of the node is deleted (what the kubelet does at its
  start); time until the apiserver holds the full pool again. This includes the publisher's
  0.5 s ``repair_delay`` that coalesces bursts of events.

Writes are counted by the apiserver (``apiserver_request_total``). Medians over ``RUNS``.
"""

from __future__ import annotations

import re
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from drakit.allocator.model import CounterSet, Device, DeviceAttribute
from drakit.kubeapi.client import load_client
from drakit.kubeapi.resources import NODES, RESOURCE_SLICES, Resource
from drakit.localcluster import ClusterConfig, LocalCluster
from drakit.node_plugin.publisher import Publisher

DRIVER = "gpu.bench.drakit.dev"
SIZES = (128, 1024, 4096)
RUNS = 5
_REQUEST = re.compile(r"^apiserver_request_total\{([^}]*)\} (\S+)$")


@dataclass
class Backend:
    pools: list[Any] = field(default_factory=list)
    listeners: list[Callable[[], None]] = field(default_factory=list)

    def discover(self) -> tuple[Any, ...]:
        return tuple(self.pools)

    def subscribe(self, on_change: Callable[[], None]) -> None:
        self.listeners.append(on_change)

    def set(self, pools: list[Any]) -> None:
        self.pools = pools
        for listener in self.listeners:
            listener()


@dataclass(frozen=True)
class Pool:
    name: str
    devices: tuple[Device, ...]
    shared_counters: tuple[CounterSet, ...] = ()


def devices(count: int) -> tuple[Device, ...]:
    return tuple(
        Device.from_dict(
            {
                "name": f"gpu-{i}",
                "attributes": {
                    "model": {"string": "a100"},
                    "index": {"int": i},
                    "uuid": {"string": f"GPU-{uuid.UUID(int=i)}"},
                },
                "capacity": {"memory": {"value": "80Gi"}},
            }
        )
        for i in range(count)
    )


def slice_writes(cluster: LocalCluster) -> int:
    total = 0
    for line in cluster.apiserver_metrics().splitlines():
        match = _REQUEST.match(line)
        if not match:
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', match[1]))
        if labels.get("resource") == "resourceslices" and labels.get("verb") in (
            "POST",
            "PUT",
            "PATCH",
            "DELETE",
        ):
            total += int(float(match[2]))
    return total


def changed_syncs(publisher: Publisher) -> float:
    return float(publisher.metrics.syncs_total.labels("changed").get())


def wait_for(condition: Callable[[], bool], timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("benchmark condition not reached")
        time.sleep(0.002)


def make_node(api: Any, name: str) -> None:
    Resource(api, NODES).create({"metadata": {"name": name}})


@dataclass
class Sample:
    scratch_s: float
    scratch_writes: int
    change_s: float
    change_writes: int
    repair_s: float | None = None
    repair_writes: int | None = None


def one_run(cluster: LocalCluster, api: Any, size: int, repair: bool) -> Sample:
    node = f"bench-{uuid.uuid4().hex[:8]}"
    make_node(api, node)
    slices = Resource(api, RESOURCE_SLICES)
    backend = Backend()
    publisher = Publisher(api, DRIVER, node, backend)
    publisher.start()
    try:
        if not publisher.wait_ready(60):
            raise TimeoutError("publisher not ready")
        pool_devices = devices(size)

        before, writes0 = changed_syncs(publisher), slice_writes(cluster)
        begin = time.monotonic()
        backend.set([Pool(node, pool_devices)])
        wait_for(lambda: changed_syncs(publisher) > before)
        scratch = time.monotonic() - begin
        time.sleep(1.0)  # let the echo syncs of our own writes pass (they write nothing)
        scratch_writes = slice_writes(cluster) - writes0

        changed = list(pool_devices)
        changed[size // 2] = replace(
            changed[size // 2],
            attributes={**changed[size // 2].attributes, "model": DeviceAttribute.of("h100")},
        )
        before, writes0 = changed_syncs(publisher), slice_writes(cluster)
        begin = time.monotonic()
        backend.set([Pool(node, tuple(changed))])
        wait_for(lambda: changed_syncs(publisher) > before)
        change = time.monotonic() - begin
        time.sleep(1.0)
        sample = Sample(scratch, scratch_writes, change, slice_writes(cluster) - writes0)

        if repair:
            selector = f"spec.driver={DRIVER},spec.nodeName={node}"
            existing = slices.list(field_selector=selector).items
            writes0 = slice_writes(cluster)
            begin = time.monotonic()
            for s in existing:
                slices.delete(s["metadata"]["name"])

            def restored() -> bool:
                items = slices.list(field_selector=selector).items
                return sum(len(s["spec"].get("devices") or ()) for s in items) == size

            wait_for(restored)
            sample.repair_s = time.monotonic() - begin
            time.sleep(1.0)
            sample.repair_writes = slice_writes(cluster) - writes0 - len(existing)
        return sample
    finally:
        publisher.stop()
        for s in slices.list(field_selector=f"spec.driver={DRIVER},spec.nodeName={node}").items:
            slices.delete(s["metadata"]["name"])
        Resource(api, NODES).delete(node)


def main() -> int:
    with LocalCluster(ClusterConfig(build_missing=False)) as cluster:
        api = load_client(cluster.kubeconfig)
        print(f"publisher: median of {RUNS} runs, real kube-apiserver v1.37.2, client QPS 50/100")
        print(
            f"{'devices':>8} {'slices':>6} | {'scratch':>9} {'writes':>6} | "
            f"{'1 change':>9} {'writes':>6} | {'repair all':>10} {'writes':>6}"
        )
        for size in SIZES:
            samples = [one_run(cluster, api, size, repair=size == 1024) for _ in range(RUNS)]
            repair = [s.repair_s for s in samples if s.repair_s is not None]
            repair_writes = [s.repair_writes for s in samples if s.repair_writes is not None]
            print(
                f"{size:>8} {-(-size // 128):>6} | "
                f"{statistics.median(s.scratch_s for s in samples) * 1000:>7.0f}ms "
                f"{statistics.median(s.scratch_writes for s in samples):>6.0f} | "
                f"{statistics.median(s.change_s for s in samples) * 1000:>7.0f}ms "
                f"{statistics.median(s.change_writes for s in samples):>6.0f} | "
                + (
                    f"{statistics.median(repair) * 1000:>8.0f}ms "
                    f"{statistics.median(repair_writes):>6.0f}"
                    if repair
                    else f"{'-':>10} {'-':>6}"
                )
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
