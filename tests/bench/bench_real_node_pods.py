"""Time from a pod's creation to Running on the real node, drakit's example driver against
upstream's Go driver (dra-example-driver v0.4.0): issue 34 point 5. Root only.

The environment is the reference suite's (hack/test-reference.sh, hack/reference/): a
control plane on 127.0.0.1 with upstream's kind feature gates, one real node (containerd,
runc, the kubelet), the charts staged for that node by hack/reference/staging.py, the same
images (upstream's Go driver built from the pinned module, drakit's example driver's image,
the bash+busybox stand-in for ``ubuntu:22.04``). Both drivers are installed side by side,
each with its own driver name and 8 GPUs, and stay installed for the whole run: each is
idle in the background while the other is measured.

The workload is upstream's ``basic-resourceclaimtemplate`` pod: one container, one GPU
from its own ResourceClaimTemplate-generated claim. Pods are created **one at a time**, so
each figure is one pod's latency through kube-controller-manager (the claim),
kube-scheduler (the allocation) and the kubelet (NodePrepareResources, CDI, the sandbox and
the container), with no queueing behind another pod. The drivers alternate pod by pod (the
order swapped every round), so the load of a shared machine drifts over both alike. Each
pod is deleted, and its claim gone, before the next one is created. One untimed pod per
driver warms the node up first (the kubelet's first registration, image snapshots).

The time is taken from one watch on the pods: the arrival of the pod's ADDED event to the
arrival of the first update with ``status.phase: Running``. Both come from the apiserver
through the same stream, so the watch's own delay cancels out. (The apiserver's
timestamps, ``creationTimestamp`` and the conditions' ``lastTransitionTime``, have
one-second resolution: their difference is printed beside as a check.)

Reported per driver: p50 and p99 of each round (20 pods: p99 is the slowest pod), their
median over the rounds, p50/p99 of all the rounds' pods pooled, and the ratios drakit/Go.

    .venv/bin/python tests/bench/bench_real_node_pods.py [--pods 20] [--rounds 3]
        [--kube-version v1.37.2]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "hack" / "reference"))

import launcher  # noqa: E402
import staging  # noqa: E402

from drakit.demo.real_node import RealNodeError, helm  # noqa: E402
from drakit.kubeapi.client import load_client  # noqa: E402
from drakit.kubeapi.errors import ApiError  # noqa: E402
from drakit.kubeapi.resources import (  # noqa: E402
    NAMESPACES,
    PODS,
    RESOURCE_CLAIM_TEMPLATES,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
    Resource,
)
from drakit.localcluster import StartError  # noqa: E402
from drakit.localcluster.assets import require_binary  # noqa: E402
from drakit.localcluster.kubeversions import resolve_version  # noqa: E402
from drakit.localcluster.node import LocalNode  # noqa: E402
from drakit.localcluster.process import free_port  # noqa: E402

NAMESPACE = "bench-pods"
WORKLOAD_IMAGE = "docker.io/library/ubuntu:22.04"
GO_IMAGE = "registry.k8s.io/dra-example-driver/dra-example-driver:v0.4.0"
GO_MODULE = "sigs.k8s.io/dra-example-driver"
#: Driver names stay short: the kubelet's registration socket is
#: <node>/kubelet/plugins_registry/<driver>-<pod uid>-reg.sock, at most 107 bytes.
DRIVER_NAMES = {"drakit": "drakit.example.com", "go": "go.example.com"}
#: Seconds one pod may take to run, or to be gone with its claim; a driver install to publish.
POD_TIMEOUT = 120.0
INSTALL_TIMEOUT = 180.0
OUT = REPO / "build" / "bench" / "real-node-pods"


class BenchError(Exception):
    """The benchmark cannot go on; the message says which step and why."""


# -- what the run needs, built or found in the caches ---------------------------------------


@dataclass(frozen=True)
class Built:
    """The reference suite's binaries and images, as hack/test-reference.sh builds them."""

    module_dir: Path
    images: dict[str, Path]  # image name -> OCI archive
    drakit_image: str


