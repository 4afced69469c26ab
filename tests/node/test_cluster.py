"""drakit on three real nodes (``NodeGroup``), installed as a cluster runs it: the node
plugin DaemonSet and two controller replicas on pod IPs, the charts' default folders, the
apiserver reached through the ``kubernetes`` Service. One cluster serves the module's
tests, each in a namespace of its own.

- spread: a plugin on every node, slices per node, and pods with claims on every node get
  their devices through CDI;
- rolling update: the DaemonSet rolls across the nodes while pods with claims arrive on
  all of them: no failed prepare, nothing prepared twice;
- controller failover, node partition and the shared fault: see their tests.
"""

from __future__ import annotations

import ipaddress
import json
import os
import stat
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from cluster_rig import ClusterStack, Recorder, make_cluster
from conftest import NodeAssets
from node_rig import DRIVER, RELEASE_NAMESPACE, ROOT, eventually, load_example, template_pod

from drakit.controller.noexecute.rules import BUDGET_LABEL, NODE_ANNOTATION
from drakit.controller.noexecute.runner import rule_type
from drakit.kubeapi.errors import ApiError, NotFound
from drakit.kubeapi.resources import (
    LEASES,
    RESOURCE_CLAIM_TEMPLATES,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
    ResourceType,
)
from drakit.kubeapi.resources import NODES as NODES_TYPE
from drakit.localcluster.netplan import node_address
from drakit.localcluster.node import LocalNode

pytestmark = pytest.mark.node

RELEASE = "drakit"
#: A folder each node has as its own (the shared-fault test's device nodes).
HEALTH_DEVICES = "/dev/drakit-health"
HEALTH_DRIVER = "health.drakit.dev"
HEALTH_RELEASE = "health"
NODES = ("drakit-node-1", "drakit-node-2", "drakit-node-3")


@pytest.fixture(scope="module")
def stack(
    node_assets: NodeAssets, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ClusterStack]:
    work = tmp_path_factory.mktemp("cluster")
    with make_cluster(node_assets, work, own_folders=(HEALTH_DEVICES,)) as s:
        s.install(RELEASE, s.cluster_values())
        s.eventually_or_logs(
            lambda: set(_running_plugins(s)) == set(NODES), "a node plugin on every node", RELEASE
        )
        for node in NODES:
            s.eventually_or_logs(lambda n=node: s.slices_of(n), f"slices of {node}", RELEASE)
        yield s


@pytest.fixture
def namespace(stack: ClusterStack) -> Iterator[str]:
    name = stack.create_namespace()
    yield name
    stack.delete_namespace(name)


def _running_plugins(stack: ClusterStack) -> dict[str, dict[str, Any]]:
    return {
        node: pod
        for node, pod in stack.plugin_pods_by_node(RELEASE).items()
        if (pod.get("status") or {}).get("phase") == "Running"
        and all(c.get("ready") for c in pod["status"].get("containerStatuses") or [])
    }


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as response:
        return str(response.read().decode())


def _in_pod_subnet(ip: str, node: str) -> bool:
    index = NODES.index(node) + 1
    return ipaddress.ip_address(ip) in node_address(index).pod_subnet


def _create_template(stack: ClusterStack, namespace: str, name: str = "one-gpu") -> None:
    template = next(o for o in load_example("gpu-pod.yaml") if o["kind"] == "ResourceClaimTemplate")
    template["metadata"]["name"] = name
    stack.resource(RESOURCE_CLAIM_TEMPLATES).create(template, namespace)


def _pod_on(name: str, node: str, template: str = "one-gpu") -> dict[str, Any]:
    return template_pod(name, template, nodeSelector={"kubernetes.io/hostname": node})


def _claim_of(stack: ClusterStack, namespace: str, pod: str) -> dict[str, Any]:
    def found() -> dict[str, Any] | None:
        p = stack.get_pod(pod, namespace) or {}
        for status in (p.get("status") or {}).get("resourceClaimStatuses") or []:
            if status.get("resourceClaimName"):
                try:
                    return stack.claims.get(status["resourceClaimName"], namespace)
                except NotFound:
                    return None
        return None

    claim: dict[str, Any] = eventually(found, f"the claim of {namespace}/{pod}")
    return claim


