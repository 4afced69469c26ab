"""Runs dra-example-driver v0.4.0's own e2e suite against a driver on this machine's real
node (the body of hack/test-reference.sh, which builds what it needs first).

Steps: a control plane on 127.0.0.1 (etcd, kube-apiserver, kube-scheduler,
kube-controller-manager) with upstream's kind feature gates, one real node
(containerd with CDI, runc, the kubelet), the images imported into the node, the
driver's chart staged for this node (staging.py), then the precompiled suite under
the ginkgo CLI with a JUnit report, and the per-spec table (suite_report.py).

Everything started here is stopped and the machine restored on exit, on Ctrl-C and on
SIGTERM/SIGHUP; after SIGKILL, the next run's launcher sweeps the leftovers. Only the
output folder stays: the JUnit report, ginkgo's output, the table and every
component's and pod's logs.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

import certmanager
import staging
import suite_report

from drakit.localcluster import ClusterConfig, LocalCluster, StartError
from drakit.localcluster.kubeversions import minor_of, resolve_version
from drakit.localcluster.node import LocalNode, NodeConfig
from drakit.localcluster.nodegroup import GroupConfig, NodeGroup
from drakit.localcluster.process import free_port

#: Upstream's demo/scripts/kind-cluster-config.yaml gates (the suite targets Kubernetes 1.36).
KIND_GATES = (
    "DynamicResourceAllocation",
    "DRAAdminAccess",
    "DRAWorkloadResourceClaims",
    "GangScheduling",
    "GenericWorkload",
    "DRAExtendedResource",
    "DRADeviceBindingConditions",
    "DRANodeAllocatableResources",
    "DRAConsumableCapacity",
)
#: Gates a minor no longer knows (its components refuse to start with them).
GONE_GATES = {37: ("GangScheduling",)}
#: Upstream's runtime-config is resource.k8s.io/v1beta1 (always on in drakit's control
#: plane) and scheduling.k8s.io/v1alpha2, which 1.37 no longer serves: its Workload and
#: PodGroup API is v1beta1.
RUNTIME_CONFIG = {36: "scheduling.k8s.io/v1alpha2=true", 37: "scheduling.k8s.io/v1beta1=true"}
#: Service webhooks are called at their endpoint (the Pod's address) instead of the
#: Service's ClusterIP, which nothing routes on this node (no service proxy). In kind,
#: kube-proxy takes the ClusterIP to the same endpoint. drakit's chart calls a URL and
#: is not affected; both drivers get the flag, so that their control planes are alike.
APISERVER_ARGS = ("--enable-aggregator-routing=true",)
#: The whole suite; ginkgo's default (1 h) is too short for 23 specs on two cores.
SUITE_TIMEOUT = "3h"


class SignalledError(Exception):
    """SIGTERM or SIGHUP: unwind so that every ``finally`` restores the machine."""


def _raise_interrupted(signum: int, _frame: FrameType | None) -> None:
    raise SignalledError(signal.Signals(signum).name)


def feature_gates(minor: int) -> str:
    """Upstream's gates as ``minor`` takes them (the GA ones only log a warning)."""
    gone = GONE_GATES.get(minor, ())
    return ",".join(f"{gate}=true" for gate in KIND_GATES if gate not in gone)


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="hack/test-reference.sh", description=__doc__)
    p.add_argument("--driver", choices=("go", "drakit"), required=True)
    p.add_argument("--out", type=Path, required=True, help="output folder (reports, logs)")
    p.add_argument("--bin", type=Path, required=True, help="folder with e2e.test and ginkgo")
    p.add_argument("--module-dir", type=Path, required=True, help="dra-example-driver v0.4.0")
    p.add_argument("--chart", type=Path, required=True, help="the chart to stage")
    p.add_argument(
        "--image", action="append", default=[], metavar="NAME=ARCHIVE", help="image to import"
    )
    p.add_argument(
        "--driver-image", default="", help="NAME:TAG of the driver's image (drakit's chart)"
    )
    p.add_argument(
        "--cert-manager",
        type=Path,
        default=None,
        help="hack/tools/cert-manager's binary: cert-manager for the Go chart's webhook",
    )
    p.add_argument(
        "--cert-manager-chart", type=Path, default=None, help="cert-manager's chart (its CRDs)"
    )
    p.add_argument("--helm", type=Path, default=None, help="helm, to render cert-manager's CRDs")
    p.add_argument("--exclude", type=Path, default=None, help="exclusion file")
    p.add_argument("--procs", type=int, default=2, help="ginkgo parallel processes")
    p.add_argument(
        "--kube-version", default=None, help="Kubernetes version of control plane and kubelet"
    )
    p.add_argument(
        "--nodes",
        type=int,
        default=1,
        help="real nodes: 1 runs one on the host's network (the charts staged for it); more "
        "run each in its own network namespace with pod networking and kube-proxy, and the "
        "charts keep their defaults for a real cluster",
    )
    p.add_argument("ginkgo_args", nargs="*", help="more ginkgo CLI flags (e.g. --focus=...)")
    return p.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    exclusions = suite_report.read_exclusions(args.exclude) if args.exclude else []
    images = [_image_arg(item) for item in args.image]
    args.out.mkdir(parents=True, exist_ok=True)
    # Nothing of an earlier run may pass for this one's (a stale junit.xml above all).
    for stale in ("junit.xml", "results.txt", "ginkgo.log"):
        (args.out / stale).unlink(missing_ok=True)
    shutil.rmtree(args.out / "logs", ignore_errors=True)
    signal.signal(signal.SIGTERM, _raise_interrupted)
    signal.signal(signal.SIGHUP, _raise_interrupted)
    started = time.monotonic()
    try:
        version = resolve_version(args.kube_version)
        with _cluster_and_nodes(args.out, version, args.nodes) as (cluster, nodes):
            names = ", ".join(n.name for n in nodes)
            print(f"reference: nodes {names} Ready ({time.monotonic() - started:.0f}s)")
            for node in nodes:
                for name, archive in images:
                    _import(node, name, archive)
            chart = _stage(args, cluster, nodes)
            with (
                _cert_manager(args, cluster),
                _pod_logs_kept(nodes, args.out / "logs" / "pods"),
            ):
                code = _run_suite(args, cluster.kubeconfig, chart)
    except (SignalledError, KeyboardInterrupt) as err:
        print(
            f"reference: interrupted ({err or 'SIGINT'}); the machine is restored", file=sys.stderr
        )
        return 130
    return _report(args.out, exclusions, code, time.monotonic() - started)


