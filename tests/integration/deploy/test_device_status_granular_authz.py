"""status.devices writes under granular status authorization, as the real node plugin and
driver controller make them: each writer touches only its driver's entries.

The apiserver (DRAResourceClaimGranularStatusAuthorization, 1.36 and 1.37) authorizes a
status write per driver whose entries changed, comparing each entry's ``data`` byte for byte.
A write that sent another driver's entry back re-encoded (``1e3`` as ``1000.0``, ``\\u003c``
as ``<``, non-ASCII escaped) changed that driver's entry, and a node plugin, whose token
may change only its own driver's entries on its own node, was refused. Here the node plugin
runs with the chart's own RBAC and a ServiceAccount token bound to its Node (what the
kubelet gives a pod on that node carries the same node name); the driver controller with
``arbitrary-node:patch`` for its driver only, as the example driver's chart grants it.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from deploy_support import Helm, by_kind, load_objects, token_kubeconfig
from helpers.rawclaims import allocate_raw, create_raw_claim, raw_claim_text, send

from drakit.controller.bindingconditions import BindingConditionsController, DriverControllerConfig
from drakit.kubeapi.lightclient import LightApiClient, load_light_client
from drakit.kubeapi.resources import RESOURCE_CLAIMS, Resource
from drakit.localcluster import LocalCluster
from drakit.localcluster.cluster import ClusterConfig
from drakit.localcluster.kubeversions import default_feature_gates
from drakit.node_plugin.device_status import DeviceStatusWriter
from drakit.plugin.binding import BindingClaim, BindingDevice, BindingVerdict
from drakit.plugin.claims import ClaimRef

pytestmark = pytest.mark.integration

DRIVER = "gpu.example.com"
OTHER = "net.example.com"
GATE = "DRAResourceClaimGranularStatusAuthorization"
ATTACHED, FAILED = "example.com/attached", "example.com/failed"
#: Another driver's entry as a Go driver writes it (compact, ``<`` as ``\u003c``), with
#: number spellings and escapes no Python encoder reproduces after a decode, and fields
#: drakit's code never sets (``observedGeneration``, ``networkData``).
OTHER_DATA = '{"z":1e3,"s":"\\u003cb\\u003e caf\\u00e9 \\/","n":1.0,"l":[1E-2,{"b":2,"a":1}]}'
OTHER_ENTRY = (
    f'{{"driver":"{OTHER}","pool":"POOL","device":"nic-0","conditions":[{{"type":"Up",'
    '"status":"True","observedGeneration":3,"lastTransitionTime":"2026-01-02T03:04:05Z",'
    '"reason":"Linked","message":""}],'
    f'"data":{OTHER_DATA},"networkData":{{"interfaceName":"eth9","hardwareAddress":"aa:bb"}}}}'
)


@dataclass(frozen=True)
class Cluster:
    """A control plane of one version with the gate on, and a namespace to work in."""

    local: LocalCluster
    admin: LightApiClient
    namespace: str
    version: str


@pytest.fixture(scope="module", params=["v1.36.3", "v1.37.2"])
def gated(request: pytest.FixtureRequest) -> Iterator[Cluster]:
    version: str = request.param
    gates = ",".join(filter(None, (default_feature_gates(version), f"{GATE}=true")))
    with LocalCluster(ClusterConfig(kube_version=version, feature_gates=gates)) as local:
        admin = load_light_client(local.kubeconfig, qps=0)
        namespace = f"ds-{uuid.uuid4().hex[:6]}"
        _post(admin, "/api/v1/namespaces", {"metadata": {"name": namespace}})
        try:
            yield Cluster(local, admin, namespace, version)
        finally:
            admin.close()


def _post(api: LightApiClient, path: str, body: dict[str, Any]) -> dict[str, Any]:
    answer: dict[str, Any] = json.loads(send(api, "POST", path, json.dumps(body)))
    return answer


_PATHS = {
    "ServiceAccount": "/api/v1/namespaces/{namespace}/serviceaccounts",
    "ClusterRole": "/apis/rbac.authorization.k8s.io/v1/clusterroles",
    "ClusterRoleBinding": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
}


def node_bound_client(
    helm: Helm, cluster: Cluster, node: str, tmp_path: Path
) -> tuple[LightApiClient, str]:
    """A client of the node plugin's ServiceAccount, with the chart's RBAC (device status
    on) installed, authenticated by a token bound to the Node ``node``; and its user name."""
    release = f"ds{uuid.uuid4().hex[:6]}"
    values = {
        "driverName": DRIVER,
        "nodePlugin.deviceStatus": "true",
        "controller.enabled": "false",
    }
    rendered = load_objects(
        helm.template(release, cluster.namespace, values, kube_version=cluster.version).stdout
    )
    for kind, path in _PATHS.items():
        for obj in by_kind(rendered, kind):
            if (obj["metadata"].get("labels") or {}).get("app.kubernetes.io/component") == (
                "node-plugin"
            ):
                _post(cluster.admin, path.format(namespace=cluster.namespace), obj)
    (account,) = [
        o["metadata"]["name"]
        for o in by_kind(rendered, "ServiceAccount")
        if o["metadata"]["labels"].get("app.kubernetes.io/component") == "node-plugin"
    ]
    node_obj = _post(cluster.admin, "/api/v1/nodes", {"metadata": {"name": node}})
    bound = {"apiVersion": "v1", "kind": "Node", "name": node, "uid": node_obj["metadata"]["uid"]}
    request = {"spec": {"audiences": [], "expirationSeconds": 3600, "boundObjectRef": bound}}
    path = f"/api/v1/namespaces/{cluster.namespace}/serviceaccounts/{account}/token"
    token = _post(cluster.admin, path, request)["status"]["token"]
    kubeconfig = token_kubeconfig(cluster.local.kubeconfig, token, tmp_path / "node.kubeconfig")
    return load_light_client(str(kubeconfig), qps=0), account


def allocated_claim_with_another_drivers_entry(
    cluster: Cluster, node: str, binding: list[str] | None = None
) -> ClaimRef:
    """A claim allocated on ``node`` (by metadata.name, as kube-scheduler writes it) with a
    device of ``DRIVER`` (waiting for ``binding`` conditions) and one of ``OTHER``, whose
    status entry ``OTHER`` wrote."""
    name = f"c-{uuid.uuid4().hex[:6]}"
    created = create_raw_claim(cluster.admin, cluster.namespace, name, DRIVER, device_class="x")
    mine = {"request": "gpu", "driver": DRIVER, "pool": node, "device": "gpu-0"}
    results = [
        mine
        | ({"bindingConditions": binding, "bindingFailureConditions": [FAILED]} if binding else {}),
        {"request": "gpu", "driver": OTHER, "pool": node, "device": "nic-0"},
    ]
    allocate_raw(cluster.admin, created, results, driver=DRIVER, node=node)
    entry = OTHER_ENTRY.replace("POOL", node)
    patch = f'[{{"op":"add","path":"/status/devices","value":[{entry}]}}]'
    _send_patch(cluster.admin, cluster.namespace, name, patch)
    meta = created["metadata"]
    return ClaimRef(namespace=cluster.namespace, uid=meta["uid"], name=name)


def _send_patch(api: LightApiClient, namespace: str, name: str, patch: str) -> None:
    path = RESOURCE_CLAIMS.path(namespace, name, "status")
    send(api, "PATCH", path, patch, content_type="application/json-patch+json")


def other_entry_text(cluster: Cluster, ref: ClaimRef) -> str:
    """The other driver's entry exactly as the apiserver serves it."""
    text = raw_claim_text(cluster.admin, cluster.namespace, ref.name)
    start = text.index(f'{{"driver":"{OTHER}"')
    assert OTHER_DATA in text[start:], text
    return text[start : text.index("}}", text.index('"networkData"', start)) + 2]