def _cdi_env(spec_texts: dict[str, str], claim_uid: str) -> list[str]:
    env: list[str] = []
    for name, text in spec_texts.items():
        if claim_uid not in name:
            continue
        spec = json.loads(text)
        for device in spec.get("devices", []):
            env += device.get("containerEdits", {}).get("env", [])
        env += spec.get("containerEdits", {}).get("env", [])
    return sorted(env)


def _gpu_lines(output: str) -> list[str]:
    return sorted(line for line in output.splitlines() if line.startswith("GPU_"))


def _specs_naming(stack: ClusterStack, claim_uid: str) -> list[tuple[str, str]]:
    """(node, CDI spec file) for every spec of the claim on any node."""
    return [
        (node.name, name)
        for node in stack.nodes
        for name in stack.cdi_spec_texts(node)
        if claim_uid in name
    ]


# -- spread -------------------------------------------------------------------------------


def test_the_daemonset_runs_on_every_node_on_pod_ips_with_slices_per_node(
    stack: ClusterStack,
) -> None:
    plugins = _running_plugins(stack)
    assert sorted(plugins) == list(NODES)
    for node, pod in plugins.items():
        assert not pod["spec"].get("hostNetwork"), "the chart's default is the pod network"
        assert _in_pod_subnet(pod["status"]["podIP"], node)
        # Metrics on the pod IP (the chart's default port), reached from the host.
        metrics = _get(f"http://{pod['status']['podIP']}:9400/metrics")
        assert "drakit_node_plugin_registered 1.0" in metrics
    for node in NODES:
        slices = stack.slices_of(node)
        assert {s["spec"]["pool"]["name"] for s in slices} == {node}
        devices = sorted(d["name"] for s in slices for d in s["spec"].get("devices", []))
        assert devices == [f"gpu-{i}" for i in range(8)]
    controllers = [
        p
        for p in stack.pods.list(
            RELEASE_NAMESPACE, label_selector="app.kubernetes.io/component=controller"
        ).items
        if (p.get("status") or {}).get("phase") == "Running"
    ]
    assert len(controllers) == 2
    assert len({p["spec"]["nodeName"] for p in controllers}) == 2, "replicas spread over nodes"
    assert all(_in_pod_subnet(p["status"]["podIP"], p["spec"]["nodeName"]) for p in controllers)


def test_pods_with_claims_on_every_node_get_their_devices_through_cdi(
    stack: ClusterStack, namespace: str
) -> None:
    _create_template(stack, namespace)
    for node in NODES:
        stack.pods.create(_pod_on(f"user-{node[-1]}", node), namespace)
    for node in NODES:
        pod = f"user-{node[-1]}"
        stack.running_pod(pod, namespace)
        claim = _claim_of(stack, namespace, pod)
        results = claim["status"]["allocation"]["devices"]["results"]
        assert {r["pool"] for r in results} == {node}
        local = stack.node_named(node)
        expected = _cdi_env(stack.cdi_spec_texts(local), claim["metadata"]["uid"])
        assert [e for e in expected if e.startswith("GPU_")], f"no CDI spec for {pod} on {node}"
        assert _gpu_lines(stack.pod_output(namespace, pod, "main")) == sorted(
            e for e in expected if e.startswith("GPU_")
        )
        assert {n for n, _ in _specs_naming(stack, claim["metadata"]["uid"])} == {node}


# -- rolling update -------------------------------------------------------------------------


