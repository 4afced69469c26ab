"""The controller works with exactly the permissions the Helm chart grants it.

The ClusterRole and the leader-election Role are read from the rendered manifests
(``deploy/manifests/drakit.yaml``), bound to a fresh ServiceAccount, and the controller runs
with that account's token: a pod with a template is generated, allocated and bound, and the
leader Lease is taken.
"""

from __future__ import annotations

import logging
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from drakit.controller.config import ClaimGeneration
from drakit.kubeapi.client import load_client
from drakit.kubeapi.resources import LEASES, Resource

pytestmark = pytest.mark.integration

MANIFESTS = Path(__file__).resolve().parents[3] / "deploy" / "manifests" / "drakit.yaml"


def chart_roles() -> tuple[list[Any], list[Any]]:
    """(ClusterRole rules, leader-election Role rules) of the controller."""
    docs = [d for d in yaml.safe_load_all(MANIFESTS.read_text()) if d]
    cluster_role = next(d for d in docs if d["kind"] == "ClusterRole"
                        and d["metadata"]["name"] == "drakit-controller")  # fmt: skip
    role = next(d for d in docs if d["kind"] == "Role"
                and d["metadata"]["name"] == "drakit-controller-leader-election")  # fmt: skip
    return cluster_role["rules"], role["rules"]


def service_account_kubeconfig(
    api: Any, cluster: Any, namespace: str, tmp_path: Path, name: str | None = None
) -> str:
    """A kubeconfig that authenticates as a new ServiceAccount (``name``) bound to the
    chart's ClusterRole and leader-election Role (not its kube-system Lease Role)."""
    from kubernetes import client  # noqa: PLC0415

    core, rbac = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api)
    name = name or f"drakit-{uuid.uuid4().hex[:6]}"
    core.create_namespaced_service_account(namespace, {"metadata": {"name": name}})
    cluster_rules, lease_rules = chart_roles()
    subject = [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]
    rbac.create_cluster_role({"metadata": {"name": name}, "rules": cluster_rules})
    rbac.create_cluster_role_binding({
        "metadata": {"name": name}, "subjects": subject,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
    })  # fmt: skip
    rbac.create_namespaced_role(namespace, {"metadata": {"name": name}, "rules": lease_rules})
    rbac.create_namespaced_role_binding(namespace, {
        "metadata": {"name": name}, "subjects": subject,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
    })  # fmt: skip
    token = core.create_namespaced_service_account_token(
        name, namespace, {"spec": {"expirationSeconds": 3600}}
    ).status.token
    admin = yaml.safe_load(Path(cluster.kubeconfig).read_text())
    admin["users"] = [{"name": "admin", "user": {"token": token}}]
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(admin))
    return str(path)


def test_controller_runs_with_exactly_the_permissions_of_the_helm_chart(
    *, api, cluster, objects, namespace, start_controller, eventually, tmp_path
):
    from drakit.controller.leader import run_leader_elected  # noqa: PLC0415
    from drakit.kubeapi.leaderelection import LeaderElectionConfig  # noqa: PLC0415

    kubeconfig = service_account_kubeconfig(api, cluster, namespace, tmp_path)
    restricted = load_client(kubeconfig, qps=0)
    objects.node(f"n-{uuid.uuid4().hex[:6]}", devices=2)
    objects.template(namespace, "tpl", objects.device_class())
    start_controller(restricted, claim_generation=ClaimGeneration.ALL)
    objects.pod(namespace, "p", templates={"gpu": "tpl"})
    eventually(lambda: objects.pods.get("p", namespace)["spec"].get("nodeName"))
    (claim,) = objects.pod_claims(namespace, "p")
    assert claim["status"]["allocation"] and claim["status"]["reservedFor"]
    objects.pods.delete("p", namespace, grace_period_seconds=0)
    eventually(lambda: not objects.pod_claims_by_name(namespace, claim["metadata"]["name"]))
    # The Lease (in the controller's own namespace, as in the chart) can be taken.
    import threading  # noqa: PLC0415

    leading = threading.Event()
    stop = threading.Event()
    election = LeaderElectionConfig(lease_name="drakit-rbac", namespace=namespace,
                                    identity="rbac-test", lease_duration=4, renew_deadline=3,
                                    retry_period=1)  # fmt: skip

    class Idle:
        def run(self, s: threading.Event) -> None:
            leading.set()
            s.wait()

    thread = threading.Thread(
        target=run_leader_elected,
        args=(restricted, election, Idle, stop),  # type: ignore[arg-type]
        daemon=True,
    )
    thread.start()
    assert eventually(leading.is_set)
    stop.set()
    thread.join(30)
    lease = Resource(api, LEASES).get("drakit-rbac", namespace)
    assert lease["spec"].get("holderIdentity") in (None, "", "rbac-test")


def grant_controller_manager_lease(api: Any, namespace: str, account: str) -> None:
    """Bind the chart's kube-system Role (read kube-controller-manager's Lease) to the
    ServiceAccount ``account`` of ``namespace``."""
    from kubernetes import client  # noqa: PLC0415

    docs = [d for d in yaml.safe_load_all(MANIFESTS.read_text()) if d]
    lease_role = "drakit-controller-controller-manager-lease"
    role = next(d for d in docs if d["kind"] == "Role" and d["metadata"]["name"] == lease_role)
    rbac = client.RbacAuthorizationV1Api(api)
    name = f"{account}-kcm-lease"
    rbac.create_namespaced_role("kube-system", {"metadata": {"name": name}, "rules": role["rules"]})
    rbac.create_namespaced_role_binding("kube-system", {
        "metadata": {"name": name},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
    })  # fmt: skip


def test_scoped_generation_without_rbac_on_the_controller_manager_lease_generates_nothing(
    *, api, cluster, objects, namespace, start_controller, eventually, tmp_path, caplog
):
    """Issue 30: a Lease drakit may not read may be held; drakit fails closed (it used to
    generate after the grace period alone) and generates once it may read it."""
    account = f"drakit-{uuid.uuid4().hex[:6]}"
    kubeconfig = service_account_kubeconfig(api, cluster, namespace, tmp_path, account)
    restricted = load_client(kubeconfig, qps=0)
    objects.template(namespace, "tpl", objects.device_class())
    objects.pod(namespace, "p", templates={"gpu": "tpl"})
    with caplog.at_level(logging.ERROR, logger="drakit.controller.handover"):
        start_controller(restricted, claim_generation=ClaimGeneration.SCOPED)
        eventually(lambda: any("RBAC missing" in r.getMessage() for r in caplog.records),
                   what="the controller to find it may not read the Lease")  # fmt: skip
    assert objects.pod_claims(namespace, "p") == []
    grant_controller_manager_lease(api, namespace, account)
    eventually(lambda: objects.pod_claims(namespace, "p"), what="generation once RBAC allows")