def _image_arg(item: str) -> tuple[str, Path]:
    name, sep, archive = item.partition("=")
    if not sep or not Path(archive).is_file():
        raise SystemExit(f"reference: --image {item!r}: expected NAME=ARCHIVE of an existing file")
    return name, Path(archive)


@contextmanager
def _cluster_and_nodes(
    out: Path, version: str, count: int
) -> Iterator[tuple[LocalCluster, list[LocalNode]]]:
    """One node on the host's network, or ``count`` nodes each in its own namespaces."""
    if count == 1:
        with _cluster_and_node(out, version) as (cluster, node):
            yield cluster, [node]
        return
    group = NodeGroup(
        GroupConfig(
            nodes=count,
            work_dir=_short_folder(),
            kube_version=version,
            feature_gates=feature_gates(minor_of(version)),
            runtime_config=RUNTIME_CONFIG.get(minor_of(version), ""),
            extra_apiserver_args=APISERVER_ARGS,
        )
    )
    try:
        group.start()
        assert group.cluster is not None
        yield group.cluster, list(group.nodes)
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
        if group.cluster is not None:
            _keep_logs(out, group.cluster, list(group.nodes))
        group.stop()
        shutil.rmtree(group.work_dir, ignore_errors=True)


@contextmanager
def _cluster_and_node(out: Path, version: str) -> Iterator[tuple[LocalCluster, LocalNode]]:
    """The control plane and the node of Kubernetes ``version``, in temporary folders;
    their logs are copied to ``out`` before both are stopped."""
    gates = feature_gates(minor_of(version))
    config = ClusterConfig(
        with_scheduler=True,
        with_controller_manager=True,
        real_nodes=True,
        kube_version=version,
        feature_gates=gates,
        runtime_config=RUNTIME_CONFIG.get(minor_of(version), ""),
        extra_apiserver_args=APISERVER_ARGS,
    )
    cluster = LocalCluster(config)
    node: LocalNode | None = None
    # A short folder: the drivers' sockets are <kubelet>/plugins/<driver>/dra-<pod uid>.sock
    # and <kubelet>/plugins_registry/<driver>-<pod uid>-reg.sock, and a Unix socket path
    # has at most 107 bytes: with a release's driver name (dra-XXXXXX.example.com) the
    # folder may have 38 (upstream's driver fails to bind under /tmp/drakit-node-*/).
    node_dir = _short_folder()
    try:
        cluster.start()
        node_config = NodeConfig(
            kubeconfig=Path(cluster.kubeconfig),
            work_dir=node_dir,
            feature_gates=gates,
            kube_version=version,
        )
        node = LocalNode(node_config)
        node.start()
        yield cluster, node
    finally:
        # A second Ctrl-C or SIGTERM must not cut the restore short.
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
        _keep_logs(out, cluster, [node] if node is not None else [])
        if node is not None:
            node.stop()  # restores mounts first: only then is the folder plain files
        shutil.rmtree(node_dir, ignore_errors=True)
        cluster.stop()