def test_rolling_the_daemonset_across_the_nodes_while_pods_arrive_prepares_each_claim_once(
    stack: ClusterStack, namespace: str
) -> None:
    new_tag = f"{stack.image_tag}-roll"
    for node in stack.nodes:
        node.tag_image(f"localhost/drakit:{stack.image_tag}", f"localhost/drakit:{new_tag}")
    _create_template(stack, namespace)
    before = {n: p["metadata"]["uid"] for n, p in _running_plugins(stack).items()}
    names: list[str] = []
    stop = threading.Event()
    errors: list[BaseException] = []

    overlapped: set[str] = set()

    def watch_overlap() -> None:
        # Per node, the old and the new plugin pod serve at once (maxSurge): terminating
        # pods count, their plugin serves until it has stopped.
        while not stop.wait(0.2):
            serving: dict[str, int] = {}
            for pod in stack.all_plugin_pods(RELEASE):
                statuses = (pod.get("status") or {}).get("containerStatuses") or []
                node = pod["spec"].get("nodeName")
                if node and any("running" in (c.get("state") or {}) for c in statuses):
                    serving[node] = serving.get(node, 0) + 1
            overlapped.update(n for n, count in serving.items() if count >= 2)

    def keep_creating() -> None:
        # Pods keep arriving on every node for as long as the rollout runs.
        try:
            index = 0
            while not stop.is_set() and index < 12:
                node = NODES[index % len(NODES)]
                name = f"during-{index}"
                stack.pods.create(_pod_on(name, node), namespace)
                names.append(name)
                index += 1
                stop.wait(1.0)
        except BaseException as exc:
            errors.append(exc)

    creator = threading.Thread(target=keep_creating, daemon=True)
    watcher = threading.Thread(target=watch_overlap, daemon=True)
    creator.start()
    watcher.start()
    try:
        values = stack.chart_values_of(RELEASE)
        values["image"] = dict(values["image"], tag=new_tag)
        stack.install(RELEASE, values)
        stack.eventually_or_logs(
            lambda: (
                set(_running_plugins(stack)) == set(NODES)
                and all(
                    p["spec"]["containers"][0]["image"].endswith(new_tag)
                    and p["metadata"]["uid"] != before[n]
                    for n, p in _running_plugins(stack).items()
                )
            ),
            "the rollout to reach every node",
            RELEASE,
        )
    finally:
        stop.set()
        creator.join()
        watcher.join()
    assert not errors, errors
    assert overlapped == set(NODES), "old and new plugin pods must overlap on every node"
    for node in stack.nodes:  # the old pods' sockets go: one of each kind is left
        eventually(lambda n=node: len(_sockets(n)[0]) == 1, f"one DRA socket on {node.name}")
        eventually(lambda n=node: len(_sockets(n)[1]) == 1, f"one registration on {node.name}")
        assert before[node.name] not in _sockets(node)[0][0].name
    assert len(names) >= len(NODES)
    for name in names:
        stack.running_pod(name, namespace)
    failures = [line for line in stack.events(namespace).splitlines() if "Failed" in line]
    assert failures == []
    for name in names:
        claim = _claim_of(stack, namespace, name)
        node = stack.pods.get(name, namespace)["spec"]["nodeName"]
        # Prepared once: one spec for the claim, on its own node, and in that node's
        # checkpoint only.
        assert {n for n, _ in _specs_naming(stack, claim["metadata"]["uid"])} == {node}
        holders = [
            n.name for n in stack.nodes if claim["metadata"]["uid"] in stack.checkpoint_claims(n)
        ]
        assert holders == [node]


def _sockets(node: LocalNode) -> tuple[list[Path], list[Path]]:
    """(DRA sockets, registration sockets) of drakit's driver on ``node``."""
    dra = sorted((node.kubelet_dir / "plugins" / DRIVER).glob("*.sock"))
    registration = sorted((node.kubelet_dir / "plugins_registry").glob(f"{DRIVER}*.sock"))
    return dra, registration


# -- controller failover --------------------------------------------------------------------


def _double_allocations(claims: dict[str, Any]) -> list[str]:
    """Devices that two claims hold at once, in one observed state of every claim."""
    holders: dict[tuple[str, str, str], str] = {}
    problems = []
    for key, claim in claims.items():
        allocation = (claim.get("status") or {}).get("allocation") or {}
        for result in (allocation.get("devices") or {}).get("results") or []:
            device = (result["driver"], result["pool"], result["device"])
            if device in holders and holders[device] != key:
                problems.append(f"{device} allocated to {holders[device]} and {key}")
            holders[device] = key
    return problems


def _leader(stack: ClusterStack) -> str:
    """The pod of release drakit's controller that holds its Lease ("" when none does)."""
    pods = {
        p["metadata"]["name"]
        for p in stack.pods.list(
            RELEASE_NAMESPACE, label_selector="app.kubernetes.io/component=controller"
        ).items
    }
    for lease in stack.resource(LEASES).list(RELEASE_NAMESPACE).items:
        holder = str((lease.get("spec") or {}).get("holderIdentity") or "")
        pod = holder.rsplit("_", 1)[0]
        if pod in pods:
            return pod
    return ""


