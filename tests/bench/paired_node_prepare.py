"""One-claim NodePrepareResources of this tree against another checkout, paired.

The prepare latency of ``bench_node_prepare.py`` moves by 2-3x between runs on a loaded
machine, for the Go reference as much as for drakit, so two versions of the plugin cannot
be compared across runs. This benchmark serves both side by side on one local apiserver
(this tree as driver ``gpu.example.com``, the other checkout, with its own ``.venv``, as
``gpu-baseline.example.com``; one claim each, the 32-GPU example backend, CDI root on
tmpfs) and alternates prepare + unprepare cycles between them, swapping the order every
cycle, so both see the same load. It prints p50/p90/p99 of each, the ratio of the p50s
and the median of the per-pair ratios. Not part of ``make bench`` (which runs
``bench_*.py``): it needs the second checkout.

    git worktree add /tmp/baseline main && (cd /tmp/baseline && make venv)
    .venv/bin/python tests/bench/paired_node_prepare.py --baseline /tmp/baseline
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_node_prepare as single

DRIVERS = {"this tree": "gpu.example.com", "baseline": "gpu-baseline.example.com"}
WARM_UP = 10


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", type=Path, required=True, help="the other checkout")
    parser.add_argument("--iterations", type=int, default=300, help="cycles per side")
    args = parser.parse_args()
    trees = {"this tree": single.REPO, "baseline": args.baseline.resolve()}
    shm = "/dev/shm" if Path("/dev/shm").is_dir() else None
    with (
        tempfile.TemporaryDirectory(prefix="drk-bench-") as tmp,
        tempfile.TemporaryDirectory(prefix="drk-bench-cdi-", dir=shm) as cdi,
        single.LocalCluster(single.ClusterConfig()) as cluster,
    ):
        api = single.load_client(cluster.kubeconfig)
        with contextlib.suppress(single.AlreadyExists):
            single.Resource(api, single.NODES).create({"metadata": {"name": single.NODE}})
        env = {k: v for k, v in os.environ.items() if k != "POD_UID"}
        env.update(KUBECONFIG=cluster.kubeconfig, KUBE_API_QPS="1000", KUBE_API_BURST="2000")
        config = Path(tmp) / "example.yaml"
        config.write_text(f"gpus: {single.BATCH}\n")
        plugins: dict[str, single.Plugin] = {}
        try:
            for side, tree in trees.items():
                root = Path(tmp) / side.replace(" ", "-")
                root.mkdir()
                plugins[side] = single.Plugin(
                    side,
                    [
                        str(tree / ".venv/bin/python"), "-m", "drakit.cli", "node-plugin",
                        "--driver-name", DRIVERS[side], "--node-name", single.NODE,
                        "--kubeconfig", cluster.kubeconfig,
                        "--kubelet-registrar-dir", str(root / "registry"),
                        "--kubelet-plugins-dir", str(root / "plugins"),
                        "--cdi-root", str(Path(cdi) / root.name),
                        "--backend", "example", "--backend-config", str(config),
                    ],
                    env,
                    root / "plugins" / DRIVERS[side] / "dra.sock",
                    root / "plugin.log",
                )  # fmt: skip
                plugins[side].claims = single.create_claims(
                    api, single.new_namespace(api), 1, DRIVERS[side]
                )
            for plugin in plugins.values():
                plugin.serve()
            for _ in range(WARM_UP):
                for plugin in plugins.values():
                    plugin.cycle(1)
            for plugin in plugins.values():
                plugin.single_ms.append([])  # one round
            for i in range(args.iterations):
                for plugin in single.in_turn(list(plugins.values()), i):
                    plugin.single_ms[-1].append(plugin.cycle(1))
        finally:
            for plugin in plugins.values():
                plugin.stop()
    times = {side: plugin.single_ms[0] for side, plugin in plugins.items()}
    for side, values in times.items():
        print(
            f"{side} ({trees[side]}): p50 {single.p(values, 50):.2f} ms, "
            f"p90 {single.p(values, 90):.2f} ms, p99 {single.p(values, 99):.2f} ms"
        )
    ours, theirs = times["this tree"], times["baseline"]
    pairs = statistics.median(a / b for a, b in zip(ours, theirs, strict=True))
    print(
        f"this tree / baseline: p50 {single.p(ours, 50) / single.p(theirs, 50):.3f}, "
        f"median of per-pair ratios {pairs:.3f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
