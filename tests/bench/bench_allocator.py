"""Allocator throughput: drakit's Python allocator against the Kubernetes 1.37 reference.

For each workload shape of :func:`scenarios.bench_workload` (scheduler_perf-like: 500
nodes with eight devices each; one-device claims from a template with a class and a CEL
selector; four requests tied by a ``matchAttribute`` constraint; partitionable devices
sharing a counter), the same scheduler-like loop runs through ``dra-oracle -bench`` (Go,
k8s.io/dynamic-resource-allocation v0.37.2) and through the Python allocator, in this
one run, Go and Python passes alternating. Only ``Allocate`` calls are timed; figures are
medians over several passes.
Both must place every pod on the same node with the same devices (a digest of all
placements is compared), so the two figures measure the same work.

    .venv/bin/python tests/bench/bench_allocator.py [--shape NAME] [--runs N] [--profile]

The loop and the report format are specified in ``hack/oracle/README.md`` ("Workload").
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import json
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))

import scenarios  # noqa: E402  (a sibling module; tests/ is not a package)

from drakit.allocator import (  # noqa: E402
    AllocationResult,
    DeviceClass,
    Node,
    ResourceClaim,
    ResourceSlice,
    with_api_defaults,
)
from drakit.allocator.allocate import Allocator, NodeUnsuitableError  # noqa: E402
from drakit.allocator.allocated import AllocatedState  # noqa: E402
from drakit.allocator.features import Features  # noqa: E402
from drakit.allocator.inventory import Inventory  # noqa: E402

Obj = dict[str, Any]

# Sizes per shape: the cluster ends about half full, as in scheduler_perf's "half" cases.
SIZES: dict[str, Obj] = {
    "class-selector": {"nodes": 500, "devices_per_node": 8, "pods": 2000, "feasible_nodes": 5},
    "match-attribute": {"nodes": 500, "devices_per_node": 8, "pods": 500, "feasible_nodes": 5},
    "partitionable": {"nodes": 500, "devices_per_node": 8, "pods": 1750, "feasible_nodes": 5},
}
TARGET_RATIO = 3.0


# --------------------------------------------------------------------------- Python side

# allocate(node, claims) -> one AllocationResult per claim, or None when the node does
# not fit; raises on a fatal error.
AllocateFn = Callable[[Node, Sequence[ResourceClaim]], list[AllocationResult] | None]


class PythonBackend:
    """Everything the loop needs from the Python allocator, prepared once per workload
    (slices parsed and indexed once, as a long-running controller keeps them)."""

    def __init__(self, workload: Obj) -> None:
        self.features = Features.from_dict(workload.get("features", {}))
        slices = [ResourceSlice.from_dict(s) for s in workload["slices"]]
        began = time.perf_counter()
        self.inventory = Inventory(slices, self.features)
        #: Seconds to index the slices: part of a cold pass after slices changed (decoding
        #: them is not: Go's informer decodes them outside Allocate as well).
        self.inventory_seconds = time.perf_counter() - began
        self.classes = [DeviceClass.from_dict(c) for c in workload["classes"]]
        self.nodes = [Node.from_dict(n) for n in workload["nodes"]]
        self.allocated = [ResourceClaim.from_dict(c) for c in workload.get("allocated", [])]

    def new_state(self) -> AllocatedState:
        return AllocatedState(self.allocated, consumable_capacity=self.features.consumable_capacity)

    def pod_claims(self, templates: Sequence[Obj], pod: int) -> list[ResourceClaim]:
        """Pod ``pod``'s own claims from the templates (``<name>-<pod>``), API-defaulted."""
        claims = []
        for template in templates:
            claim = json.loads(json.dumps(template))
            claim["metadata"]["name"] = f"{template['metadata']['name']}-{pod}"
            claims.append(with_api_defaults(ResourceClaim.from_dict(claim)))
        return claims

    def new_allocator(self, state: AllocatedState) -> AllocateFn:
        """PreFilter: a fresh allocator over the allocated state so far."""
        allocator = Allocator(self.inventory, self.classes, state, features=self.features)

        def allocate(node: Node, claims: Sequence[ResourceClaim]) -> list[AllocationResult] | None:
            try:
                return allocator.allocate(node, claims)
            except NodeUnsuitableError:  # ErrFailedAllocationOnNode: this node does not fit
                return None

        return allocate

    @staticmethod
    def record(
        state: AllocatedState, claims: Sequence[ResourceClaim], results: Sequence[AllocationResult]
    ) -> None:
        """Reserve: the chosen node's allocations count as allocated from now on."""
        for claim, result in zip(claims, results, strict=True):
            state.add(claim.with_allocation(result))

    @staticmethod
    def placement(results: Sequence[AllocationResult]) -> str:
        return ";".join(
            ",".join(f"{r.request}={r.driver}/{r.pool}/{r.device}" for r in a.devices.results)
            for a in results
        )