def test_the_standby_controller_takes_over_when_the_leaders_node_is_cut_off(
    stack: ClusterStack, namespace: str
) -> None:
    leader = eventually(lambda: _leader(stack), "a controller leader")
    node_a = stack.pods.get(leader, RELEASE_NAMESPACE)["spec"]["nodeName"]
    others = [n for n in NODES if n != node_a]
    _create_template(stack, namespace)
    # A claim prepared on A before the cut, to find again afterwards.
    stack.pods.create(_pod_on("on-a", node_a), namespace)
    stack.running_pod("on-a", namespace)
    on_a = _claim_of(stack, namespace, "on-a")["metadata"]["uid"]
    a = stack.node_named(node_a)
    assert stack.group is not None
    with Recorder(stack.group.kubeconfig, RESOURCE_CLAIMS, _double_allocations) as claims:
        stack.group.cut(a)
        try:
            cut_at = time.monotonic()
            new_leader = eventually(
                lambda: (p := _leader(stack)) and p != leader and p,
                "the standby controller to take the Lease",
            )
            took = time.monotonic() - cut_at
            # Pods that drakit's controller schedules keep being placed by the new leader.
            for i, node in enumerate(others):
                pod = _pod_on(f"after-{i}", node)
                pod["spec"]["schedulerName"] = "drakit"
                stack.pods.create(pod, namespace)
            for i in range(len(others)):
                stack.running_pod(f"after-{i}", namespace)
        finally:
            stack.group.reconnect(a)
        stack.eventually_or_logs(
            lambda: node_a in _running_plugins(stack) and _node_ready(stack, node_a),
            f"{node_a} Ready again with its plugin",
            RELEASE,
        )
        stack.pods.create(_pod_on("back-on-a", node_a), namespace)
        stack.running_pod("back-on-a", namespace)
    assert claims.problems == []
    assert new_leader != leader and stack.pods.get(new_leader, RELEASE_NAMESPACE)
    # The standby waits out the Lease (10 s) and retries every 2 s.
    assert took < 10 + 2 + 10, f"takeover took {took:.1f}s"
    # No claim lost: every pod's claim exists and is allocated on the pod's node.
    pods = ["on-a", "back-on-a", *(f"after-{i}" for i in range(len(others)))]
    for pod in pods:
        claim = _claim_of(stack, namespace, pod)
        node = stack.pods.get(pod, namespace)["spec"]["nodeName"]
        results = claim["status"]["allocation"]["devices"]["results"]
        assert {r["pool"] for r in results} == {node}
    # A's checkpoint, CDI specs and the API agree once it is back.
    allocated_on_a = {
        c["metadata"]["uid"]
        for c in stack.claims.list(namespace).items
        if {r["pool"] for r in c["status"]["allocation"]["devices"]["results"]} == {node_a}
    }
    assert on_a in allocated_on_a
    assert stack.checkpoint_claims(a) >= allocated_on_a
    assert {
        uid for uid in allocated_on_a if any(uid in n for n in stack.cdi_spec_texts(a))
    } == allocated_on_a


def _node_ready(stack: ClusterStack, name: str) -> bool:
    node = stack.resource(NODES_TYPE).get(name)
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (node.get("status") or {}).get("conditions") or []
    )


def _node_not_ready(stack: ClusterStack, name: str) -> bool:
    node = stack.resource(NODES_TYPE).get(name)
    return any(
        c.get("type") == "Ready" and c.get("status") != "True"
        for c in (node.get("status") or {}).get("conditions") or []
    )


# -- node partition -------------------------------------------------------------------------


