"""The scale workload shared by the 1,000-pod test and ``tests/bench/bench_scheduling.py``:
simulated nodes (fake Ready Node objects) with ResourceSlices published directly as test
data, pods with a one-device template, and an independent checker of the outcome.

The checker does not use drakit's allocator: it re-derives every rule from the API objects.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from controller_harness import Objects

__all__ = ["build_nodes", "check_allocations", "create_pods", "wait_all_bound"]


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


def wait_all_bound(
    objects: Objects,
    namespace: str,
    count: int,
    *,
    timeout: float,
    poll: float = 0.5,
    progress: Callable[[int], None] | None = None,
) -> float:
    """Seconds until ``count`` pods in ``namespace`` are bound; raises TimeoutError."""
    began = time.monotonic()
    while True:
        pods = objects.pods.list(namespace).items
        done = sum(1 for p in pods if p["spec"].get("nodeName"))
        if progress is not None:
            progress(done)
        if done >= count:
            return time.monotonic() - began
        if time.monotonic() - began > timeout:
            raise TimeoutError(f"{done}/{count} pods bound after {timeout:.0f}s")
        time.sleep(poll)


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