def _python_pass(backend: PythonBackend, workload: Obj) -> Obj:
    """One pass of the loop in hack/oracle/README.md ("Workload")."""
    state = backend.new_state()
    nodes = backend.nodes
    feasible_nodes = max(1, int(workload.get("feasibleNodes", 1)))
    digest = hashlib.sha256()
    elapsed = 0.0
    calls = scheduled = start = 0
    for pod in range(int(workload["pods"])):
        claims = backend.pod_claims(workload["claimTemplates"], pod)
        allocate = backend.new_allocator(state)
        chosen, chosen_node, feasible, visited = None, "", 0, 0
        while visited < len(nodes) and feasible < feasible_nodes:
            node = nodes[(start + visited) % len(nodes)]
            visited += 1
            began = time.perf_counter()
            results = allocate(node, claims)
            elapsed += time.perf_counter() - began
            calls += 1
            if results is not None:
                feasible += 1
                if chosen is None:
                    chosen, chosen_node = results, node.name
        start = (start + visited) % len(nodes)
        if chosen is None:
            digest.update(f"{pod} -\n".encode())
            continue
        scheduled += 1
        backend.record(state, claims, chosen)
        digest.update(f"{pod} {chosen_node} {backend.placement(chosen)}\n".encode())
    return {
        "allocateSeconds": elapsed,
        "allocateCalls": calls,
        "scheduled": scheduled,
        "placementSha256": digest.hexdigest(),
    }


def summarize(implementation: str, workload: Obj, runs: Sequence[Obj]) -> Obj:
    """A report in ``dra-oracle -bench``'s format from the passes of one implementation."""
    digests = {r["placementSha256"] for r in runs}
    if len(digests) != 1:
        raise RuntimeError(f"{implementation}: placements differ between passes")
    median = statistics.median(r["allocateSeconds"] for r in runs)
    first = runs[0]
    return {
        "implementation": implementation,
        "nodes": len(workload["nodes"]),
        "pods": workload["pods"],
        "feasibleNodes": workload.get("feasibleNodes"),
        "iterations": len(runs),
        "scheduled": first["scheduled"],
        "allocateCalls": first["allocateCalls"],
        "medianAllocateSeconds": median,
        "allocateCallsPerSecond": first["allocateCalls"] / median if median else 0.0,
        "podsPerSecond": first["scheduled"] / median if median else 0.0,
        "placementSha256": first["placementSha256"],
        "runs": list(runs),
    }


def run_python_bench(workload: Obj, iterations: int) -> Obj:
    """The Python counterpart of ``dra-oracle -bench``: same loop, same report keys."""
    backend = PythonBackend(workload)
    return summarize(
        "python", workload, [_python_pass(backend, workload) for _ in range(iterations)]
    )


# --------------------------------------------------------------------------- Go side


def build_oracle() -> Path:
    done = subprocess.run(
        [str(REPO / "hack" / "build-binaries.sh"), "oracle"],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"cannot build the reference allocator (hack/oracle):\n{done.stderr}")
    return Path(done.stdout.strip().splitlines()[-1]) / "dra-oracle"


