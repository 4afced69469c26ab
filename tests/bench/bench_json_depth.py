"""What the depth bound of kubeapi.deepjson costs a decode: a List page of 500 claims.

Each claim is shaped as the apiserver serves one (managedFields with keyed entries, whose
escaped quotes the scan must skip, an allocation, a CEL selector). Medians over ``RUNS`` of
``orjson.loads`` and ``json.loads`` alone, of ``within_depth`` (the scan every decode now
runs first) and of the whole bounded decode; then the same page with one claim 600 levels
deep, which takes the slow, exact path for the whole page.

Run: ``.venv/bin/python tests/bench/bench_json_depth.py``
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import orjson

from drakit.kubeapi.deepjson import depth_safe, within_depth

RUNS = 30
LIST_LEVELS = 2


def claim(i: int) -> dict[str, Any]:
    fields = {"f:metadata": {"f:ownerReferences": {".": {}, 'k:{"uid":"u"}': {}}},
              "f:spec": {"f:devices": {"f:requests": {}}}}  # fmt: skip
    return {
        "metadata": {
            "name": f"c{i}", "namespace": "ns", "uid": "u" * 36, "resourceVersion": "123",
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u",
                                 "controller": True}],
            "managedFields": [{"manager": "m", "operation": "Update", "apiVersion": "v1",
                               "fieldsType": "FieldsV1", "fieldsV1": fields}],
        },
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
            "deviceClassName": "gpu.example.com", "allocationMode": "ExactCount", "count": 1,
            "selectors": [{"cel": {"expression": "device.attributes['x'].y == 1"}}]}}],
            "config": [{"requests": ["gpu"], "opaque": {"driver": "d", "parameters": {
                "sharing": {"strategy": "TimeSlicing"}}}}]}},
        "status": {"allocation": {"devices": {"results": [
            {"request": "gpu", "driver": "d", "pool": "n", "device": "dev-0"}]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": ["n"]}]}]}},
            "reservedFor": [{"resource": "pods", "name": "p", "uid": "u"}]},
    }  # fmt: skip


def median_ms(work: Callable[[], object]) -> float:
    times = []
    for _ in range(RUNS):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def main() -> None:
    items = [claim(i) for i in range(500)]
    page = orjson.dumps({"kind": "List", "metadata": {}, "items": items})
    deep = page[:-2] + b',{"spec":' + b'{"n":' * 600 + b"{}" + b"}" * 601 + b"]}"
    bounded_orjson, bounded_json = depth_safe(orjson.loads), depth_safe(json.loads)
    print(f"List page of 500 claims, {len(page):,} bytes; medians of {RUNS} runs")
    for label, work in (
        ("orjson.loads", lambda: orjson.loads(page)),
        ("json.loads", lambda: json.loads(page)),
        ("within_depth", lambda: within_depth(page, 100 + LIST_LEVELS)),
        ("bounded orjson", lambda: bounded_orjson(page, LIST_LEVELS)),
        ("bounded json", lambda: bounded_json(page, LIST_LEVELS)),
        ("bounded orjson, one claim 600 deep", lambda: bounded_orjson(deep, LIST_LEVELS)),
    ):
        print(f"  {label:36} {median_ms(work):8.2f} ms")


if __name__ == "__main__":
    main()