def run_tool(argv: Sequence[str], env: dict[str, str] | None = None, cwd: Path = REPO) -> str:
    """Run a build script; its stdout, or BenchError with the end of its stderr."""
    proc = subprocess.run(
        list(argv),
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        check=False,
        timeout=3600,
    )
    if proc.returncode != 0:
        raise BenchError(f"{' '.join(argv)} failed:\n{proc.stderr.strip()[-2000:]}")
    return proc.stdout


def build(kube_version: str) -> Built:
    """Build or reuse (every script caches by content) what both drivers' runs need."""
    pinned = resolve_version(None)
    # The Go driver's binaries do not depend on the cluster's version: the pinned build.
    ref_bin = run_tool(
        [str(REPO / "hack" / "build-binaries.sh"), "reference"], {"DRAKIT_KUBE_VERSION": pinned}
    ).splitlines()[-1]
    run_tool(
        [str(REPO / "hack" / "build-binaries.sh"), "kube", "etcd", "node", "helm"],
        {"DRAKIT_KUBE_VERSION": kube_version},
    )
    module_dir = Path(
        run_tool(
            ["go", "list", "-m", "-f", "{{.Dir}}", GO_MODULE],
            cwd=REPO / "hack" / "tools" / "dra-example-e2e",
        ).strip()
    )
    listed = run_tool(
        [str(REPO / "hack" / "reference" / "build-images.sh"), f"{ref_bin}/reference"],
        {"REFERENCE_GO_IMAGE": "1"},
    )
    images = {name: Path(archive) for name, archive in (ln.split() for ln in listed.splitlines())}
    script = REPO / "examples" / "example-driver" / "hack" / "build-image.sh"
    archive = Path(run_tool([str(script)]).splitlines()[-1])
    drakit_image = oci_ref_name(archive)
    images[drakit_image] = archive
    return Built(module_dir, images, drakit_image)


def oci_ref_name(archive: Path) -> str:
    """The image name buildah recorded in an OCI archive's index."""
    with tarfile.open(archive) as tar:
        member = tar.extractfile("index.json")
        if member is None:
            raise BenchError(f"{archive}: no index.json")
        index = json.load(member)
    return str(index["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"])


# -- the drivers ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Driver:
    """One installed driver: its label in the report, DRA driver name, chart and values."""

    label: str
    name: str
    chart: Path

    @property
    def release(self) -> str:
        return f"bench-{self.label}"

    @property
    def template(self) -> str:
        return f"gpu-{self.label}"


def stage_drivers(built: Built, node: LocalNode, server: str, work: Path) -> list[Driver]:
    """Both charts staged for this node (the reference suite's staging)."""
    host, port = server.removeprefix("https://").rsplit(":", 1)
    facts = staging.NodeFacts(host, int(port), node.kubelet_dir, node.cdi_root)
    go_chart = staging.stage_chart(
        built.module_dir / "deployments" / "helm" / "dra-example-driver",
        work / "chart-go",
        staging.go_values(facts),
        staging.GO_PATCHES,
    )
    repository, _, tag = built.drakit_image.rpartition(":")
    drakit_chart = staging.stage_chart(
        REPO / "examples" / "example-driver" / "deployments" / "helm" / "example-driver",
        work / "chart-drakit",
        staging.drakit_values(facts, repository, tag, free_port()),
    )
    return [
        Driver("drakit", DRIVER_NAMES["drakit"], drakit_chart),
        Driver("go", DRIVER_NAMES["go"], go_chart),
    ]


def install(driver: Driver, helm_bin: Path, work: Path, kubeconfig: str, api: Any) -> None:
    """helm install the driver, then wait until its slices list devices (as the suite does)."""
    try:
        helm(
            helm_bin,
            work / "helm",
            kubeconfig,
            "install",
            driver.release,
            str(driver.chart),
            "--namespace",
            driver.release,
            "--create-namespace",
            "--set",
            f"driverName={driver.name}",
        )
    except RealNodeError as err:
        raise BenchError(f"{driver.label}: {err}") from err
    slices = Resource(api, RESOURCE_SLICES)

    def published() -> bool:
        items = slices.list(field_selector=f"spec.driver={driver.name}").items
        return any(item["spec"].get("devices") for item in items)

    wait_for(published, INSTALL_TIMEOUT, f"{driver.label}: ResourceSlices with devices")