def test_a_node_cut_off_past_the_grace_period_goes_not_ready_and_returns_without_leaks(
    stack: ClusterStack, namespace: str
) -> None:
    node_b = NODES[1]
    b = stack.node_named(node_b)
    _create_template(stack, namespace)
    stack.pods.create(_pod_on("before", node_b), namespace)
    stack.running_pod("before", namespace)
    before = _claim_of(stack, namespace, "before")["metadata"]["uid"]
    assert stack.group is not None
    stack.group.cut(b)
    try:
        eventually(
            lambda: _node_not_ready(stack, node_b),
            f"{node_b} NotReady (node-monitor-grace-period)",
            timeout=180,
        )
    finally:
        stack.group.reconnect(b)
    eventually(lambda: _node_ready(stack, node_b), f"{node_b} Ready again", timeout=180)
    # The node itself (its kubelet, its host-network pods) reaches ClusterIPs again: the
    # Service route came back with the link.
    route = subprocess.run(
        ["nsenter", f"--net={b.netns}", "--", "ip", "route", "get", "10.0.0.1"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert route.returncode == 0 and "dev eth0" in route.stdout, route.stderr
    stack.eventually_or_logs(
        lambda: node_b in _running_plugins(stack), f"the plugin on {node_b}", RELEASE
    )
    # The pod from before the cut still runs (the unreachable taint's 300 s toleration),
    # its claim prepared once, on B alone.
    stack.running_pod("before", namespace)
    assert {n for n, _ in _specs_naming(stack, before)} == {node_b}
    assert [n.name for n in stack.nodes if before in stack.checkpoint_claims(n)] == [node_b]
    stack.pods.create(_pod_on("after", node_b), namespace)
    stack.running_pod("after", namespace)
    after = _claim_of(stack, namespace, "after")["metadata"]["uid"]
    # Nothing leaked: once the pods are gone, B holds neither claim.
    stack.delete_pod("before", namespace)
    stack.delete_pod("after", namespace)
    for pod in ("before", "after"):
        stack.pod_gone(pod, namespace)
    eventually(
        lambda: (
            not ({before, after} & stack.checkpoint_claims(b))
            and not _specs_naming(stack, before)
            and not _specs_naming(stack, after)
        ),
        f"{node_b} to unprepare both claims",
    )


# -- the shared fault ---------------------------------------------------------------------


_FULL = os.makedev(1, 7)  # the "full" character device: reads zeros


def _health_device(node: LocalNode) -> Path:
    return node.own_folder(HEALTH_DEVICES) / "accel0"


def _rules_within_caps(cap: int, per_node: int) -> Callable[[dict[str, Any]], list[str]]:
    def check(rules: dict[str, Any]) -> list[str]:
        problems = []
        if len(rules) > cap:
            problems.append(
                f"{len(rules)} NoExecute rules, more than the cap {cap}: {sorted(rules)}"
            )
        by_node: dict[str, int] = {}
        for rule in rules.values():
            node = rule["metadata"].get("annotations", {}).get(NODE_ANNOTATION, "")
            by_node[node] = by_node.get(node, 0) + 1
        problems += [f"{n}: {c} rules > {per_node}" for n, c in by_node.items() if c > per_node]
        return problems

    return check


def _slice_taints(seen: dict[str, list[bool]]) -> Callable[[dict[str, Any]], list[str]]:
    """Record, per node, whether its device has the health taint, each time it changes."""

    def check(slices: dict[str, Any]) -> list[str]:
        for item in slices.values():
            if item["spec"].get("driver") != HEALTH_DRIVER:
                continue
            node = item["spec"].get("nodeName", "")
            tainted = any(
                t.get("key") == f"{HEALTH_DRIVER}/unhealthy"
                for d in item["spec"].get("devices") or ()
                for t in d.get("taints") or ()
            )
            history = seen.setdefault(node, [])
            if not history or history[-1] != tainted:
                history.append(tainted)
        return []

    return check


def _health_pod(name: str, node: str) -> dict[str, Any]:
    pod = _pod_on(name, node, template="health-dev")
    pod["spec"]["resourceClaims"][0]["name"] = "gpu"
    return pod


def test_a_fault_on_every_node_at_once_noexecutes_only_the_budget_and_passes_it_on(
    stack: ClusterStack, namespace: str
) -> None:
    """Per-node 1, cap 2 of the 3 devices (clusterPercent 67): one device fails on every
    node at once. A watcher of every DeviceTaintRule and ResourceSlice change sees the cap
    held at every step and no device's effect flip; exactly two pods are evicted; when one
    granted device recovers, the budget passes to the third."""
    for node in stack.nodes:
        os.mknod(_health_device(node), 0o666 | stat.S_IFCHR, _FULL)
    values = stack.cluster_values(
        driverName=HEALTH_DRIVER,
        controller={"noExecuteBudget": {"perNode": 1, "clusterPercent": 67}},
        nodePlugin={
            "backend": "hostdev",
            "backendConfig": {
                "devices": [{"glob": f"{HEALTH_DEVICES}/*", "shareable": False}],
                "pollSeconds": 1,
            },
            "health": {"taintEffect": "NoExecute", "checkInterval": 1},
        },
    )
    stack.install(HEALTH_RELEASE, values)
    for node in NODES:
        stack.eventually_or_logs(
            lambda n=node: stack.slices_of(n, HEALTH_DRIVER),
            f"hostdev slices of {node}",
            HEALTH_RELEASE,
        )
    template = {
        "metadata": {"name": "health-dev"},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [{"name": "dev", "exactly": {"deviceClassName": HEALTH_DRIVER}}]
                }
            }
        },
    }
    stack.resource(RESOURCE_CLAIM_TEMPLATES).create(template, namespace)
    pods = {node: f"user-{node[-1]}" for node in NODES}
    for node, pod in pods.items():
        stack.pods.create(_health_pod(pod, node), namespace)
    for pod in pods.values():
        stack.running_pod(pod, namespace)

    assert stack.group is not None
    taints: dict[str, list[bool]] = {}
    rule_type_v1 = rule_type("v1")
    selector = f"{BUDGET_LABEL}={HEALTH_DRIVER}"
    with (
        Recorder(stack.group.kubeconfig, rule_type_v1, _rules_within_caps(2, 1), selector) as rules,
        Recorder(stack.group.kubeconfig, RESOURCE_SLICES, _slice_taints(taints)),
    ):
        for node in stack.nodes:  # the shared cause: every node within one check interval
            _health_device(node).unlink()
        eventually(lambda: len(rules.objects) == 2, "two NoExecute grants (the cap)")
        eventually(
            lambda: sum(_gone(stack, p, namespace) for p in pods.values()) == 2,
            "exactly the two budgeted pods evicted",
        )
        granted = {r["metadata"]["annotations"][NODE_ANNOTATION] for r in rules.objects.values()}
        (waiting,) = set(NODES) - granted
        assert stack.get_pod(pods[waiting], namespace) is not None
        assert not _gone(stack, pods[waiting], namespace), "the pod past the cap must stay"
        # One granted device recovers: its grant goes, and the budget passes to the third.
        recovered = sorted(granted)[0]
        os.mknod(_health_device(stack.node_named(recovered)), 0o666 | stat.S_IFCHR, _FULL)
        eventually(
            lambda: (
                {r["metadata"]["annotations"][NODE_ANNOTATION] for r in rules.objects.values()}
                == (granted - {recovered}) | {waiting}
            ),
            "the budget passed on to the waiting device",
        )
        eventually(lambda: _gone(stack, pods[waiting], namespace), "the third pod evicted")
        eventually(lambda: taints.get(recovered, [])[-1:] == [False], "the recovered taint lifted")
    assert rules.problems == []
    # No effect flips: each device got its grant once (one ADDED each), and the only grant
    # taken back is the recovered device's.
    added = [key for kind, key in rules.events if kind == "ADDED"]
    assert len(added) == len(set(added)) == 3
    assert [kind for kind, _ in rules.events].count("DELETED") == 1
    for node in NODES:
        expected = [False, True, False] if node == recovered else [False, True]
        assert taints[node] == expected, f"{node}: taint history {taints[node]}"
    # The pods go (their claims unprepared) while the health plugin still runs.
    for pod in pods.values():
        stack.delete_pod(pod, namespace)
    for pod in pods.values():
        stack.pod_gone(pod, namespace)
    stack.helm.run(
        "uninstall", HEALTH_RELEASE, "--namespace", RELEASE_NAMESPACE, "--wait", "--timeout", "60s"
    )
    stack.releases.remove(HEALTH_RELEASE)


