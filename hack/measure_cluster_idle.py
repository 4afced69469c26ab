"""What a cluster of real nodes on one machine takes at idle (root; `make bench` does not
run it: it needs the real-node tier's binaries and image).

    .venv/bin/python hack/measure_cluster_idle.py --nodes 3 --image "$(hack/build-image.sh)"

Starts ``local-node up --nodes N``'s cluster (``NodeGroup``), installs drakit's chart with
its defaults (the local image), lets it settle, then samples every process of the cluster
(the control plane, each node's kubelet, containerd, kube-proxy, the shims, and every
container in the nodes' cgroups) over a window: the sum of their resident memory (the
median of the samples) and their CPU time over the window as a share of one core.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from drakit.demo.real_node import IMAGE_REPOSITORY, import_images
from drakit.localcluster.assets import require_binary
from drakit.localcluster.nodegroup import GroupConfig, NodeGroup

ROOT = Path(__file__).resolve().parents[1]
TICKS = os.sysconf("SC_CLK_TCK")


def cluster_pids(group: NodeGroup) -> set[int]:
    """Every process of the cluster now: the launched ones and the nodes' cgroup members."""
    pids: set[int] = set()
    assert group.cluster is not None
    for proc in group.cluster.processes:
        if proc.pid:
            pids.add(proc.pid)
    for node in group.nodes:
        pids |= {p.pid for p in node.processes if p.pid}
        shim = str(node.bins["containerd-shim-runc-v2"].resolve())
        address = str(node.paths.containerd_socket)
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                exe = str((entry / "exe").readlink())
                cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
                cgroups = (entry / "cgroup").read_text()
            except OSError:
                continue
            if (exe == shim and address in cmdline) or f"/drakit-{node.token}" in cgroups:
                pids.add(int(entry.name))
    return pids


def rss_and_ticks(pids: set[int]) -> tuple[int, int]:
    rss, ticks = 0, 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        ticks += int(fields[11]) + int(fields[12])  # utime, stime
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                rss += int(line.split()[1]) * 1024
    return rss, ticks


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--image", type=Path, required=True, help="hack/build-image.sh's archive")
    parser.add_argument("--settle", type=float, default=60.0, help="seconds before sampling")
    parser.add_argument("--window", type=float, default=60.0, help="seconds of sampling")
    args = parser.parse_args()
    tag = args.image.name.removeprefix("drakit-").removesuffix(".oci.tar")
    work = Path(tempfile.mkdtemp(prefix="dkidle"))
    with NodeGroup(GroupConfig(nodes=args.nodes, work_dir=work)) as group:
        for node in group.nodes:
            import_images(node, args.image)
        helm = require_binary("helm")
        env = {**os.environ, "KUBECONFIG": group.kubeconfig, "HELM_CACHE_HOME": str(work / "h")}
        subprocess.run(
            [str(helm), "install", "drakit", str(ROOT / "deploy" / "helm" / "drakit"),
             "--namespace", "drakit-system", "--create-namespace", "--wait",
             "--set", f"image.repository={IMAGE_REPOSITORY}", "--set", f"image.tag={tag}",
             "--set", "image.pullPolicy=Never"],
            env=env, check=True, capture_output=True,
        )  # fmt: skip
        time.sleep(args.settle)
        pids = cluster_pids(group)
        _, ticks_before = rss_and_ticks(pids)
        start = time.monotonic()
        samples = []
        while time.monotonic() - start < args.window:
            samples.append(rss_and_ticks(pids)[0])
            time.sleep(1.0)
        _, ticks_after = rss_and_ticks(pids)
        elapsed = time.monotonic() - start
    cpu = (ticks_after - ticks_before) / TICKS / elapsed
    print(
        f"{args.nodes} nodes at idle with drakit's chart: {len(pids)} processes, "
        f"{statistics.median(samples) / 2**20:.0f} MiB resident (median of {len(samples)}), "
        f"{cpu * 100:.0f}% of one core over {elapsed:.0f} s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
