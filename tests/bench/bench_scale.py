"""Scheduling at cluster scale: drakit's controller against kube-scheduler + KCM v1.37.2.

For each size N of the series: N fake Nodes (Ready, untainted), each with one ResourceSlice
of 8 devices, one DeviceClass, and 2 x N pods (one device each, from a ResourceClaimTemplate)
created at a fixed rate. Each side runs on a fresh control plane (etcd + kube-apiserver):

- **drakit**: one ``drakit controller`` (scheduling, and claim generation for every pod
  (``--claim-generation all``): it is the only controller; its default client limits);
- **kube-scheduler + kube-controller-manager** (``resourceclaim-controller``), their default
  client limits.

Per side it reports pods/s (first creation to last bound), p50/p99 time from a pod's
creation request to the benchmark's watch seeing it bound, peak RSS (VmHWM) and CPU seconds
of the scheduling processes, kube-apiserver requests per pod (every request the apiserver
counted while the pods were scheduled, the benchmark's own creates and watch included: the
same on both sides), and the verdict of the independent checker of the integration tests
(no device in two claims, device counts, node selectors, reservations).

    hack/bench.sh scale                                    # default: --nodes 500
    BENCH_SCALE_NODES=5000 BENCH_SCALE_PODS=10000 make bench  # the issue's point in make bench
    .venv/bin/python tests/bench/bench_scale.py --nodes 1000,2500,5000   # the full series
    .venv/bin/python tests/bench/bench_scale.py --nodes 5000 --pods 10000
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration" / "controller"))

from controller_harness import ControllerProcess, Objects
from procstats import cpu_seconds, peak_rss_mib
from scale_workload import (
    BoundWatch,
    build_nodes,
    check_allocations,
    load_generator_client,
)

from drakit.localcluster import ClusterConfig, LocalCluster

DEVICES = 8
NAMESPACE = "default"


@dataclass
class SideResult:
    side: str
    nodes: int
    pods: int
    pods_per_second: float
    p50: float
    p99: float
    peak_rss_mib: float
    cpu_seconds: float
    requests_per_pod: float
    verdict: str


def proc_stats(pid: int) -> tuple[float, float]:
    """(peak RSS in MiB, CPU seconds) of a running process."""
    return peak_rss_mib(pid), cpu_seconds(pid)


def apiserver_requests(cluster: LocalCluster) -> float:
    status, body = cluster.request("/metrics")
    if status != 200:
        raise SystemExit(f"kube-apiserver /metrics answered {status}")
    total = 0.0
    for line in body.decode().splitlines():
        if line.startswith("apiserver_request_total{"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def create_paced(objects: Objects, count: int, rate: float, scheduler: str) -> dict[str, float]:
    """Create ``count`` pods at ``rate`` per second; returns each pod's request start time."""
    began = time.monotonic()
    created: dict[str, float] = {}

    def create(i: int) -> None:
        delay = began + i / rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        name = f"p{i:05d}"
        created[name] = time.monotonic()
        objects.pod(NAMESPACE, name, templates={"gpu": "gpu"}, scheduler=scheduler)

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(create, range(count)))
    return created


@contextlib.contextmanager
def control_plane(upstream: bool) -> Iterator[LocalCluster]:
    config = ClusterConfig(
        build_missing=False,
        with_scheduler=upstream,
        with_controller_manager=upstream,
        controllers="resourceclaim-controller",
    )
    with LocalCluster(config) as cluster:
        yield cluster