def entries(cluster: Cluster, ref: ClaimRef) -> list[tuple[str, str]]:
    claim = Resource(cluster.admin, RESOURCE_CLAIMS).get(ref.name, ref.namespace)
    return [(e["driver"], e["device"]) for e in claim["status"].get("devices", [])]


def test_the_node_plugin_writes_and_removes_its_entries_without_touching_another_drivers(
    helm: Helm, gated: Cluster, tmp_path: Path
) -> None:
    node = f"node-{uuid.uuid4().hex[:6]}"
    client, _ = node_bound_client(helm, gated, node, tmp_path)
    try:
        writer = DeviceStatusWriter(
            Resource(client, RESOURCE_CLAIMS), DRIVER, field_manager=f"{DRIVER}/{node}"
        )
        ref = allocated_claim_with_another_drivers_entry(gated, node)
        before = other_entry_text(gated, ref)
        ready = {"type": "Ready", "status": "True", "reason": "Prepared", "message": "",
                 "lastTransitionTime": "2026-01-02T03:04:05Z"}  # fmt: skip
        mine = {"driver": DRIVER, "pool": node, "device": "gpu-0", "data": {"a": "<b>"},
                "conditions": [ready]}  # fmt: skip

        assert writer.write(ref, [mine]) == ""
        assert entries(gated, ref) == [(OTHER, "nic-0"), (DRIVER, "gpu-0")]
        assert other_entry_text(gated, ref) == before
        changed = mine | {"conditions": [ready | {"status": "False"}]}
        assert writer.write(ref, [changed]) == ""
        assert other_entry_text(gated, ref) == before
        assert writer.remove(ref, {(node, "gpu-0", "")}) == ""
        assert entries(gated, ref) == [(OTHER, "nic-0")]
        assert other_entry_text(gated, ref) == before
    finally:
        client.close()


