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
        required=True,
        help="folder of a `drakit local-cluster up` control plane (its kubeconfig is used)",
    )
    a.add_argument("--node-name", default=None, help="node name (default: drakit-node-<random>)")
    a.add_argument(
        "--image",
        action="append",
        default=[],
        type=Path,
        help="OCI or Docker archive to import into the node's containerd (repeatable), "
        "for example the one hack/build-image.sh prints",
    )


def run_foreground(args: argparse.Namespace) -> int:
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
    argv = [sys.executable, "-m", "drakit", "local-node", "run", str(args.dir)]
    argv += ["--cluster-dir", str(args.cluster_dir)]
    argv += ["--node-name", args.node_name] if args.node_name else []
    for image in args.image:
        argv += ["--image", str(image)]
    ready = args.dir / "ready"
    from drakit.localcluster.nodeconfig import NodePaths  # noqa: PLC0415

    paths = NodePaths(node_work_dir(args.dir))  # the folders `run` gives the node
    return start_detached(
        args.dir, argv, "local-node", lambda: print(ready_summary(ready.read_text(), paths))
    )


def run_down(args: argparse.Namespace) -> int:
    from drakit.localcluster.hoststate import sweep_nodes  # noqa: PLC0415

    code = stop_detached(args.dir, "local-node", timeout=120)
    # A launcher that was killed could not clean up: its record says what to undo.
    for line in sweep_nodes():
        print(f"  {line}")
    return code
