"""Warm start time of the local control plane (binaries already built).

Starts and stops the launcher's etcd + kube-apiserver several times and
reports the median time until /readyz is ok and the default namespace exists.
"""

from __future__ import annotations

import statistics
import sys
import time

from drakit.localcluster import ClusterConfig, LocalCluster

RUNS = 5


def main() -> int:
    samples: list[float] = []
    for _ in range(RUNS):
        cluster = LocalCluster(ClusterConfig(build_missing=False))
        begin = time.monotonic()
        cluster.start()
        samples.append(time.monotonic() - begin)
        cluster.stop()
    with_scheduler = LocalCluster(ClusterConfig(build_missing=False, with_scheduler=True))
    begin = time.monotonic()
    with_scheduler.start()
    sched = time.monotonic() - begin
    with_scheduler.stop()
    print(
        f"control plane warm start (etcd + kube-apiserver, ready + default namespace): "
        f"median {statistics.median(samples):.2f}s, min {min(samples):.2f}s, "
        f"max {max(samples):.2f}s over {RUNS} runs"
    )
    print(f"with kube-scheduler: {sched:.2f}s (1 run)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
