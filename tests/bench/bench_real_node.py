"""Warm time from nothing to a running DRA pod on a real node (root only).

Runs the real-node demo's steps (``drakit/demo/real_node.py``) several times
with every binary and the image already built, and reports the median time of
each phase: control plane (etcd, kube-apiserver, kube-scheduler,
kube-controller-manager), node Ready (containerd + kubelet, images
imported), chart installed until the node plugin is Ready and its slices are
published, and ``deploy/examples/gpu-pod.yaml`` until both containers run and
have printed their output; then teardown (pod deleted and unprepared, node
stopped with the machine restored, control plane stopped).

There is no Go reference here: the comparison would need the example
driver's image and chart built the same way, which this benchmark does not do.
"""

from __future__ import annotations

import io
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from drakit.demo import real_node
from drakit.demo.text import Printer
from drakit.localcluster.leftovers import mount_points_under

RUNS = 3


def one_run() -> dict[str, float]:
    root = Path(tempfile.mkdtemp(prefix="dk-bench-node-"))
    demo = real_node.RealNodeDemo(Printer(io.StringIO()), root)
    phases: dict[str, float] = {}

    def timed(name: str, action: Callable[[real_node.RealNodeDemo], None]) -> None:
        began = time.monotonic()
        action(demo)
        phases[name] = time.monotonic() - began

    try:
        timed("control plane", real_node.start_control_plane)
        timed("node Ready + images", real_node.start_node)
        timed("chart until plugin Ready + slices", real_node.install_chart)
        timed("gpu-pod.yaml until containers print", real_node.run_workload)
        timed("pod deleted until unprepared + claim deleted", real_node.clean_up)
    except BaseException:
        print(f"real node: run failed; its logs and data stay in {root}", file=sys.stderr)
        raise
    finally:
        began = time.monotonic()
        real_node.stop(demo)
        phases["teardown (machine restored)"] = time.monotonic() - began
    # A run that worked leaves nothing: its folder (node logs, etcd data) is about 63 MiB.
    # Never while anything is still mounted below it: rmtree would go into the mount.
    mounted = mount_points_under(root) + ([root] if root.is_mount() else [])
    if mounted:
        print(f"real node: {root} kept, still mounted below it: {mounted}", file=sys.stderr)
    else:
        shutil.rmtree(root)
    phases["total to a running DRA pod"] = sum(phases[k] for k in list(phases)[:4])
    return phases


def main() -> int:
    if os.geteuid() != 0:
        print("real node: skipped (needs root)")
        return 0
    runs = [one_run() for _ in range(RUNS)]
    print(f"real node, warm (binaries and image cached), median of {RUNS} runs:")
    for phase in runs[0]:
        values = [r[phase] for r in runs]
        print(
            f"  {phase:<48} median {statistics.median(values):6.2f}s "
            f"(min {min(values):.2f}, max {max(values):.2f})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
