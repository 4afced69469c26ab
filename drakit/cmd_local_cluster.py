"""``drakit local-cluster``: a real control plane on this machine for development.

``up DIR`` starts etcd and kube-apiserver (optionally kube-scheduler and
kube-controller-manager) on loopback, writes ``DIR/kubeconfig`` and keeps
running in the background until ``down DIR``. ``run`` does the same in the
foreground until Ctrl-C.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from drakit.localcluster import ClusterConfig

PID_FILE = "launcher.pid"
READY_FILE = "ready"
ERROR_FILE = "error"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "local-cluster",
        help="start or stop a local kube-apiserver + etcd for development",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    for name, help_text in (
        ("up", "start in the background; writes DIR/kubeconfig and returns once the API is ready"),
        ("run", "start in the foreground and stop on Ctrl-C or SIGTERM"),
    ):
        a = actions.add_parser(name, help=help_text, description=help_text)
        a.add_argument(
            "dir", type=Path, help="folder for the kubeconfig, certificates, logs and data"
        )
        a.add_argument(
            "--with-scheduler", action="store_true", help="also run the real kube-scheduler"
        )
        a.add_argument(
            "--with-controller-manager",
            action="store_true",
            help="also run kube-controller-manager (every controller but node-lifecycle)",
        )
        a.add_argument(
            "--controllers",
            default="*,-node-lifecycle-controller",
            help="kube-controller-manager --controllers value (default: %(default)s)",
        )
        a.add_argument(
            "--feature-gates",
            default=None,
            help="feature gates for every component "
            "(default: $DRAKIT_FEATURE_GATES or drakit's DRA gates)",
        )
        a.set_defaults(func=run_up if name == "up" else run_foreground)
    down = actions.add_parser("down", help="stop a cluster started with `up DIR`")
    down.add_argument("dir", type=Path)
    down.set_defaults(func=run_down)


def _config(args: argparse.Namespace) -> ClusterConfig:
    from drakit.localcluster import ClusterConfig  # noqa: PLC0415

    config = ClusterConfig(
        work_dir=args.dir.resolve(),
        with_scheduler=args.with_scheduler,
        with_controller_manager=args.with_controller_manager,
        controllers=args.controllers,
    )
    if args.feature_gates is not None:
        config.feature_gates = args.feature_gates
    return config


def run_foreground(args: argparse.Namespace) -> int:
    from drakit.localcluster import LocalCluster, MissingBinaryError, StartError  # noqa: PLC0415

    args.dir.mkdir(parents=True, exist_ok=True)
    for stale in (READY_FILE, ERROR_FILE):
        (args.dir / stale).unlink(missing_ok=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    cluster = LocalCluster(_config(args))
    try:
        cluster.start()
    except (StartError, MissingBinaryError) as err:
        (args.dir / ERROR_FILE).write_text(str(err))
        print(f"drakit local-cluster: {err}", file=sys.stderr)
        return 1
    try:
        (args.dir / READY_FILE).write_text(cluster.server)
        print(f"kube-apiserver {cluster.server} is ready")
        print(f"  export KUBECONFIG={cluster.kubeconfig}")
        print("  kubectl get resourceslices")
        print(f"  logs: {cluster.work_dir / 'logs'}")
        while not stop.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        cluster.stop()
        (args.dir / READY_FILE).unlink(missing_ok=True)
    return 0


def run_up(args: argparse.Namespace) -> int:
    args.dir.mkdir(parents=True, exist_ok=True)
    if _running_pid(args.dir) is not None:
        print(f"drakit local-cluster: already running in {args.dir}", file=sys.stderr)
        return 1
    for stale in (READY_FILE, ERROR_FILE):
        (args.dir / stale).unlink(missing_ok=True)
    argv = [sys.executable, "-m", "drakit.localcluster", "run", str(args.dir)]
    argv += ["--with-scheduler"] if args.with_scheduler else []
    argv += ["--with-controller-manager"] if args.with_controller_manager else []
    argv += ["--controllers", args.controllers]
    if args.feature_gates is not None:
        argv += ["--feature-gates", args.feature_gates]
    with (args.dir / "launcher.log").open("ab") as log:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    (args.dir / PID_FILE).write_text(str(proc.pid))
    while proc.poll() is None:
        if (args.dir / READY_FILE).exists():
            print(f"export KUBECONFIG={(args.dir / 'kubeconfig').resolve()}")
            return 0
        time.sleep(0.2)
    err = (
        (args.dir / ERROR_FILE).read_text()
        if (args.dir / ERROR_FILE).exists()
        else "see launcher.log"
    )
    print(f"drakit local-cluster: failed to start: {err}", file=sys.stderr)
    return 1


def _running_pid(folder: Path) -> int | None:
    try:
        pid = int((folder / PID_FILE).read_text())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return None
    return pid


def run_down(args: argparse.Namespace) -> int:
    pid = _running_pid(args.dir)
    if pid is None:
        print(f"drakit local-cluster: nothing running in {args.dir}")
        (args.dir / PID_FILE).unlink(missing_ok=True)
        return 0
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and _running_pid(args.dir) is not None:
        time.sleep(0.2)
    if _running_pid(args.dir) is not None:
        os.kill(pid, signal.SIGKILL)
    (args.dir / PID_FILE).unlink(missing_ok=True)
    print(f"stopped the cluster in {args.dir}")
    return 0
