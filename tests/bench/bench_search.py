"""Allocator search: drakit against the Kubernetes 1.37 reference on search-heavy scenarios.

Each scenario of :func:`search_scenarios.search_heavy_scenario` (claims that do not fit,
or fit late, on one small node: the exhaustive search is the work) runs as a one-pod,
one-node workload through ``dra-oracle -bench`` (Go, k8s.io/dynamic-resource-allocation
v0.37.2) and through the same loop in Python (``bench_allocator``), in this one run, Go
first. Only ``Allocate`` calls are timed; each side's figure is the median of its passes,
and the two must place the pod alike (or both not at all). The row's figure is the median
over the scenarios of the per-scenario ratio python/go (target: at most 1.0x).

    .venv/bin/python tests/bench/bench_search.py [--scenarios N] [--runs N] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

# siblings: tests/ is not a package
import bench_allocator
import search_scenarios

Obj = dict[str, Any]

TARGET_RATIO = 1.0


def workload(scenario: Obj) -> Obj:
    """The scenario as a ``-bench`` workload: its claims are the one pod's claims, its
    node the only node."""
    return {
        "slices": scenario["slices"],
        "classes": scenario["classes"],
        "allocated": scenario.get("allocated", []),
        "features": scenario["features"],
        "nodes": [scenario["node"]],
        "claimTemplates": scenario["claims"],
        "pods": 1,
        "feasibleNodes": 1,
    }


def bench_scenario(oracle: Path, seed: int, runs: int) -> Obj:
    kind, scenario = search_scenarios.search_heavy_scenario(seed)
    load = workload(scenario)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "workload.json"
        path.write_text(json.dumps(load))
        go = bench_allocator.run_go_bench(oracle, path, runs)
    python = bench_allocator.run_python_bench(load, runs)
    go_seconds, py_seconds = go["medianAllocateSeconds"], python["medianAllocateSeconds"]
    return {
        "seed": seed,
        "kind": kind,
        "scheduled": python["scheduled"],
        "goSeconds": go_seconds,
        "pythonSeconds": py_seconds,
        "ratio": py_seconds / go_seconds if go_seconds else 0.0,
        "samePlacements": go["placementSha256"] == python["placementSha256"],
    }


def report(rows: Sequence[Obj]) -> float:
    for r in rows:
        same = "" if r["samePlacements"] else "  PLACEMENTS DIFFER"
        print(
            f"  seed {r['seed']:>3} {r['kind']:<16} {'fits' if r['scheduled'] else 'no fit':<6}"
            f" go {r['goSeconds']:8.4f}s  python {r['pythonSeconds']:8.4f}s"
            f"  ratio {r['ratio']:6.3f}x{same}"
        )
    ratio: float = statistics.median(r["ratio"] for r in rows)
    verdict = "within" if ratio <= TARGET_RATIO else "OUTSIDE"
    print(
        f"search-heavy: median ratio python/go (Allocate time) over {len(rows)} scenarios: "
        f"{ratio:.3f}x ({verdict} the {TARGET_RATIO}x target); go total "
        f"{sum(r['goSeconds'] for r in rows):.2f}s, python total "
        f"{sum(r['pythonSeconds'] for r in rows):.2f}s"
    )
    return ratio


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", type=int, default=12, help="seeds 0..N-1")
    parser.add_argument("--runs", type=int, default=3, help="passes per implementation")
    parser.add_argument("--json", type=Path, help="also write the rows to this file")
    args = parser.parse_args(argv)
    oracle = bench_allocator.build_oracle()
    rows = [bench_scenario(oracle, seed, args.runs) for seed in range(args.scenarios)]
    report(rows)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0 if all(r["samePlacements"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