def _gone(stack: ClusterStack, name: str, namespace: str) -> bool:
    pod = stack.get_pod(name, namespace)
    return pod is None or bool(pod["metadata"].get("deletionTimestamp"))


# -- the example driver's webhook behind its Service ---------------------------------------

EXAMPLE_CHART = ROOT / "examples" / "example-driver" / "deployments" / "helm" / "example-driver"
EXAMPLE_DRIVER = "gpu.example.com"
WEBHOOK_CONFIGS = ResourceType(
    "admissionregistration.k8s.io",
    "v1",
    "validatingwebhookconfigurations",
    "ValidatingWebhookConfiguration",
    namespaced=False,
)
PDBS = ResourceType("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", namespaced=True)


@pytest.fixture(scope="module")
def example_image(stack: ClusterStack) -> str:
    """The example driver's image (built from this checkout, cached), in every node."""
    build = subprocess.run(
        [str(ROOT / "examples" / "example-driver" / "hack" / "build-image.sh")],
        capture_output=True, text=True, timeout=1800, check=False,
    )  # fmt: skip
    assert build.returncode == 0, build.stderr
    archive = Path(build.stdout.strip().splitlines()[-1])
    for node in stack.nodes:
        node.import_image(archive, base_name="localhost/drakit-example-driver")
    return archive.name.removeprefix("drakit-example-driver-").removesuffix(".oci.tar")


