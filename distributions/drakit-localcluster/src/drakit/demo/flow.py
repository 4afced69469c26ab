"""``make demo``: one GPU claim through the whole drakit flow, told for a person.

Steps: a local control plane (etcd, kube-apiserver, kube-scheduler v1.37.2,
no kube-controller-manager), a simulated node with the kubelet harness (the
kubelet's own DRA code) and drakit's node plugin (example backend), drakit's
controller; then a pod with a claim template: generated claim, allocation,
the CDI devices each container gets, where the metrics are; then clean-up.

Runs non-interactively and exits by itself (``--hold`` waits for Ctrl-C
before the clean-up, to look around with kubectl). A step that fails is
reported in one line and the steps that depend on it are skipped; the demo
still cleans up and exits 0. Only a control plane that cannot start is an
error (exit 1). Component logs go to files in a folder that is printed and
kept after the demo.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from drakit.demo.text import Printer, table
from drakit.localcluster import StartError, stack
from drakit.localcluster.events import HarnessEvents
from drakit.localcluster.stack import DEVICE_CLASS, DRIVER, Component, NodeFolders

NODE = "demo-node"
NAMESPACE = "demo"
POD = "gpu-demo"
TEMPLATE = "one-gpu"
EXAMPLE = "gpu-pod.yaml"  # the ResourceClaimTemplate TEMPLATE and the Pod POD
STEP_TIMEOUT = 60.0


class StepError(Exception):
    """A demo step could not be completed; the message says what is missing."""


@dataclass
class Demo:
    """State shared by the steps, and everything to stop at the end."""

    out: Printer
    root: Path
    hold: bool
    cluster: Any = None
    client: Any = None
    folders: NodeFolders | None = None
    harness: Component | None = None
    events: HarnessEvents | None = None
    plugin: Component | None = None
    plugin_metrics: str = ""
    controller: Component | None = None
    controller_metrics: str = ""
    claim_name: str = ""
    claim_uid: str = ""
    missing: list[str] = field(default_factory=list)

    @property
    def logs(self) -> Path:
        return self.root / "logs"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m drakit.demo", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--hold",
        action="store_true",
        help="wait for Ctrl-C before cleaning up, to look around with kubectl",
    )
    parser.add_argument(
        "--real-node",
        action="store_true",
        help="run the flow on a real node instead of the kubelet harness: containerd, runc "
        "and the kubelet, drakit's image from deploy/Dockerfile and the Helm chart (root)",
    )
    args = parser.parse_args(argv)
    # Ctrl-C and SIGTERM end the demo early; clean-up still runs. SIGINT is set explicitly
    # because a shell starts background jobs with it ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _interrupt)
    demo = Demo(Printer(), stack.short_temp_root("dk-demo-"), args.hold)
    started = time.monotonic()
    demo.out.title("drakit demo: a GPU claim through Dynamic Resource Allocation, end to end")
    if args.real_node:
        return _real_node(demo, started)
    try:
        if not start_control_plane(demo):
            return 1
        run_steps(demo)
    except KeyboardInterrupt:
        demo.out.note("interrupted: cleaning up")
    finally:
        stop_everything(demo)
    elapsed = time.monotonic() - started
    if demo.missing:
        demo.out.title(f"Done in {elapsed:.0f}s; not shown: {'; '.join(demo.missing)}")
    else:
        demo.out.title(f"Done in {elapsed:.0f}s.")
    demo.out.line(f"Component logs: {demo.logs}")
    return 0


def _real_node(demo: Demo, started: float) -> int:
    from drakit.demo import real_node  # noqa: PLC0415

    try:
        ok = real_node.run(demo.out, demo.root, lambda: hold(demo) if demo.hold else None)
    except KeyboardInterrupt:
        demo.out.note("interrupted: cleaned up")
        return 130
    demo.out.title(f"Done in {time.monotonic() - started:.0f}s." if ok else "Failed (see above).")
    demo.out.line(f"Files and logs: {demo.root}")
    return 0 if ok else 1


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def run_steps(demo: Demo) -> None:
    """The steps after the control plane; each may fail on its own, and a step whose
    prerequisite failed is skipped with a note saying why."""
    node_ready = step(demo, "node", start_node)
    plugin_ready = node_ready and step(demo, "node plugin", start_node_plugin)
    if plugin_ready:
        step(demo, "slices", show_slices)
    controller_ready = step(demo, "controller", start_controller)
    workload = False
    if plugin_ready and controller_ready:
        step(demo, "devices before", lambda d: show_devices(d, "before the workload"))
        workload = step(demo, "workload", run_workload)
        if workload:
            step(demo, "devices after", lambda d: show_devices(d, "with the workload running"))
    else:
        demo.out.note("workload skipped: it needs the node plugin and the controller")
        demo.missing.append("workload")
    if plugin_ready or controller_ready:
        step(demo, "metrics", show_metrics)
    if demo.hold:
        hold(demo)
    if workload:
        step(demo, "clean-up", clean_up)


def step(demo: Demo, name: str, action: Callable[[Demo], None]) -> bool:
    """Run one step; report a failure in one line instead of a traceback."""
    try:
        action(demo)
    except (StepError, StartError, OSError) as err:
        demo.out.fail(f"{name}: {err}")
        demo.missing.append(name)
        return False
    except Exception as err:  # an API error or a bug: say which step, keep going
        demo.out.fail(f"{name}: {type(err).__name__}: {err}")
        demo.missing.append(name)
        return False
    return True


# -- control plane and components ---------------------------------------------------------------


def start_control_plane(demo: Demo) -> bool:
    from drakit.kubeapi.client import load_client  # noqa: PLC0415
    from drakit.localcluster import (  # noqa: PLC0415
        ClusterConfig,
        LocalCluster,
        MissingBinaryError,
    )

    demo.out.step("Control plane: etcd, kube-apiserver and kube-scheduler v1.37.2")
    began = time.monotonic()
    try:
        demo.cluster = LocalCluster(
            ClusterConfig(work_dir=demo.root, with_scheduler=True, with_controller_manager=False)
        )
        demo.cluster.start()
    except (StartError, MissingBinaryError) as err:
        demo.out.fail(f"the control plane did not start: {err}")
        return False
    demo.client = load_client(demo.cluster.kubeconfig, qps=100, burst=200)
    demo.out.ok(f"ready in {time.monotonic() - began:.1f}s (no kube-controller-manager)")
    demo.out.kv("apiserver", demo.cluster.server)
    demo.out.kv("kubeconfig", demo.cluster.kubeconfig)
    demo.out.kv("logs", str(demo.logs))
    return True


def start_node(demo: Demo) -> None:
    demo.out.step(f"Node {NODE!r}: a Node object and the kubelet harness")
    stack.create_ready_node(demo.client, NODE)
    stack.ensure_device_class(demo.client)
    demo.folders = NodeFolders(demo.root / NODE).create()
    from drakit.localcluster.assets import find_binary  # noqa: PLC0415

    if find_binary("kubelet-harness") is None:
        demo.out.note("building the kubelet harness from k8s.io/kubernetes (first run only)")
    binary = stack.build_harness(stack.REPO_ROOT)
    events = demo.logs / "kubelet-harness-events.jsonl"
    demo.events = HarnessEvents(events)
    demo.harness = Component(
        "kubelet-harness",
        stack.harness_command(
            binary,
            kubeconfig=demo.cluster.kubeconfig,
            node=NODE,
            folders=demo.folders,
            feature_gates=demo.cluster.feature_gates,
            events=events,
        ),
        demo.logs / "kubelet-harness.log",
    )
    demo.harness.start()
    demo.events.wait("ready", timeout=STEP_TIMEOUT, process=demo.harness)
    demo.out.ok("the kubelet's own DRA manager and plugin manager (k8s.io/kubernetes v1.37.2)")
    demo.out.kv("registrar", str(demo.folders.registrar))
    demo.out.kv("DeviceClass", f"{DEVICE_CLASS} (device.driver == {DRIVER!r})")


def start_node_plugin(demo: Demo) -> None:
    assert demo.folders is not None and demo.events is not None
    demo.out.step(f"Node plugin: drakit node-plugin --driver-name={DRIVER} --backend=example")
    port = stack.allocate_port()
    demo.plugin_metrics = stack.metrics_url(port)
    demo.plugin = Component(
        "node-plugin",
        stack.node_plugin_command(
            kubeconfig=demo.cluster.kubeconfig,
            node=NODE,
            folders=demo.folders,
            metrics_port=port,
        ),
        demo.logs / "node-plugin.log",
    )
    demo.plugin.start()
    registered = demo.events.wait(
        "registered", timeout=STEP_TIMEOUT, process=demo.plugin, driver=DRIVER
    )
    demo.out.ok(f"registered with the kubelet: {', '.join(registered.get('versions') or [])}")
    demo.out.kv("DRA socket", str(registered.get("endpoint", "")))


def show_slices(demo: Demo) -> None:
    from drakit.kubeapi.resources import RESOURCE_SLICES, Resource  # noqa: PLC0415

    slices = Resource(demo.client, RESOURCE_SLICES)

    def published() -> list[Any]:
        return slices.list(field_selector=f"spec.driver={DRIVER}").items

    watch = [demo.plugin] if demo.plugin is not None else []
    items = stack.wait_until(published, timeout=STEP_TIMEOUT, what="ResourceSlices", watch=watch)
    demo.out.line("ResourceSlices published by the node plugin:")
    rows = [
        (
            s["metadata"]["name"],
            s["spec"]["pool"]["name"],
            str(len(s["spec"].get("devices") or [])),
            s["spec"].get("nodeName", ""),
        )
        for s in items
    ]
    demo.out.block(table(("SLICE", "POOL", "DEVICES", "NODE"), rows))
    first = (items[0]["spec"].get("devices") or [{}])[0]
    attrs = ", ".join(f"{k}={_attr(v)}" for k, v in sorted(first.get("attributes", {}).items()))
    if attrs:
        demo.out.kv("e.g. device", f"{first.get('name')}: {attrs}")


def start_controller(demo: Demo) -> None:
    demo.out.step("Controller: drakit controller --claim-generation=all")
    port = stack.allocate_port()
    demo.controller_metrics = stack.metrics_url(port)
    demo.controller = Component(
        "controller",
        stack.controller_command(kubeconfig=demo.cluster.kubeconfig, metrics_port=port),
        demo.logs / "controller.log",
    )
    demo.controller.start()
    stack.wait_until(
        lambda: stack.scrape(demo.controller_metrics) is not None,
        timeout=STEP_TIMEOUT,
        what="the controller's metrics endpoint",
        watch=[demo.controller],
    )
    demo.out.ok("running: generates claims from templates, keeps their lifecycle")


# -- the workload -------------------------------------------------------------------------------


def _resources(demo: Demo) -> tuple[Any, Any]:
    from drakit.kubeapi.resources import PODS, RESOURCE_CLAIMS, Resource  # noqa: PLC0415

    return Resource(demo.client, PODS), Resource(demo.client, RESOURCE_CLAIMS)


def run_workload(demo: Demo) -> None:
    from drakit.kubeapi.resources import NAMESPACES, Resource  # noqa: PLC0415

    assert demo.events is not None and demo.folders is not None
    pods, claims = _resources(demo)
    objects = stack.load_example(EXAMPLE)
    demo.out.step(f"Workload: deploy/examples/{EXAMPLE} in namespace {NAMESPACE}")
    Resource(demo.client, NAMESPACES).create({"metadata": {"name": NAMESPACE}})
    stack.create_objects(demo.client, objects, NAMESPACE)
    demo.out.line(f"ResourceClaimTemplate {TEMPLATE}: 1 device of class {DEVICE_CLASS}")
    demo.out.line(f"Pod {POD}: container main uses the claim, container sidecar does not")

    demo.claim_name = _wait(demo, lambda: _generated_claim(pods), "a generated claim")
    claim = _wait(
        demo,
        lambda: (
            (c := claims.get(demo.claim_name, NAMESPACE))
            and (c.get("status") or {}).get("allocation")
            and c
        ),
        f"claim {demo.claim_name} to be allocated",
    )
    demo.claim_uid = claim["metadata"]["uid"]
    demo.out.ok(f"claim {NAMESPACE}/{demo.claim_name} generated by drakit's controller")
    results = claim["status"]["allocation"]["devices"]["results"]
    demo.out.ok("allocated by kube-scheduler:")
    demo.out.block(
        table(
            ("REQUEST", "DRIVER", "POOL", "DEVICE"),
            [(r["request"], r["driver"], r["pool"], r["device"]) for r in results],
        )
    )
    reserved = ", ".join(r["name"] for r in claim["status"].get("reservedFor") or [])
    node = _wait(
        demo,
        lambda: pods.get(POD, NAMESPACE)["spec"].get("nodeName"),
        f"pod {POD} to be bound",
    )
    demo.out.ok(f"reserved for pod {reserved}; pod bound to node {node}")

    prepared = demo.events.wait(
        "prepared", timeout=STEP_TIMEOUT, process=demo.plugin, pod=f"{NAMESPACE}/{POD}"
    )
    demo.out.ok("prepared by the kubelet through drakit's plugin; CDI devices per container:")
    containers = prepared.get("containers") or {}
    demo.out.block(
        table(
            ("CONTAINER", "CDI DEVICES"),
            [(name, ", ".join(ids) or "(none)") for name, ids in containers.items()],
        )
    )
    spec = _cdi_spec(demo.folders, demo.claim_uid)
    if spec is None:
        raise StepError(f"no CDI spec file for claim {demo.claim_uid} in {demo.folders.cdi}")
    demo.out.kv("CDI spec", str(spec))
    env = _spec_env(spec)
    if env:
        demo.out.kv("container env", " ".join(env))


def show_devices(demo: Demo, when: str) -> None:
    """What ``drakit devices --summary`` (and, with a workload, ``drakit devices``) print."""
    from drakit.devices.render import render  # noqa: PLC0415
    from drakit.devices.source import ClusterReader  # noqa: PLC0415
    from drakit.devices.view import Filters, device_view  # noqa: PLC0415

    reader = ClusterReader(demo.client, NAMESPACE)
    view = device_view(reader.snapshot(reader.probe_claim_scope(), with_classes=False), Filters())
    demo.out.step(f"Devices {when}: drakit devices --summary")
    demo.out.block(render(view, summary=True, output="table").splitlines())
    if demo.claim_name:
        demo.out.line("drakit devices:")
        demo.out.block(render(view, summary=False, output="table").splitlines())


def _wait(demo: Demo, check: Callable[[], Any], what: str) -> Any:
    watch = [p for p in (demo.plugin, demo.controller) if p is not None]
    return stack.wait_until(_quiet(check), timeout=STEP_TIMEOUT, what=what, watch=watch)


def _quiet(check: Callable[[], Any]) -> Callable[[], Any]:
    """``check`` with "not found yet" treated as "not yet"."""
    from drakit.kubeapi.errors import NotFound  # noqa: PLC0415

    def run() -> Any:
        try:
            return check()
        except NotFound:
            return None

    return run


def _generated_claim(pods: Any) -> str | None:
    pod = pods.get(POD, NAMESPACE)
    for status in (pod.get("status") or {}).get("resourceClaimStatuses") or []:
        if status.get("resourceClaimName"):
            return str(status["resourceClaimName"])
    return None


def _cdi_spec(folders: NodeFolders, claim_uid: str) -> Path | None:
    return next((p for p in folders.cdi_spec_files() if claim_uid in p.name), None)


def _spec_env(path: Path) -> list[str]:
    """The environment the spec gives a container (what the example backend hands over)."""
    try:
        spec = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    env: list[str] = []
    for device in spec.get("devices") or []:
        env.extend((device.get("containerEdits") or {}).get("env") or [])
    return env[:4] + (["..."] if len(env) > 4 else [])


def show_metrics(demo: Demo) -> None:
    demo.out.step("Metrics (Prometheus)")
    shown = False
    for who, proc, url, prefix in (
        ("node plugin", demo.plugin, demo.plugin_metrics, "drakit_node_plugin_claims_total{"),
        (
            "controller",
            demo.controller,
            demo.controller_metrics,
            "dynamic_resource_allocation_resourceclaim_",
        ),
    ):
        if proc is None or not proc.running():
            continue  # its own step already said why
        text = stack.scrape(url)
        if text is None:
            demo.out.fail(f"{who}: {url} does not answer")
            continue
        demo.out.kv(who, url)
        demo.out.line(f"    {_sample(text, prefix)}")
        shown = True
    if not shown:
        raise StepError("no metrics endpoint answered")


def _sample(text: str, prefix: str) -> str:
    """A sample line starting with ``prefix`` and a non-zero value, else the first sample."""
    samples = [
        line
        for line in text.splitlines()
        if line and not line.startswith("#") and "_bucket{" not in line
    ]
    wanted = [line for line in samples if line.startswith(prefix)]
    nonzero = [line for line in wanted if not line.endswith(" 0.0")]
    return (nonzero or wanted or samples or ["(no samples)"])[0]


def hold(demo: Demo) -> None:
    demo.out.step("Holding (--hold): press Ctrl-C to clean up")
    demo.out.line(f"export KUBECONFIG={demo.cluster.kubeconfig}")
    demo.out.line("kubectl get resourceslices,deviceclasses")
    demo.out.line(f"kubectl -n {NAMESPACE} get pods,resourceclaims -o wide")
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        print()


def clean_up(demo: Demo) -> None:
    assert demo.events is not None and demo.folders is not None
    pods, claims = _resources(demo)
    demo.out.step(f"Clean-up: delete pod {NAMESPACE}/{POD}")
    mark = demo.events.mark()
    current = claims.get(demo.claim_name, NAMESPACE)
    watch = claims.watch(
        NAMESPACE,
        resource_version=current["metadata"]["resourceVersion"],
        field_selector=f"metadata.name={demo.claim_name}",
        timeout_seconds=int(STEP_TIMEOUT),
    )
    pods.delete(POD, NAMESPACE)
    demo.events.wait(
        "unprepared",
        timeout=STEP_TIMEOUT,
        process=demo.plugin,
        since=mark,
        pod=f"{NAMESPACE}/{POD}",
    )
    gone = _cdi_spec(demo.folders, demo.claim_uid) is None
    demo.out.ok("unprepared by the kubelet" + ("; CDI spec removed" if gone else ""))
    if not gone:
        raise StepError(f"the CDI spec of claim {demo.claim_uid} is still on disk")
    _follow_claim_to_its_end(demo, claims, watch)


def _follow_claim_to_its_end(demo: Demo, claims: Any, watch: Any) -> None:
    """Report the claim's last changes from ``watch``: deallocated, then deleted."""
    deallocated = False
    with watch:
        for event in watch:
            status = event.object.get("status") or {}
            if not deallocated and not status.get("allocation"):
                deallocated = True
                demo.out.ok(f"claim {demo.claim_name} deallocated (no consumer left)")
            if event.type == "DELETED":
                demo.out.ok(f"claim {demo.claim_name} deleted by drakit's controller")
                return
    raise StepError(f"claim {demo.claim_name} was not deleted within {STEP_TIMEOUT:g}s")


# -- stopping -----------------------------------------------------------------------------------


def stop_everything(demo: Demo) -> None:
    """Stop components in reverse order, then the control plane; keep only the logs."""
    stopping = [p for p in (demo.controller, demo.plugin, demo.harness) if p is not None]
    if demo.cluster is not None:
        demo.out.step("Stopping controller, node plugin, kubelet harness and control plane")
    for proc in stopping:
        proc.terminate()
    if demo.cluster is not None:
        demo.cluster.stop()
    for child in demo.root.iterdir() if demo.root.is_dir() else []:
        if child.name != "logs":
            stack.remove_tree(child) if child.is_dir() else child.unlink(missing_ok=True)


def _attr(value: dict[str, Any]) -> str:
    return str(next(iter(value.values()), "")) if isinstance(value, dict) else str(value)


if __name__ == "__main__":
    sys.exit(main())