def test_the_node_bound_token_may_not_write_on_a_claim_of_another_node(
    helm: Helm, gated: Cluster, tmp_path: Path
) -> None:
    # What makes the test above mean something: the token carries its node, and the
    # chart's associated-node:patch applies to claims allocated on that node only.
    node, elsewhere = f"node-{uuid.uuid4().hex[:6]}", f"node-{uuid.uuid4().hex[:6]}"
    client, _ = node_bound_client(helm, gated, node, tmp_path)
    try:
        writer = DeviceStatusWriter(
            Resource(client, RESOURCE_CLAIMS), DRIVER, field_manager=f"{DRIVER}/{node}"
        )
        ref = allocated_claim_with_another_drivers_entry(gated, elsewhere)
        mine = {"driver": DRIVER, "pool": elsewhere, "device": "gpu-0", "conditions": []}
        refused = writer.write(ref, [mine])
        assert 'requires resource="resourceclaims/driver"' in refused
    finally:
        client.close()


class MetCheck:
    """A binding check that says every binding condition is met."""

    def check(self, claim: BindingClaim, device: BindingDevice) -> BindingVerdict:
        return BindingVerdict.all_met(device)


def test_the_driver_controller_sets_binding_conditions_without_touching_another_drivers(
    gated: Cluster, tmp_path: Path, eventually: Any
) -> None:
    account = f"dc-{uuid.uuid4().hex[:6]}"
    admin, namespace = gated.admin, gated.namespace
    # The example driver's chart grants its controller exactly these (templates/controller.yaml).
    rules = [
        {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"],
         "verbs": ["get", "list", "watch"]},
        {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims/status"],
         "verbs": ["patch"]},
        {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims/driver"],
         "resourceNames": [DRIVER], "verbs": ["arbitrary-node:patch"]},
    ]  # fmt: skip
    _post(
        admin, _PATHS["ServiceAccount"].format(namespace=namespace), {"metadata": {"name": account}}
    )
    _post(admin, _PATHS["ClusterRole"], {"metadata": {"name": account}, "rules": rules})
    role = {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": account}
    subject = {"kind": "ServiceAccount", "name": account, "namespace": namespace}
    _post(admin, _PATHS["ClusterRoleBinding"],
          {"metadata": {"name": account}, "roleRef": role, "subjects": [subject]})  # fmt: skip
    path = f"/api/v1/namespaces/{namespace}/serviceaccounts/{account}/token"
    token = _post(admin, path, {"spec": {"audiences": [], "expirationSeconds": 3600}})
    kubeconfig = token_kubeconfig(
        gated.local.kubeconfig, token["status"]["token"], tmp_path / "dc.kubeconfig"
    )
    client = load_light_client(str(kubeconfig), qps=0)
    controller = BindingConditionsController(
        client, DriverControllerConfig(driver_name=DRIVER, check=MetCheck())
    )
    stop = threading.Event()
    runner = threading.Thread(target=controller.run, args=(stop,), daemon=True)
    runner.start()
    try:
        assert controller.started.wait(60)
        node = f"node-{uuid.uuid4().hex[:6]}"
        ref = allocated_claim_with_another_drivers_entry(gated, node, binding=[ATTACHED])
        before = other_entry_text(gated, ref)

        def written() -> list[Any]:
            claim = Resource(admin, RESOURCE_CLAIMS).get(ref.name, namespace)
            return [
                c["type"]
                for e in claim["status"].get("devices", [])
                if e["driver"] == DRIVER
                for c in e.get("conditions", [])
            ]

        assert eventually(written, what="binding condition written", timeout=60) == [ATTACHED]
        assert entries(gated, ref) == [(OTHER, "nic-0"), (DRIVER, "gpu-0")]
        assert other_entry_text(gated, ref) == before
    finally:
        stop.set()
        runner.join(60)
        client.close()