def _short_folder() -> Path:
    """A new folder /tmp/dkXXXX (mkdtemp's names are 4 bytes too long for the sockets)."""
    for _ in range(100):
        path = Path("/tmp") / f"dk{secrets.token_hex(2)}"
        try:
            path.mkdir(mode=0o755)
        except FileExistsError:
            continue
        return path
    raise StartError("no free /tmp/dkXXXX folder name for the node")


@contextmanager
def _pod_logs_kept(nodes: list[LocalNode], dst: Path, every: float = 5.0) -> Iterator[None]:
    """Copy the nodes' pod logs to ``dst`` every ``every`` seconds while the suite runs:
    the kubelet deletes a pod's logs with the pod, and the suite uninstalls each driver
    (the suite's own diagnostics show only the kubelet plugin's last 20 lines)."""
    stop = threading.Event()

    def copy() -> None:
        for node in nodes:
            src = node.paths.pod_logs
            if src.is_dir():
                shutil.copytree(src, dst, dirs_exist_ok=True, ignore_dangling_symlinks=True)

    def loop() -> None:
        while not stop.wait(every):
            # A file removed mid-copy: the next round gets the rest.
            with contextlib.suppress(OSError, shutil.Error):
                copy()

    worker = threading.Thread(target=loop, name="pod-logs", daemon=True)
    worker.start()
    try:
        yield
    finally:
        stop.set()
        worker.join()


def _keep_logs(out: Path, cluster: LocalCluster, nodes: list[LocalNode]) -> None:
    """Copy the components' and pods' logs into ``out/logs`` (the work folders go)."""
    logs = out / "logs"
    pairs = [(cluster.work_dir / "logs", logs / "control-plane")]
    for node in nodes:
        folder = "node" if len(nodes) == 1 else f"node-{node.name}"
        pairs += [(node.paths.logs, logs / folder), (node.paths.pod_logs, logs / "pods")]
    for src, dst in pairs:
        if src.is_dir():
            # Pod logs copied during the run stay: their pods may be gone by now.
            shutil.copytree(src, dst, dirs_exist_ok=True, ignore_dangling_symlinks=True)


def _import(node: LocalNode, name: str, archive: Path) -> None:
    """Import ``archive`` so that the node has ``name`` (buildah's OCI archives carry it
    as their ref name; the repository is the base name ctr completes it with)."""
    node.import_image(archive, base_name=name.rsplit(":", 1)[0])
    listed = node.ctr("images", "ls", "-q").stdout.split()
    if name not in listed:
        raise StartError(f"importing {archive} did not give the node image {name} ({listed})")
    print(f"reference: image {name} imported")


