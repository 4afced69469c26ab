"""Scheduling throughput: drakit's controller against the real kube-scheduler v1.37.2.

The same workload on the same control-plane shape (etcd + kube-apiserver + kube-scheduler):
500 simulated nodes (fake Ready Node objects) with one ResourceSlice of 8 devices each,
published directly as test data, and 1,000 pods that each get one device through a
ResourceClaimTemplate. The figure is pods per second from the creation of the first pod until
the last pod is bound, claim generation included:

- drakit: pods name ``schedulerName: drakit``; ``drakit controller`` (a separate process,
  scoped claim generation, 16 workers) generates, allocates and binds;
- kube-scheduler: pods use the default scheduler; kube-controller-manager runs only its
  ``resourceclaim-controller`` to generate the claims.

Every run ends with the independent checker of the integration tests (no device in two
claims, every allocation satisfies its claim), so a fast but wrong run cannot count.

    hack/bench.sh scheduling            # or: .venv/bin/python tests/bench/bench_scheduling.py
    BENCH_SCHEDULING_RUNS=3 hack/bench.sh scheduling
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration" / "controller"))

from controller_harness import ControllerProcess, Objects
from scale_workload import (
    build_nodes,
    check_allocations,
    create_pods,
    wait_all_bound,
)

from drakit.localcluster import ClusterConfig, LocalCluster
from kubeapi.client import load_client
from kubeapi.pool import widen_connection_pool

PODS = 1000
NODES = 500
DEVICES = 8
RUNS = int(os.environ.get("BENCH_SCHEDULING_RUNS", "1"))


#: name -> drakit's --kube-api-qps (None: the kube-scheduler run). Every component keeps its
#: default client-side rate limit (kube-scheduler 50 QPS, kube-controller-manager 20 QPS,
#: drakit 50 QPS); the unlimited drakit run shows what that limit costs.
SETUPS: dict[str, str | None] = {
    "drakit": "50",
    "drakit (no client rate limit)": "0",
    "kube-scheduler": None,
}


def run_once(qps: str | None) -> float:
    """One run on a fresh control plane; returns pods per second."""
    upstream = qps is None
    config = ClusterConfig(
        build_missing=False,
        with_scheduler=True,
        with_controller_manager=upstream,
        controllers="resourceclaim-controller",
    )
    with LocalCluster(config) as cluster, tempfile.TemporaryDirectory() as tmp:
        api = load_client(cluster.kubeconfig, qps=0)
        widen_connection_pool(api, 32)
        objects = Objects(api)
        build_nodes(objects, NODES, DEVICES, prefix="node")
        objects.template("default", "gpu", objects.device_class())
        process = None
        if not upstream:
            log = Path(tmp) / "controller.log"
            process = ControllerProcess(
                cluster.kubeconfig, log, "--claim-generation", "scoped", "--workers", "16",
                "--kube-api-qps", qps,
            )  # fmt: skip
            while not any(line.get("msg") == "Caches synced, starting workers"
                          for line in process.log_lines()):  # fmt: skip
                time.sleep(0.1)
        try:
            began = time.monotonic()
            create_pods(objects, "default", PODS, "gpu",
                        scheduler="drakit" if not upstream else "default-scheduler")  # fmt: skip
            wait_all_bound(objects, "default", PODS, timeout=900, poll=0.5)
            elapsed = time.monotonic() - began
        finally:
            if process is not None:
                process.terminate()
        problems = check_allocations(objects, "default")
        if problems:
            raise SystemExit(f"wrong allocations: {problems[:5]}")
        return PODS / elapsed


def main() -> int:
    results: dict[str, list[float]] = {name: [] for name in SETUPS}
    for _ in range(RUNS):
        for name, qps in SETUPS.items():
            rate = run_once(qps)
            results[name].append(rate)
            print(f"  {name}: {rate:.1f} pods/s", flush=True)
    medians = {name: statistics.median(rates) for name, rates in results.items()}
    upstream = medians["kube-scheduler"]
    print(
        f"scheduling {PODS} pods (1 device each) onto {NODES} nodes x {DEVICES} devices, "
        f"creation to bound, median of {RUNS} run(s):"
    )
    for name, rate in medians.items():
        print(f"  {name}: {rate:.1f} pods/s, ratio to kube-scheduler {rate / upstream:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
