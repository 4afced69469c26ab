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
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from cluster_rig import ClusterStack, Recorder, make_cluster
from conftest import NodeAssets
from node_rig import RELEASE_NAMESPACE, eventually, load_example

from drakit.kubeapi.errors import NotFound
from drakit.kubeapi.resources import LEASES, RESOURCE_CLAIM_TEMPLATES, RESOURCE_CLAIMS
from drakit.kubeapi.resources import NODES as NODES_TYPE
from drakit.localcluster.netplan import node_address

pytestmark = pytest.mark.node

RELEASE = "drakit"
NODES = ("drakit-node-1", "drakit-node-2", "drakit-node-3")


@pytest.fixture(scope="module")
def stack(
    node_assets: NodeAssets, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ClusterStack]:
    with make_cluster(node_assets, tmp_path_factory.mktemp("cluster")) as s:
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


def _in_pod_subnet(ip: str, node: str) -> bool:
    index = NODES.index(node) + 1
    return ipaddress.ip_address(ip) in node_address(index).pod_subnet


def _create_template(stack: ClusterStack, namespace: str, name: str = "one-gpu") -> None:
    template = next(o for o in load_example("gpu-pod.yaml") if o["kind"] == "ResourceClaimTemplate")
    template["metadata"]["name"] = name
    stack.resource(RESOURCE_CLAIM_TEMPLATES).create(template, namespace)


def _pod_on(name: str, node: str, template: str = "one-gpu") -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "nodeSelector": {"kubernetes.io/hostname": node},
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}],
            "containers": [
                {
                    "name": "main",
                    "image": "busybox:1.36",
                    "command": [
                        "sh",
                        "-c",
                        "env | grep '^GPU_' | sort; echo ready; exec sleep 86400",
                    ],
                    "resources": {"claims": [{"name": "gpu"}]},
                }
            ],
        },
    }


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
    creator.start()
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
    assert not errors, errors
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