def wait_for(check: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll ``check`` (untimed steps only) until true; BenchError after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(ApiError):
            if check():
                return
        time.sleep(0.2)
    raise BenchError(f"timed out after {timeout:g}s waiting for {what}")


# -- the pods' timeline, from one watch ------------------------------------------------------


@dataclass
class Timeline:
    """When the watch delivered each step of one pod (time.monotonic()), and the
    apiserver's own one-second timestamps."""

    added: float | None = None
    scheduled: float | None = None
    running: float | None = None
    deleted: float | None = None
    server_seconds: float | None = None  # Ready.lastTransitionTime - creationTimestamp
    phase: str = ""


@dataclass
class PodWatcher:
    """Watches the benchmark namespace's pods in a thread and records each pod's Timeline."""

    api: Any
    timelines: dict[str, Timeline] = field(default_factory=dict)
    _changed: threading.Condition = field(default_factory=threading.Condition)
    _stopped: threading.Event = field(default_factory=threading.Event)
    _stream: Any = None
    _error: BaseException | None = None

    def start(self) -> None:
        pods = Resource(self.api, PODS)
        since = pods.list(NAMESPACE).resource_version
        threading.Thread(
            target=self._run, args=(pods, since), name="pod-watch", daemon=True
        ).start()

    def stop(self) -> None:
        self._stopped.set()
        if self._stream is not None:
            self._stream.close()

    def wait(self, name: str, step: str, timeout: float = POD_TIMEOUT) -> Timeline:
        """The pod's Timeline once ``step`` (an attribute of Timeline) is recorded."""
        with self._changed:
            ok = self._changed.wait_for(
                lambda: self._error is not None or getattr(self.timeline(name), step) is not None,
                timeout,
            )
            if self._error is not None:
                raise BenchError(f"the pod watch failed: {self._error}")
            if not ok:
                phase = self.timeline(name).phase or "not seen"
                raise BenchError(f"pod {NAMESPACE}/{name}: not {step} after {timeout:g}s ({phase})")
            return self.timeline(name)

    def timeline(self, name: str) -> Timeline:
        return self.timelines.setdefault(name, Timeline())

    def _run(self, pods: Resource, since: str) -> None:
        try:
            while not self._stopped.is_set():  # the server ends a watch at its timeout
                with pods.watch(NAMESPACE, resource_version=since) as stream:
                    self._stream = stream
                    for event in stream:
                        since = event.resource_version or since
                        if event.type != "BOOKMARK":
                            self._record(event.type, event.object, time.monotonic())
        except BaseException as err:  # shown to the waiting thread
            if not self._stopped.is_set():
                with self._changed:
                    self._error = err
                    self._changed.notify_all()

    def _record(self, kind: str, pod: dict[str, Any], now: float) -> None:
        status = pod.get("status") or {}
        with self._changed:
            line = self.timeline(pod["metadata"]["name"])
            line.phase = str(status.get("phase", ""))
            if line.added is None:
                line.added = now  # ADDED, or the first event seen for it
            if line.scheduled is None and _condition(status, "PodScheduled") is not None:
                line.scheduled = now
            if line.running is None and line.phase == "Running":
                line.running = now
                ready = _condition(status, "Ready")
                if ready is not None:
                    line.server_seconds = _time(ready["lastTransitionTime"]) - _time(
                        pod["metadata"]["creationTimestamp"]
                    )
            if kind == "DELETED":
                line.deleted = now
            self._changed.notify_all()


def _condition(status: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for cond in status.get("conditions") or ():
        if cond.get("type") == kind and cond.get("status") == "True":
            return dict(cond)
    return None


def _time(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


# -- one pod ---------------------------------------------------------------------------------


def create_templates(api: Any, drivers: Sequence[Driver]) -> None:
    """The namespace and one ResourceClaimTemplate per driver: one GPU of its DeviceClass."""
    Resource(api, NAMESPACES).create({"metadata": {"name": NAMESPACE}})
    templates = Resource(api, RESOURCE_CLAIM_TEMPLATES)
    for driver in drivers:
        request = {"name": "gpu", "exactly": {"deviceClassName": driver.name}}
        templates.create(
            {
                "metadata": {"name": driver.template, "namespace": NAMESPACE},
                "spec": {"spec": {"devices": {"requests": [request]}}},
            }
        )
    # Pods are refused until the namespace's default ServiceAccount exists.
    wait_for(
        lambda: bool(Resource(api, PODS).create(pod_manifest("sa-probe", "none"), dry_run=True)),
        POD_TIMEOUT,
        f"namespace {NAMESPACE}'s default ServiceAccount",
    )


def pod_manifest(name: str, template: str) -> dict[str, Any]:
    """Upstream's basic-resourceclaimtemplate pod (demo/examples), with its own claim."""
    return {
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "terminationGracePeriodSeconds": 10,
            "containers": [
                {
                    "name": "ctr0",
                    "image": WORKLOAD_IMAGE,
                    "imagePullPolicy": "Never",
                    "command": ["bash", "-c"],
                    "args": ["export; trap 'exit 0' TERM; sleep 9999 & wait"],
                    "resources": {"claims": [{"name": "gpu"}]},
                }
            ],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}],
        },
    }