def run_side(upstream: bool, nodes: int, pods: int, rate: float, timeout: float) -> SideResult:
    side = "kube-scheduler + KCM" if upstream else "drakit"
    with control_plane(upstream) as cluster, tempfile.TemporaryDirectory() as tmp:
        api = load_generator_client(cluster.kubeconfig)
        objects = Objects(api)
        build_nodes(objects, nodes, DEVICES, prefix="node")
        objects.template(NAMESPACE, "gpu", objects.device_class())
        controller: ControllerProcess | None = None
        if upstream:
            pids = [p.pid for p in cluster.processes
                    if p.name in ("kube-scheduler", "kube-controller-manager")]  # fmt: skip
        else:
            controller = ControllerProcess(
                cluster.kubeconfig, Path(tmp) / "drakit.log", "--workers", "16",
                "--claim-generation", "all",
            )  # fmt: skip
            while not any(line.get("msg") == "Caches synced, starting workers"
                          for line in controller.log_lines()):  # fmt: skip
                time.sleep(0.1)
            pids = [controller.process.pid]
        if len([p for p in pids if p]) != (2 if upstream else 1):
            raise SystemExit(f"{side}: scheduling processes not found: {pids}")
        cpu_before = sum(proc_stats(p)[1] for p in pids if p)
        requests_before = apiserver_requests(cluster)
        try:
            with BoundWatch(objects, NAMESPACE) as watch:
                began = time.monotonic()
                created = create_paced(objects, pods, rate, "drakit" if not upstream
                                       else "default-scheduler")  # fmt: skip
                try:
                    elapsed = watch.wait(pods, began + timeout - time.monotonic()) - began
                except TimeoutError as err:
                    raise SystemExit(f"{side}: {err}") from err
            stats = [proc_stats(p) for p in pids if p]
            requests = apiserver_requests(cluster) - requests_before
        finally:
            if controller is not None:
                controller.terminate()
        latencies = sorted(watch.bound[n] - created[n] for n in created)
        problems = check_allocations(objects, NAMESPACE)
        verdict = "ok" if not problems else f"{len(problems)} problems: {problems[:3]}"
        return SideResult(
            side=side,
            nodes=nodes,
            pods=pods,
            pods_per_second=pods / elapsed,
            p50=statistics.median(latencies),
            p99=latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))],
            peak_rss_mib=sum(s[0] for s in stats),
            cpu_seconds=sum(s[1] for s in stats) - cpu_before,
            requests_per_pod=requests / pods,
            verdict=verdict,
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", default=os.environ.get("BENCH_SCALE_NODES", "500"),
                        help="comma-separated series of node counts (default $BENCH_SCALE_NODES "
                             "or 500; the issue's full series: 1000,2500,5000)")  # fmt: skip
    parser.add_argument("--pods", type=int, default=int(os.environ.get("BENCH_SCALE_PODS", "0")),
                        help="pods per size ($BENCH_SCALE_PODS, or 2 per node)")  # fmt: skip
    parser.add_argument("--rate", type=float, default=100.0, help="pods created per second")
    parser.add_argument("--timeout", type=float, default=0.0,
                        help="seconds per side (default 1800, or 0.5 s a pod if more)")  # fmt: skip
    parser.add_argument("--sides", default="drakit,go", choices=("drakit,go", "drakit", "go"),
                        metavar="drakit,go|drakit|go",
                        help="which sides to run (default both: the ratios need both)")  # fmt: skip
    args = parser.parse_args(argv)
    sizes = [int(n) for n in args.nodes.split(",") if n]
    upstream_sides = {"drakit": (False,), "go": (True,), "drakit,go": (False, True)}[args.sides]
    results: list[SideResult] = []
    for nodes in sizes:
        pods = args.pods or 2 * nodes
        timeout = args.timeout or max(1800.0, 0.5 * pods)  # kube-scheduler + KCM: ~5 pods/s
        for upstream in upstream_sides:
            result = run_side(upstream, nodes, pods, args.rate, timeout)
            results.append(result)
            print(f"  {result}", flush=True)
    print(f"scale: {DEVICES} devices per node, pods created at {args.rate:.0f}/s, "
          "creation to bound, default client limits on both sides")  # fmt: skip
    print("| nodes | pods | side | pods/s | p50 s | p99 s | peak RSS MiB | CPU s | "
          "requests/pod | checker |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r.nodes} | {r.pods} | {r.side} | {r.pods_per_second:.1f} | {r.p50:.2f} | "
              f"{r.p99:.2f} | {r.peak_rss_mib:.0f} | {r.cpu_seconds:.1f} | "
              f"{r.requests_per_pod:.1f} | {r.verdict} |")  # fmt: skip
    by_size: dict[int, dict[str, SideResult]] = {}
    for r in results:
        by_size.setdefault(r.nodes, {})[r.side] = r
    for nodes, sides in by_size.items():
        if len(sides) < 2:
            continue
        ours, theirs = sides["drakit"], sides["kube-scheduler + KCM"]
        print(f"  {nodes} nodes: ratio drakit/Go throughput "
              f"{ours.pods_per_second / theirs.pods_per_second:.2f}x, peak RSS "
              f"{ours.peak_rss_mib / theirs.peak_rss_mib:.2f}x, CPU "
              f"{ours.cpu_seconds / max(theirs.cpu_seconds, 0.01):.2f}x")  # fmt: skip
    if len(by_size) > 1:
        first, last = min(by_size), max(by_size)
        for side in by_size[first]:
            a, b = by_size[first][side], by_size[last][side]
            growth = (b.cpu_seconds / b.pods) / max(a.cpu_seconds / a.pods, 1e-9)
            print(f"  {side}: CPU per pod grows {growth:.2f}x from {first} to {last} nodes "
                  f"({last / first:.1f}x the nodes; 1.0x = linear total cost)")  # fmt: skip
    return 0 if all(r.verdict == "ok" for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
