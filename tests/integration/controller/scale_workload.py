"""The scale workload shared by the 1,000-pod test and the scheduling benchmarks
(``tests/bench/bench_scheduling.py``, ``tests/bench/bench_scale.py``): simulated nodes (fake
Ready Node objects) with ResourceSlices published directly as test data, pods with a
one-device template, a watch that records when each pod is bound, and an independent checker
of the outcome.

The checker does not use drakit's allocator: it re-derives every rule from the API objects.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from controller_harness import Objects

from drakit.kubeapi.errors import ApiError
from drakit.kubeapi.lightclient import load_light_client

__all__ = ["BoundWatch", "build_nodes", "check_allocations", "create_pods", "load_generator_client"]

# Pods with a node: the apiserver filters the watch, so a pod's earlier updates (created,
# claim statuses) never reach the benchmark and its binding arrives as one ADDED event.
_BOUND = "spec.nodeName!="


def load_generator_client(kubeconfig: str) -> Any:
    """The benchmark's own client (nodes, pods, the bound-pod watch, the checker): no rate
    limit, a connection per creating thread, orjson. It is the load generator, sharing two
    cores with what it measures: the full kubernetes client spent about 1 ms of CPU per
    request more."""
    return load_light_client(kubeconfig, qps=0, pool_size=32, fast_json=True)


def build_nodes(objects: Objects, count: int, devices: int, prefix: str) -> list[str]:
    names = [f"{prefix}-{i:04d}" for i in range(count)]
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda n: objects.node(n, devices=devices), names))
    return names


def create_pods(
    objects: Objects, namespace: str, count: int, template: str, scheduler: str
) -> list[dict[str, Any]]:
    with ThreadPoolExecutor(16) as pool:
        return list(
            pool.map(
                lambda i: objects.pod(
                    namespace, f"p{i:04d}", templates={"gpu": template}, scheduler=scheduler
                ),
                range(count),
            )
        )


class BoundWatch:
    """The :func:`time.monotonic` time the benchmark first sees each pod of ``namespace`` bound.

    One watch of bound pods, opened (after a list) on entry, so the time of the last binding
    is known to the event, not to a polling interval: polling with a LIST of every pod also
    put the cost of coding thousands of pods on the machine being measured, a cost that
    slowed the faster side most. A watch the apiserver ends or refuses (an expired
    resourceVersion) is reopened after a new list; a pod first seen bound in a list counts
    from then.
    """

    def __init__(self, objects: Objects, namespace: str) -> None:
        self.bound: dict[str, float] = {}
        self._objects = objects
        self._namespace = namespace
        self._stop = threading.Event()
        self._changed = threading.Condition()
        self._listed = False
        self._thread = threading.Thread(target=self._run, name="bound-watch", daemon=True)

    def __enter__(self) -> BoundWatch:
        self._thread.start()
        with self._changed:
            if not self._changed.wait_for(lambda: self._listed, timeout=30):
                raise TimeoutError("the bound-pod watch did not start within 30s")
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()

    def wait(self, count: int, timeout: float) -> float:
        """The time the ``count``-th pod was seen bound; raises TimeoutError after ``timeout``."""
        with self._changed:
            if not self._changed.wait_for(lambda: len(self.bound) >= count, timeout=timeout):
                raise TimeoutError(f"{len(self.bound)}/{count} pods bound after {timeout:.0f}s")
            return max(self.bound.values())

    def _see(self, pods: list[dict[str, Any]]) -> None:
        now = time.monotonic()
        with self._changed:
            for pod in pods:
                name = (pod.get("metadata") or {}).get("name", "")
                if (pod.get("spec") or {}).get("nodeName") and name not in self.bound:
                    self.bound[name] = now
            self._listed = True
            self._changed.notify_all()

    def _run(self) -> None:
        while not self._stop.is_set():
            listed = self._objects.pods.list(self._namespace, field_selector=_BOUND)
            self._see(listed.items)
            rv = listed.resource_version
            try:
                while not self._stop.is_set():
                    with self._objects.pods.watch(self._namespace, resource_version=rv,
                                                  field_selector=_BOUND,
                                                  timeout_seconds=60) as stream:  # fmt: skip
                        for event in stream:
                            rv = event.resource_version or rv
                            self._see([event.object])
                            if self._stop.is_set():
                                return
            except ApiError:
                continue  # expired or refused: list again


def check_allocations(objects: Objects, namespace: str) -> list[str]:
    """Every problem found (empty list: all good): a device in two claims, a result that does
    not satisfy its claim, a pod not bound where its devices are, a missing reservation."""
    problems: list[str] = []
    slices = objects.slices.list().items
    devices: dict[tuple[str, str, str], str] = {}  # (driver, pool, device) -> node
    for s in slices:
        spec = s["spec"]
        for d in spec.get("devices") or ():
            devices[(spec["driver"], spec["pool"]["name"], d["name"])] = spec.get("nodeName", "")
    pods = {p["metadata"]["name"]: p for p in objects.pods.list(namespace).items}
    holders: dict[tuple[str, str, str], list[str]] = defaultdict(list)
    for claim in objects.claims.list(namespace).items:
        name = claim["metadata"]["name"]
        owner = claim["metadata"]["ownerReferences"][0]["name"]
        pod = pods.get(owner)
        allocation = (claim.get("status") or {}).get("allocation")
        if pod is None or allocation is None:
            problems.append(f"claim {name}: pod {owner} missing or claim not allocated")
            continue
        results = allocation["devices"]["results"]
        requests = claim["spec"]["devices"]["requests"]
        for request in requests:
            wanted = request["exactly"].get("count", 1)
            got = [r for r in results if r["request"] == request["name"]]
            if len(got) != wanted:
                problems.append(f"claim {name}: request {request['name']} got {len(got)}")
        node = pod["spec"].get("nodeName")
        for result in results:
            device = (result["driver"], result["pool"], result["device"])
            holders[device].append(name)
            if result["driver"] != objects.driver:
                problems.append(f"claim {name}: device of driver {result['driver']}")
            if device not in devices:
                problems.append(f"claim {name}: device {device} is not published")
            elif devices[device] != node:
                problems.append(f"claim {name}: device on {devices[device]}, pod on {node}")
        selector_nodes = [
            value
            for term in (allocation.get("nodeSelector") or {}).get("nodeSelectorTerms") or ()
            for field in term.get("matchFields") or ()
            if field["key"] == "metadata.name"
            for value in field["values"]
        ]
        if selector_nodes != [node]:
            problems.append(f"claim {name}: node selector {selector_nodes}, pod on {node}")
        reserved = [r["uid"] for r in claim["status"].get("reservedFor") or ()]
        if reserved != [pod["metadata"]["uid"]]:
            problems.append(f"claim {name}: reservedFor {reserved}")
    for device, claims in holders.items():
        if len(claims) > 1:
            problems.append(f"device {device} is in {len(claims)} claims: {claims}")
    return problems