def _claim_with_config(name: str, interval: str) -> dict[str, Any]:
    config = {
        "apiVersion": "gpu.resource.example.com/v1alpha1",
        "kind": "GpuConfig",
        "sharing": {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": interval}},
    }
    opaque = {"driver": EXAMPLE_DRIVER, "parameters": config}
    return {
        "metadata": {"name": name},
        "spec": {
            "devices": {
                "requests": [{"name": "gpu", "exactly": {"deviceClassName": EXAMPLE_DRIVER}}],
                "config": [{"requests": ["gpu"], "opaque": opaque}],
            }
        },
    }


def _refusal(stack: ClusterStack, namespace: str, name: str) -> str:
    """The apiserver's answer to a claim with an invalid config ("" when it was created)."""
    try:
        stack.claims.create(_claim_with_config(name, "InvalidInterval"), namespace)
    except ApiError as err:
        return str(err)
    return ""


def test_the_example_drivers_webhook_answers_through_its_service_from_two_nodes(
    stack: ClusterStack, namespace: str, example_image: str
) -> None:
    """The example driver's chart with its defaults for a real cluster (webhook enabled):
    two webhook replicas on two nodes behind a Service with a caBundle and a
    PodDisruptionBudget; the apiserver reaches them through the Service's endpoints, and
    with one replica deleted the other still answers."""
    release = "example"
    values = {
        "image": {
            "repository": "localhost/drakit-example-driver",
            "tag": example_image,
            "pullPolicy": "Never",
        },
        "webhook": {"enabled": True},
        "logging": {"format": "text"},
    }
    path = stack.node.paths.root / f"values-{release}.yaml"
    path.write_text(json.dumps(values))
    stack.helm.run(
        "upgrade", "--install", release, str(EXAMPLE_CHART), "--namespace", RELEASE_NAMESPACE,
        "--values", str(path), "--wait", "--timeout", "180s",
    )  # fmt: skip
    stack.releases.append(release)
    selector = f"app.kubernetes.io/instance={release},app.kubernetes.io/component=webhook"
    webhooks = eventually(
        lambda: (
            (
                pods := [
                    p
                    for p in stack.pods.list(RELEASE_NAMESPACE, label_selector=selector).items
                    if (p.get("status") or {}).get("phase") == "Running"
                ]
            )
            and len(pods) == 2
            and pods
        ),
        "two webhook replicas running",
    )
    assert len({p["spec"]["nodeName"] for p in webhooks}) == 2, "replicas spread over nodes"
    for pod in webhooks:
        assert not pod["spec"].get("hostNetwork")
        assert _in_pod_subnet(pod["status"]["podIP"], pod["spec"]["nodeName"])
    (config,) = [
        c
        for c in stack.resource(WEBHOOK_CONFIGS).list().items
        if c["metadata"].get("labels", {}).get("app.kubernetes.io/instance") == release
    ]
    for hook in config["webhooks"]:
        assert hook["clientConfig"].get("service", {}).get("namespace") == RELEASE_NAMESPACE
        assert "url" not in hook["clientConfig"]
    eventually(
        lambda: all(
            h["clientConfig"].get("caBundle")
            for h in stack.resource(WEBHOOK_CONFIGS).get(config["metadata"]["name"])["webhooks"]
        ),
        "the webhook's CA bundle published",
    )
    pdbs = [
        p
        for p in stack.resource(PDBS).list(RELEASE_NAMESPACE).items
        if p["metadata"].get("labels", {}).get("app.kubernetes.io/instance") == release
    ]
    assert [p["spec"].get("maxUnavailable") for p in pdbs] == [1]

    refused = eventually(lambda: _refusal(stack, namespace, "bad-1"), "the invalid config refused")
    assert "InvalidInterval" in refused and "failed calling webhook" not in refused
    stack.claims.create(_claim_with_config("good-1", "Long"), namespace)
    # One replica goes: the other answers for it.
    stack.pods.delete(webhooks[0]["metadata"]["name"], RELEASE_NAMESPACE)
    for i in range(5):
        refused = eventually(
            lambda i=i: _refusal(stack, namespace, f"bad-{i + 2}"), "the invalid config refused"
        )
        assert "InvalidInterval" in refused, refused
    stack.claims.create(_claim_with_config("good-2", "Short"), namespace)
