"""Memory of the NoExecute budget's watch cache: summaries against whole ResourceSlices.

    .venv/bin/python hack/measure_health_cache.py [SLICES]

Builds SLICES (default 1,000) slices of one node each, eight devices of the example
backend per slice, as the apiserver would send them; measures (tracemalloc) what the
decoded slices take, what their summaries (drakit.node_plugin.health.census.summarize)
take, and the time of one census over the summaries.
"""

from __future__ import annotations

import copy
import json
import sys
import time
import tracemalloc
from typing import Any

from drakit.node_plugin.backends.base import BackendContext
from drakit.node_plugin.backends.example import ExampleBackend
from drakit.node_plugin.health.census import census, summarize

DRIVER = "gpu.example.com"


def _slice(i: int, devices: list[dict[str, Any]]) -> dict[str, Any]:
    node = f"node-{i}"
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {
            "name": f"{node}-{DRIVER}-abcde",
            "resourceVersion": str(1000 + i),
            "uid": "0" * 36,
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Node", "name": node, "uid": "1" * 36,
                 "controller": True}
            ],
        },
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": copy.deepcopy(devices),
        },
    }  # fmt: skip


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    backend = ExampleBackend(BackendContext(driver_name=DRIVER, node_name="n", config={"gpus": 8}))
    devices = [d.to_dict() for d in backend.discover()[0].devices]
    raw = [json.dumps(_slice(i, devices)).encode() for i in range(count)]
    tracemalloc.start()
    full = [json.loads(b) for b in raw]
    full_bytes = tracemalloc.get_traced_memory()[0]
    del full
    tracemalloc.stop()
    tracemalloc.start()
    summaries = [
        summarize(json.loads(b), taint_key=f"{DRIVER}/unhealthy", node_label="x") for b in raw
    ]
    summary_bytes = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    start = time.perf_counter()
    census(summaries)
    census_ms = (time.perf_counter() - start) * 1000
    print(f"{count} slices of 8 devices, {len(raw[0])} bytes of JSON each")
    print(
        f"decoded slices: {full_bytes / 2**20:.1f} MiB ({full_bytes / count / 1024:.1f} KiB each)"
    )
    print(f"summaries:      {summary_bytes / 2**20:.2f} MiB ({summary_bytes / count:.0f} B each)")
    print(f"one census:     {census_ms:.1f} ms")


if __name__ == "__main__":
    main()