@contextmanager
def _cert_manager(args: argparse.Namespace, cluster: LocalCluster) -> Iterator[None]:
    """cert-manager (certmanager.py) when given: its CRDs, controller and cainjector."""
    if args.cert_manager is None:
        yield
        return
    if args.cert_manager_chart is None or args.helm is None:
        raise StartError("--cert-manager needs --cert-manager-chart and --helm")
    crds = certmanager.render_crds(args.helm, args.cert_manager_chart, cluster.kube_version)
    certmanager.install_crds(cluster.kubeconfig, crds)
    logs = args.out / "logs" / "cert-manager"
    with certmanager.running(args.cert_manager, cluster.kubeconfig, logs):
        yield


def _stage(args: argparse.Namespace, cluster: LocalCluster, nodes: list[LocalNode]) -> Path:
    dest = args.out / "chart"
    if len(nodes) > 1:  # a cluster: each chart as it is, but for drakit's local image
        if args.driver == "go":
            return staging.stage_chart(args.chart, dest, {})
        repository, _, tag = args.driver_image.rpartition(":")
        return staging.stage_chart(args.chart, dest, staging.drakit_cluster_values(repository, tag))
    node = nodes[0]
    host, port = cluster.server.removeprefix("https://").rsplit(":", 1)
    facts = staging.NodeFacts(host, int(port), node.kubelet_dir, node.cdi_root)
    dest = args.out / "chart"
    if args.driver == "go":
        values = staging.go_values(facts, webhook_port=free_port())
        return staging.stage_chart(args.chart, dest, values, staging.GO_PATCHES)
    repository, _, tag = args.driver_image.rpartition(":")
    values = staging.drakit_values(facts, repository, tag, free_port())
    return staging.stage_chart(args.chart, dest, values)


def _run_suite(args: argparse.Namespace, kubeconfig: str, chart: Path) -> int:
    """The precompiled suite under the ginkgo CLI; its output goes to the terminal and
    to ``out/ginkgo.log``. Returns ginkgo's exit code."""
    helm_home = Path(tempfile.mkdtemp(prefix="drakit-reference-helm-"))
    env = {
        **os.environ,
        "KUBECONFIG": kubeconfig,
        "HELM_CHART_PATH": str(chart),
        # The suite's Helm SDK would write its cache and config under $HOME.
        "HELM_CACHE_HOME": str(helm_home / "cache"),
        "HELM_CONFIG_HOME": str(helm_home / "config"),
        "HELM_DATA_HOME": str(helm_home / "data"),
    }
    argv = [
        str(args.bin / "ginkgo"),
        "run",
        f"--procs={args.procs}",
        f"--timeout={SUITE_TIMEOUT}",
        "--no-color",
        "-v",
        f"--output-dir={args.out}",
        "--junit-report=junit.xml",
        *args.ginkgo_args,
        str(args.bin / "e2e.test"),
        "--",
        f"--demo-manifests-dir={args.module_dir / 'demo' / 'examples'}",
    ]
    print("reference: " + " ".join(argv), flush=True)
    log_path = args.out / "ginkgo.log"
    try:
        with log_path.open("w") as log:
            proc = subprocess.Popen(
                argv,
                cwd=args.module_dir / "test" / "e2e",
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                start_new_session=True,  # its group is stopped as a whole on interrupt
            )
            try:
                assert proc.stdout is not None
                for line in proc.stdout:
                    sys.stdout.write(line)
                    log.write(line)
                return proc.wait()
            finally:
                if proc.poll() is None:
                    _stop_group(proc)
    finally:
        shutil.rmtree(helm_home, ignore_errors=True)


def _stop_group(proc: subprocess.Popen[str]) -> None:
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _report(
    out: Path, exclusions: list[suite_report.Exclusion], ginkgo_code: int, seconds: float
) -> int:
    junit = out / "junit.xml"
    if not junit.is_file():
        print(f"reference: ginkgo exited {ginkgo_code} without a JUnit report", file=sys.stderr)
        return 1
    results = suite_report.read_junit(junit)
    table, code = suite_report.render(results, exclusions)
    table += f"\nWALL TIME {seconds / 60:.1f} min (ginkgo exit code {ginkgo_code})"
    (out / "results.txt").write_text(table + "\n")
    print(table)
    return code


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except (StartError, staging.StagingError, suite_report.ReportError) as error:
        print(f"reference: {error}", file=sys.stderr)
        sys.exit(1)