def one_pod(api: Any, watcher: PodWatcher, driver: Driver, name: str) -> Timeline:
    """Create the pod, wait for Running, delete it and wait until it and its claim are gone."""
    pods, claims = Resource(api, PODS), Resource(api, RESOURCE_CLAIMS)
    pods.create(pod_manifest(name, driver.template))
    line = watcher.wait(name, "running")
    # Running with a claim means the kubelet prepared it; check it was this driver's device.
    [claim] = claims.list(NAMESPACE).items
    results = claim["status"]["allocation"]["devices"]["results"]
    if [r["driver"] for r in results] != [driver.name]:
        raise BenchError(f"pod {name}: claim allocated {results}, expected one {driver.name} GPU")
    pods.delete(name, NAMESPACE)
    watcher.wait(name, "deleted")
    wait_for(
        lambda: not claims.list(NAMESPACE).items,
        POD_TIMEOUT,
        f"pod {name}'s claim to be deleted",
    )
    return line


# -- figures ---------------------------------------------------------------------------------


@dataclass
class Samples:
    """One driver's timelines, by round."""

    rounds: list[list[Timeline]] = field(default_factory=list)

    def latencies(self, round_: Sequence[Timeline]) -> list[float]:
        return [
            t.running - t.added for t in round_ if t.running is not None and t.added is not None
        ]

    def pooled(self) -> list[float]:
        return [x for r in self.rounds for x in self.latencies(r)]


def p(values: Sequence[float], percentile: int) -> float:
    """Nearest-rank percentile (the median for 50), as the other benchmarks report it."""
    ordered = sorted(values)
    if percentile == 50:
        return statistics.median(ordered)
    index = min(len(ordered) - 1, max(0, round(percentile / 100 * len(ordered)) - 1))
    return ordered[index]


