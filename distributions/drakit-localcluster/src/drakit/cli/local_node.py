"""``drakit local-node``: a real Kubernetes node on this machine (root, Linux).

``up DIR --cluster-dir CDIR`` starts containerd, runc and the real kubelet
(built from the pinned Go modules by ``hack/build-binaries.sh node``) against
the control plane that ``drakit local-cluster up CDIR --with-scheduler
--with-controller-manager --real-nodes`` runs, and returns once the node is
Ready. It keeps running in the background until ``down DIR``, which restores
the machine exactly: processes, mounts, cgroups, sysctls and the /etc/hosts
line. A launcher that was killed is cleaned up by the next ``up``.

Every listener stays on 127.0.0.1; pods that talk to the apiserver must use
the host network. Install drakit's chart with ``kubeletDir`` and ``cdiRoot``
set to the folders ``up`` prints.

``up DIR --nodes N`` (no ``--cluster-dir``) starts a cluster of N real nodes
instead, with a control plane of its own: each node in its own network and
mount namespaces on a bridge the launcher makes (the host at 198.19.0.1, node i
at 198.19.0.1i, its pods in 198.18.i.0/24 on the CNI bridge plugin, a
kube-proxy per node), so pods on pod IPs reach each other, ClusterIP Services
and the apiserver, and the charts' defaults (``/var/lib/kubelet``,
``/var/run/cdi``) are each node's own folders. Nothing is routed off the
machine. ``down DIR`` restores the host's network too (bridge, veths, routes,
sysctls). The admin kubeconfig is ``DIR/cluster/kubeconfig``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from drakit.cli.flags import Subcommands, add_command
from drakit.localcluster.background import (
    add_launcher_actions,
    run_until_signalled,
    start_detached,
    stop_detached,
)

if TYPE_CHECKING:
    from drakit.localcluster.nodeconfig import NodePaths


def add_parser(sub: Subcommands) -> None:
    p = add_command(
        sub,
        "local-node",
        summary="start or stop a real kubelet + containerd node for a local control plane (root)",
        description=__doc__ or "",
    )
    add_launcher_actions(
        p,
        up_help="start in the background; returns once the node is Ready",
        down_help="stop a node started with `up DIR` and restore the machine",
        add_arguments=_add_arguments,
        up=run_up,
        run=run_foreground,
        down=run_down,
    )


def _add_arguments(a: argparse.ArgumentParser) -> None:
    a.add_argument("dir", type=Path, help="folder for the node's state, logs and CDI specs")
    a.add_argument(
        "--cluster-dir",
        type=Path,
        default=None,
        help="folder of a `drakit local-cluster up` control plane (its kubeconfig is used); "
        "one node on the host's network",
    )
    a.add_argument(
        "--nodes",
        type=int,
        default=None,
        metavar="N",
        help="start a cluster of N nodes (1 to 16), each in its own network namespace, with a "
        "control plane of its own in DIR/cluster (instead of --cluster-dir)",
    )
    a.add_argument(
        "--node-name",
        default=None,
        help="node name (default: drakit-node-<random>; with --nodes, the prefix of "
        "<prefix>1..<prefix>N, default drakit-node-)",
    )
    a.add_argument(
        "--image",
        action="append",
        default=[],
        type=Path,
        help="OCI or Docker archive to import into the node's containerd (repeatable), "
        "for example the one hack/build-image.sh prints",
    )


def _mode_error(args: argparse.Namespace) -> str | None:
    """Why the arguments name no one way to run (None when they do)."""
    if (args.cluster_dir is None) == (args.nodes is None):
        return "give either --cluster-dir (one node) or --nodes N (a cluster of its own)"
    if args.nodes is not None and not 1 <= args.nodes <= 16:
        return f"--nodes {args.nodes}: between 1 and 16 nodes fit the address plan"
    return None


def run_foreground(args: argparse.Namespace) -> int:
    if (error := _mode_error(args)) is not None:
        print(f"drakit local-node: {error}", file=sys.stderr)
        return 2
    if args.nodes is not None:
        return _run_group(args)
    from drakit.localcluster.node import LocalNode, NodeConfig  # noqa: PLC0415
    from drakit.localcluster.process import StartError  # noqa: PLC0415

    kubeconfig = (args.cluster_dir / "kubeconfig").resolve()
    if not kubeconfig.is_file():
        print(f"drakit local-node: {kubeconfig} not found: is the cluster up?", file=sys.stderr)
        return 1
    config = NodeConfig(kubeconfig=kubeconfig, work_dir=node_work_dir(args.dir))
    if args.node_name:
        config.node_name = args.node_name
    node = LocalNode(config)

    def start() -> str:
        node.start()
        for image in args.image:
            node.import_image(image.resolve())
        print(ready_summary(node.name, node.paths))
        return node.name

    return run_until_signalled(args.dir, "local-node", start, node.stop, (StartError, OSError))


def _run_group(args: argparse.Namespace) -> int:
    from drakit.localcluster.hostnet import HostNetError  # noqa: PLC0415
    from drakit.localcluster.netplan import PlanError  # noqa: PLC0415
    from drakit.localcluster.nodegroup import GroupConfig, NodeGroup  # noqa: PLC0415
    from drakit.localcluster.process import StartError  # noqa: PLC0415

    config = GroupConfig(nodes=args.nodes, work_dir=args.dir.resolve())
    if args.node_name:
        config.name_prefix = args.node_name
    group = NodeGroup(config)

    def start() -> str:
        group.start()
        for node in group.nodes:
            for image in args.image:
                node.import_image(image.resolve())
        print(group_summary(group.kubeconfig, [n.name for n in group.nodes]))
        return ",".join(n.name for n in group.nodes)

    errors = (StartError, OSError, HostNetError, PlanError)
    return run_until_signalled(args.dir, "local-node", start, group.stop, errors)


def group_summary(kubeconfig: str, names: list[str]) -> str:
    """What ``up --nodes N`` prints once every node is Ready."""
    return "\n".join(
        [
            f"nodes {', '.join(names)} are Ready",
            f"  kubeconfig: {kubeconfig}",
            "  the charts' defaults for kubeletDir and cdiRoot are each node's own folders",
        ]
    )


def node_work_dir(folder: Path) -> Path:
    """The node's work folder inside ``up``'s DIR (its kubeletDir and cdiRoot are under it)."""
    return (folder / "node").resolve()


def ready_summary(name: str, paths: NodePaths) -> str:
    """What ``up`` (and ``run``) print once the node is Ready: its folders, and the
    ``helm install`` values that point drakit's chart at them."""
    kubelet_dir, cdi_root = paths.kubelet_root, paths.cdi_root
    return "\n".join(
        [
            f"node {name} is Ready",
            f"  kubeletDir: {kubelet_dir}",
            f"  cdiRoot:    {cdi_root}",
            f"  logs:       {paths.logs}",
            f"  helm install ... --set kubeletDir={kubelet_dir} --set cdiRoot={cdi_root}",
        ]
    )