def run_go_bench(oracle: Path, workload_path: Path, iterations: int) -> Obj:
    done = subprocess.run(
        [str(oracle), "-bench", str(workload_path), "-iterations", str(iterations)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"dra-oracle -bench failed: {done.stderr}")
    report: Obj = json.loads(done.stdout)
    return report


def go_pass(oracle: Path, workload_path: Path) -> Obj:
    """One pass of the Go loop, as a run record like :func:`_python_pass` returns."""
    report = run_go_bench(oracle, workload_path, 1)
    return {**report["runs"][0], "placementSha256": report["placementSha256"]}


# --------------------------------------------------------------------------- report


def _line(name: str, report: Obj) -> str:
    return (
        f"  {name:<7} {report['podsPerSecond']:>8.1f} pods/s"
        f" {report['allocateCallsPerSecond']:>9.1f} Allocate/s"
        f"  (median {report['medianAllocateSeconds']:.3f}s of {report['iterations']} passes,"
        f" first pass {report['runs'][0]['allocateSeconds']:.3f}s;"
        f" {report['allocateCalls']} calls, {report['scheduled']}/{report['pods']} pods placed)"
    )


def bench_shape(oracle: Path, shape: str, runs: int) -> Obj:
    """Go and Python passes alternate, so that load from other work on a shared machine
    affects both alike; each side's median is reported."""
    workload = scenarios.bench_workload(shape, **SIZES[shape])
    backend = PythonBackend(workload)
    go_runs, python_runs, cold_seconds = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "workload.json"
        path.write_text(json.dumps(workload))
        for _ in range(runs):
            go_runs.append(go_pass(oracle, path))
            python_runs.append(_python_pass(backend, workload))
            cold = PythonBackend(workload)  # as after a slice change: nothing cached
            cold_seconds.append(cold.inventory_seconds + _python_pass(cold, workload)[
                "allocateSeconds"])  # fmt: skip
    go = summarize("go", workload, go_runs)
    python = summarize("python", workload, python_runs)
    ratio = go["podsPerSecond"] / python["podsPerSecond"] if python["podsPerSecond"] else 0.0
    same = go["placementSha256"] == python["placementSha256"]
    print(f"{shape}: {SIZES[shape]}")
    print(_line("go", go))
    print(_line("python", python))
    verdict = "within" if ratio <= TARGET_RATIO else "OUTSIDE"
    print(f"  ratio python/go (time per pod): {ratio:.2f}x ({verdict} the {TARGET_RATIO}x target)")
    # Go keeps nothing between Allocate calls: every Go pass is a cold one.
    cold = statistics.median(cold_seconds)
    cold_ratio = cold / go["medianAllocateSeconds"] if go["medianAllocateSeconds"] else 0.0
    print(
        f"  cold pass (fresh inventory, as after a slice change; indexing the slices "
        f"included): python median {cold:.3f}s of {len(cold_seconds)}, go median "
        f"{go['medianAllocateSeconds']:.3f}s, ratio python/go {cold_ratio:.2f}x"
    )
    if not same:
        print("  WARNING: placements differ from the reference; the figures are not comparable")
    return {"shape": shape, "go": go, "python": python, "ratio": ratio, "samePlacements": same,
            "coldSeconds": cold_seconds, "coldRatio": cold_ratio}  # fmt: skip


def profile_shape(shape: str, *, cold: bool = False) -> None:
    """cProfile of one warm pass (selector caches filled by a first, unprofiled pass),
    which is what the median measures; with ``cold``, of a cold pass instead."""
    workload = scenarios.bench_workload(shape, **SIZES[shape])
    backend = PythonBackend(workload)
    if not cold:
        _python_pass(backend, workload)
    profiler = cProfile.Profile()
    profiler.enable()
    _python_pass(backend, workload)
    profiler.disable()
    print(f"=== {shape}: {'cold' if cold else 'warm'} pass")
    pstats.Stats(profiler).sort_stats("tottime").print_stats(20)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=scenarios.BENCH_SHAPES, action="append")
    parser.add_argument("--runs", type=int, default=5, help="passes per implementation")
    parser.add_argument("--profile", action="store_true", help="cProfile the Python loop")
    parser.add_argument("--cold", action="store_true", help="with --profile: a cold pass")
    parser.add_argument("--json", type=Path, help="also write all reports to this file")
    args = parser.parse_args(argv)
    shapes = args.shape or list(scenarios.BENCH_SHAPES)
    if args.profile:
        for shape in shapes:
            profile_shape(shape, cold=args.cold)
        return 0
    oracle = build_oracle()
    results = [bench_shape(oracle, shape, args.runs) for shape in shapes]
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0 if all(r["samePlacements"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
