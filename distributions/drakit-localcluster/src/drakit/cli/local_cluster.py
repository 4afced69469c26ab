"""``drakit local-cluster``: a real control plane on this machine for development.

``up DIR`` starts etcd and kube-apiserver (optionally kube-scheduler and
kube-controller-manager) on loopback, writes ``DIR/kubeconfig`` and keeps
running in the background until ``down DIR``. ``run`` does the same in the
foreground until Ctrl-C.
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
from drakit.version import KUBERNETES_VERSION, SUPPORTED_KUBERNETES_VERSIONS

if TYPE_CHECKING:
    from drakit.localcluster import ClusterConfig


def add_parser(sub: Subcommands) -> None:
    p = add_command(
        sub,
        "local-cluster",
        summary="start or stop a local kube-apiserver + etcd for development",
        description=__doc__ or "",
    )
    add_launcher_actions(
        p,
        up_help="start in the background; writes DIR/kubeconfig and returns once the API is ready",
        down_help="stop a cluster started with `up DIR`",
        add_arguments=_add_arguments,
        up=run_up,
        run=run_foreground,
        down=run_down,
    )


def _add_arguments(a: argparse.ArgumentParser) -> None:
    a.add_argument("dir", type=Path, help="folder for the kubeconfig, certificates, logs and data")
    a.add_argument("--with-scheduler", action="store_true", help="also run the real kube-scheduler")
    a.add_argument(
        "--with-controller-manager",
        action="store_true",
        help="also run kube-controller-manager (every controller but node-lifecycle)",
    )
    a.add_argument(
        "--real-nodes",
        action="store_true",
        help="serve real kubelets (hack/local-node.sh): ServiceAccount tokens for pods, "
        "the node-lifecycle controller in kube-controller-manager, kubelet client "
        "credentials for logs and exec",
    )
    a.add_argument(
        "--controllers",
        default="*,-node-lifecycle-controller",
        help="kube-controller-manager --controllers value (default: %(default)s)",
    )
    a.add_argument(
        "--kube-version",
        default=None,
        metavar="VERSION",
        help="Kubernetes version to run, one of "
        f"{', '.join(SUPPORTED_KUBERNETES_VERSIONS)} or its minor (v1.36); "
        f"default {KUBERNETES_VERSION}. Missing binaries are built (needs Go).",
    )
    a.add_argument(
        "--feature-gates",
        default=None,
        help="feature gates for every component "
        "(default: $DRAKIT_FEATURE_GATES or drakit's DRA gates for that version)",
    )
    a.add_argument(
        "--runtime-config",
        default="",
        metavar="ENTRIES",
        help="more kube-apiserver --runtime-config entries, e.g. "
        "scheduling.k8s.io/v1beta1=true (resource.k8s.io v1beta1 and v1beta2 are always on)",
    )


def _config(args: argparse.Namespace) -> ClusterConfig:
    from drakit.localcluster import ClusterConfig  # noqa: PLC0415

    config = ClusterConfig(
        work_dir=args.dir.resolve(),
        with_scheduler=args.with_scheduler,
        with_controller_manager=args.with_controller_manager,
        controllers=args.controllers,
        real_nodes=args.real_nodes,
        kube_version=args.kube_version,
        runtime_config=args.runtime_config,
    )
    if args.feature_gates is not None:
        config.feature_gates = args.feature_gates
    return config


def run_foreground(args: argparse.Namespace) -> int:
    try:
        from drakit.localcluster import (  # noqa: PLC0415
            LocalCluster,
            MissingBinaryError,
            StartError,
        )
    except ImportError as exc:  # cryptography missing (certs.py names what to install)
        print(f"drakit local-cluster: {exc}", file=sys.stderr)
        return 1

    try:
        cluster = LocalCluster(_config(args))
    except ValueError as err:  # unsupported version, unknown gate, bad runtime-config entry
        print(f"drakit local-cluster: {err}", file=sys.stderr)
        return 2

    def start() -> str:
        cluster.start()
        print(f"kube-apiserver {cluster.server} is ready")
        print(f"  export KUBECONFIG={cluster.kubeconfig}")
        print("  kubectl get resourceslices")
        print(f"  logs: {cluster.work_dir / 'logs'}")
        return cluster.server

    return run_until_signalled(
        args.dir, "local-cluster", start, cluster.stop, (StartError, MissingBinaryError)
    )


def run_up(args: argparse.Namespace) -> int:
    argv = [sys.executable, "-m", "drakit.localcluster", "run", str(args.dir)]
    argv += ["--with-scheduler"] if args.with_scheduler else []
    argv += ["--with-controller-manager"] if args.with_controller_manager else []
    argv += ["--real-nodes"] if args.real_nodes else []
    argv += ["--controllers", args.controllers]
    if args.kube_version is not None:
        argv += ["--kube-version", args.kube_version]
    if args.feature_gates is not None:
        argv += ["--feature-gates", args.feature_gates]
    if args.runtime_config:
        argv += ["--runtime-config", args.runtime_config]
    kubeconfig = (args.dir / "kubeconfig").resolve()
    return start_detached(
        args.dir, argv, "local-cluster", lambda: print(f"export KUBECONFIG={kubeconfig}")
    )


def run_down(args: argparse.Namespace) -> int:
    return stop_detached(args.dir, "local-cluster")