def run_up(args: argparse.Namespace) -> int:
    if (error := _mode_error(args)) is not None:
        print(f"drakit local-node: {error}", file=sys.stderr)
        return 2
    argv = [sys.executable, "-m", "drakit", "local-node", "run", str(args.dir)]
    if args.nodes is not None:
        argv += ["--nodes", str(args.nodes)]
    else:
        argv += ["--cluster-dir", str(args.cluster_dir)]
    argv += ["--node-name", args.node_name] if args.node_name else []
    for image in args.image:
        argv += ["--image", str(image)]
    ready = args.dir / "ready"
    from drakit.localcluster.nodeconfig import NodePaths  # noqa: PLC0415

    paths = NodePaths(node_work_dir(args.dir))  # the folders `run` gives the node
    if args.nodes is not None:
        kubeconfig = str(args.dir.resolve() / "cluster" / "kubeconfig")
        return start_detached(
            args.dir,
            argv,
            "local-node",
            lambda: print(group_summary(kubeconfig, ready.read_text().split(","))),
        )
    return start_detached(
        args.dir, argv, "local-node", lambda: print(ready_summary(ready.read_text(), paths))
    )


def run_down(args: argparse.Namespace) -> int:
    from drakit.localcluster.hoststate import MachineLock, sweep_nodes  # noqa: PLC0415

    code = stop_detached(args.dir, "local-node", timeout=120)
    # A launcher that was killed could not clean up: its record says what to undo. The
    # sweep holds the machine's real-node lock, so no other launcher starts a node (and
    # makes the host folders a sweep removes) in the middle of it.
    lock = MachineLock.acquire(timeout=1800.0)
    try:
        for line in sweep_nodes():
            print(f"  {line}")
    finally:
        lock.release()
    return code