def report(samples: dict[str, Samples], pods: int) -> None:
    """Per-round and overall figures, and the drakit/Go ratios."""
    print(f"\ncreation -> Running, {pods} pods per driver and round (seconds):")
    print(
        "| driver | round p50 | round p99 | median p50 | median p99 | pooled p50 | pooled p99 |"
        " created -> scheduled p50 | apiserver s p50 |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    figures: dict[str, tuple[float, float]] = {}
    for label, s in samples.items():
        p50s = [p(s.latencies(r), 50) for r in s.rounds]
        p99s = [p(s.latencies(r), 99) for r in s.rounds]
        figures[label] = (statistics.median(p50s), statistics.median(p99s))
        lines = [t for r in s.rounds for t in r]
        scheduled = [t.scheduled - t.added for t in lines if t.scheduled and t.added]
        server = [t.server_seconds for t in lines if t.server_seconds is not None]
        each50, each99 = (", ".join(f"{x:.2f}" for x in xs) for xs in (p50s, p99s))
        print(
            f"| {label} | {each50} | {each99} "
            f"| **{figures[label][0]:.2f}** | **{figures[label][1]:.2f}** "
            f"| {p(s.pooled(), 50):.2f} | {p(s.pooled(), 99):.2f} "
            f"| {p(scheduled, 50):.2f} | {p(server, 50) if server else float('nan'):.0f} |"
        )
    (d50, d99), (g50, g99) = figures["drakit"], figures["go"]
    print(f"ratio drakit/Go: p50 {d50 / g50:.2f}x, p99 {d99 / g99:.2f}x (medians of the rounds)")


# -- the run ---------------------------------------------------------------------------------


def measure(
    api: Any, watcher: PodWatcher, drivers: list[Driver], pods: int, rounds: int
) -> dict[str, Samples]:
    """Warm-up pods, then ``rounds`` rounds of ``pods`` pods per driver, alternating."""
    for driver in drivers:
        one_pod(api, watcher, driver, f"warmup-{driver.label}")
    samples = {d.label: Samples() for d in drivers}
    for r in range(rounds):
        began = time.monotonic()
        order = drivers if r % 2 == 0 else drivers[::-1]
        for s in samples.values():
            s.rounds.append([])
        for i in range(pods):
            for driver in order:
                line = one_pod(api, watcher, driver, f"{driver.label}-{r}-{i}")
                samples[driver.label].rounds[-1].append(line)
        medians = ", ".join(
            f"{label} p50 {p(s.latencies(s.rounds[-1]), 50):.2f}s" for label, s in samples.items()
        )
        print(f"round {r + 1}/{rounds}: {medians} ({time.monotonic() - began:.0f}s)", flush=True)
    return samples


def run(args: argparse.Namespace) -> int:
    began = time.monotonic()
    built = build(args.kube_version)
    helm_bin = require_binary("helm", "helm", kube_version=args.kube_version)
    print(f"built or found everything in {time.monotonic() - began:.0f}s", flush=True)
    signal.signal(signal.SIGTERM, launcher._raise_interrupted)
    signal.signal(signal.SIGHUP, launcher._raise_interrupted)
    work = Path(tempfile.mkdtemp(prefix="drakit-bench-pods-"))
    watcher: PodWatcher | None = None
    try:
        with launcher._cluster_and_node(OUT, args.kube_version) as (cluster, node):
            setup = time.monotonic()
            for name, archive in built.images.items():
                launcher._import(node, name, archive)
            drivers = stage_drivers(built, node, cluster.server, work)
            api = load_client(cluster.kubeconfig)
            for driver in drivers:
                install(driver, helm_bin, work, cluster.kubeconfig, api)
            create_templates(api, drivers)
            watcher = PodWatcher(load_client(cluster.kubeconfig))
            watcher.start()
            print(
                f"node, images, both drivers ready in {time.monotonic() - setup:.0f}s", flush=True
            )
            samples = measure(api, watcher, drivers, args.pods, args.rounds)
            watcher.stop()
    finally:
        if watcher is not None:
            watcher.stop()
        shutil.rmtree(work, ignore_errors=True)
    report(samples, args.pods)
    print(f"whole run (builds cached): {time.monotonic() - began:.0f}s; logs in {OUT / 'logs'}")
    return 0


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=20, help="pods per driver and round (20)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (3)")
    parser.add_argument(
        "--kube-version", default=None, help="Kubernetes of the control plane and kubelet"
    )
    args = parser.parse_args(argv)
    args.kube_version = resolve_version(args.kube_version)
    if args.pods < 1 or args.rounds < 1:
        parser.error("--pods and --rounds must be at least 1")
    return args


def main(argv: list[str]) -> int:
    if os.geteuid() != 0:
        print("real node pods: skipped (needs root)")
        return 0
    args = parse_args(argv)
    try:
        return run(args)
    except (BenchError, StartError, staging.StagingError) as err:
        print(f"real node pods: {err}", file=sys.stderr)
        return 1
    except (launcher.SignalledError, KeyboardInterrupt):
        print("real node pods: interrupted; the machine is restored", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
