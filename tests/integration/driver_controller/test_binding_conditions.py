"""``drakit driver-controller`` against the real kube-scheduler: devices with binding
conditions hold the pod in PreBind until the driver's BindingCheck says they are met; a
binding failure condition makes the scheduler deallocate and try again.

Fake nodes and slices published by the test; claims by name (no kube-controller-manager).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cluster_objects import Made
from helpers.delivery import delivered
from helpers.rawclaims import PARAMETERS, create_raw_claim, raw_claim_text

from drakit.controller.bindingconditions import (
    BindingConditionsController,
    DriverControllerConfig,
)
from drakit.kubeapi.client import load_client
from drakit.kubeapi.errors import Invalid
from drakit.kubeapi.lightclient import load_light_client
from drakit.kubeapi.resources import RESOURCE_CLAIMS, Resource
from drakit.plugin import BindingClaim, BindingDevice, BindingVerdict, ConditionResult

pytestmark = pytest.mark.integration

READY, FAILED = "example.com/ready", "example.com/failed"


def binding_device(name: str) -> dict[str, Any]:
    return {"name": name, "bindingConditions": [READY], "bindingFailureConditions": [FAILED]}


class GatedCheck:
    """Pending until ``open`` is set; fails the first ``fail_first`` allocations it sees."""

    def __init__(self, fail_first: int = 0) -> None:
        self.open = threading.Event()
        self.fail_first = fail_first
        self.asked: list[tuple[str, str]] = []  # (claim uid + device, ...) in order
        self.failed: set[tuple[str, str]] = set()
        self.lock = threading.Lock()

    def check(self, claim: BindingClaim, device: BindingDevice) -> BindingVerdict:
        # One allocation: the claim's allocation result as the check saw it (its
        # timestamp changes with every new allocation of the same claim).
        allocated = str((claim.raw["status"]["allocation"] or {}).get("allocationTimestamp"))
        key = (allocated, device.device)
        with self.lock:
            self.asked.append(key)
            if key not in self.failed and len(self.failed) < self.fail_first:
                self.failed.add(key)
                return BindingVerdict.failure(FAILED, "DeviceBroken", "the test broke it")
        if key in self.failed:
            return BindingVerdict.pending()
        if not self.open.is_set():
            return BindingVerdict.pending(retry_after=0.2)
        return BindingVerdict(met=(ConditionResult(READY, "Attached", "attached by the test"),))


@pytest.fixture
def made(wapi: Any) -> Iterator[Made]:
    objects = Made(wapi)
    yield objects
    objects.cleanup()


def start_driver_controller(wapi: Any, background: Any, made: Made, check: Any) -> Any:
    controller = BindingConditionsController(
        wapi, DriverControllerConfig(made.driver, check, recheck_period=0.5)
    )
    background.start(controller.run)
    assert controller.started.wait(60), "driver controller did not start"
    return controller


def device_status(claim: dict[str, Any], device: str) -> dict[str, Any]:
    return next((d for d in claim["status"].get("devices") or () if d["device"] == device), {})


def test_pod_waits_unbound_until_the_check_reports_the_condition_met(
    *, wapi, wnamespace, made, background, eventually
):
    node = made.node([binding_device("dev-0")])
    made.claim(wnamespace, "c", made.device_class())
    check = GatedCheck()
    start_driver_controller(wapi, background, made, check)
    made.pod(wnamespace, "p", claims={"gpu": "c"})
    claims = Resource(wapi, RESOURCE_CLAIMS)

    eventually(lambda: len(check.asked) >= 3, what="the check asked again while pending",
               timeout=60)  # fmt: skip
    allocation = claims.get("c", wnamespace)["status"]["allocation"]
    assert allocation["devices"]["results"][0]["bindingConditions"] == [READY]
    assert made.node_of(wnamespace, "p") == "", "pod bound before its condition was met"

    check.open.set()
    eventually(lambda: made.node_of(wnamespace, "p") == node, what="pod bound", timeout=90)
    (condition,) = device_status(claims.get("c", wnamespace), "dev-0")["conditions"]
    assert condition["type"] == READY and condition["status"] == "True"
    assert condition["reason"] == "Attached" and condition["lastTransitionTime"]


def test_binding_failure_condition_makes_the_scheduler_allocate_again(
    *, wapi, wnamespace, made, background, eventually
):
    node = made.node([binding_device("dev-0"), binding_device("dev-1")])
    made.claim(wnamespace, "c", made.device_class())
    check = GatedCheck(fail_first=1)
    check.open.set()
    start_driver_controller(wapi, background, made, check)
    made.pod(wnamespace, "p", claims={"gpu": "c"})

    eventually(lambda: made.node_of(wnamespace, "p") == node, what="pod bound", timeout=120)
    allocations = {allocated for allocated, _ in check.asked}
    assert len(check.failed) == 1
    assert len(allocations) >= 2, "the failed allocation was not replaced by a new one"
    claim = Resource(wapi, RESOURCE_CLAIMS).get("c", wnamespace)
    (device,) = claim["status"]["allocation"]["devices"]["results"]
    conditions = device_status(claim, device["device"])["conditions"]
    assert [(c["type"], c["status"]) for c in conditions] == [(READY, "True")]


def test_other_entries_are_kept_and_a_repeated_verdict_writes_nothing(
    *, wapi, wnamespace, made, background, eventually
):
    """Entries of another driver and the device's own data survive the write; once the
    condition is True nothing is written again."""
    node = made.node([binding_device("dev-0")])
    made.claim(wnamespace, "c", made.device_class())
    claims = Resource(wapi, RESOURCE_CLAIMS)
    # An allocation written by hand (no pod: the scheduler leaves the claim alone), with a
    # second result of another driver whose status entry must be kept as it is.
    other = {"driver": "other.drakit.dev", "pool": "p", "device": "d", "conditions": [],
             "data": {"kept": True}}  # fmt: skip
    claim = claims.get("c", wnamespace)
    claim["status"] = {
        "allocation": {
            "devices": {
                "results": [
                    {"request": "gpu", "driver": made.driver, "pool": node, "device": "dev-0",
                     "bindingConditions": [READY], "bindingFailureConditions": [FAILED]},
                    {"request": "gpu", "driver": "other.drakit.dev", "pool": "p", "device": "d"},
                ]
            },
        },
        "devices": [other],
    }  # fmt: skip
    before = device_status(claims.update_status(claim), "d")
    assert before["data"] == {"kept": True}
    check = GatedCheck()
    check.open.set()
    controller = start_driver_controller(wapi, background, made, check)

    def written() -> dict[str, Any] | None:
        stored = claims.get("c", wnamespace)
        return stored if device_status(stored, "dev-0").get("conditions") else None

    stored = eventually(written, what="condition written", timeout=30)
    assert device_status(stored, "d") == before
    version = stored["metadata"]["resourceVersion"]
    writes = controller.writes
    controller.sync(f"{wnamespace}/c")  # asked again directly: nothing left to do
    # The echo of the controller's own write is what it must not act on: wait until its
    # informer has handed that version to the controller's handler and the work queue has
    # since handled whatever the handler queued.
    echoed = delivered(controller.informer, wnamespace, "c", version)
    eventually(lambda: echoed.is_set() and controller.queue.idle(), what="the echo handled")
    assert controller.writes == writes
    assert claims.get("c", wnamespace)["metadata"]["resourceVersion"] == version


def test_conditions_are_written_on_a_claim_with_opaque_config_whose_bytes_stay_as_written(
    *, wapi, workload_cluster, wnamespace, made, background, eventually
):
    """kube-scheduler copies the spec's opaque parameters into the allocation as they are;
    the apiserver refuses any status write that sends them back re-encoded."""
    node = made.node([binding_device("dev-0")])
    light = load_light_client(workload_cluster.kubeconfig, user_agent="test")
    try:
        create_raw_claim(light, wnamespace, "c", made.driver, device_class=made.device_class())
        check = GatedCheck()
        check.open.set()
        controller = start_driver_controller(wapi, background, made, check)
        made.pod(wnamespace, "p", claims={"gpu": "c"})

        eventually(lambda: made.node_of(wnamespace, "p") == node, what="pod bound", timeout=90)
        assert controller.writes >= 1
        assert raw_claim_text(light, wnamespace, "c").count(PARAMETERS) == 2
    finally:
        light.close()


#: The driver controller's permissions as docs/writing-a-driver.md and `--help` list them
#: (granular status authorization: the driver's own name only, any node).
def least_privilege_rules(driver: str) -> list[dict[str, Any]]:
    return [
        {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"],
         "verbs": ["get", "list", "watch"]},
        {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims/status"],
         "verbs": ["patch"]},
        {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims/driver"],
         "resourceNames": [driver], "verbs": ["arbitrary-node:patch"]},
    ]  # fmt: skip


def restricted_client(wapi: Any, cluster: Any, namespace: str, rules: Any, tmp_path: Any) -> Any:
    """A client authenticating as a new ServiceAccount bound to exactly ``rules``."""
    from kubernetes import client  # noqa: PLC0415

    core, rbac = (
        client.CoreV1Api(cluster.api_client()),
        client.RbacAuthorizationV1Api(cluster.api_client()),
    )
    name = f"dc-{namespace}"
    core.create_namespaced_service_account(namespace, {"metadata": {"name": name}})
    rbac.create_cluster_role({"metadata": {"name": name}, "rules": rules})
    rbac.create_cluster_role_binding({
        "metadata": {"name": name},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
    })  # fmt: skip
    token = core.create_namespaced_service_account_token(
        name, namespace, {"spec": {"expirationSeconds": 3600}}
    ).status.token
    config = json.loads(Path(cluster.kubeconfig).read_text())
    config["users"] = [{"name": config["users"][0]["name"], "user": {"token": token}}]
    path = tmp_path / "kubeconfig"
    path.write_text(json.dumps(config))
    return load_client(str(path), qps=0)


@pytest.mark.parametrize("driver_of_rule", ["own", "other"])
def test_the_documented_permissions_suffice_and_only_for_the_own_driver(
    *, wapi, workload_cluster, wnamespace, made, background, eventually, tmp_path, driver_of_rule
):
    """With exactly the documented rules the controller writes the condition; with the
    granular rule naming another driver the apiserver refuses the write."""
    made.node([binding_device("dev-0")])
    made.claim(wnamespace, "c", made.device_class())
    rule_driver = made.driver if driver_of_rule == "own" else "other.drakit.dev"
    restricted = restricted_client(
        wapi, workload_cluster, wnamespace, least_privilege_rules(rule_driver), tmp_path
    )
    check = GatedCheck()
    check.open.set()
    controller = BindingConditionsController(
        restricted, DriverControllerConfig(made.driver, check, recheck_period=0.5)
    )
    background.start(controller.run)
    assert controller.started.wait(60)
    made.pod(wnamespace, "p", claims={"gpu": "c"})
    claims = Resource(wapi, RESOURCE_CLAIMS)
    if driver_of_rule == "own":
        eventually(lambda: made.node_of(wnamespace, "p"), what="pod bound", timeout=90)
        return
    eventually(lambda: len(check.asked) >= 2, what="the check asked (and retried)", timeout=60)
    # The apiserver reports the missing granular permission as an invalid status change.
    with pytest.raises(Invalid, match="resourceclaims/driver"):
        controller.sync(f"{wnamespace}/c")
    assert not device_status(claims.get("c", wnamespace), "dev-0")


class FlakyCheck:
    """Raises on its first ``failures`` calls, then reports every condition met."""

    def __init__(self, failures: int) -> None:
        self.calls = 0
        self.failures = failures

    def check(self, claim: BindingClaim, device: BindingDevice) -> BindingVerdict:
        self.calls += 1
        if self.calls <= self.failures:
            raise RuntimeError("device agent not reachable")
        return BindingVerdict.all_met(device)


def test_a_check_that_raises_is_retried_and_logged_with_claim_and_device(
    *, wapi, wnamespace, made, background, eventually, caplog
):
    node = made.node([binding_device("dev-0")])
    made.claim(wnamespace, "c", made.device_class())
    check = FlakyCheck(failures=3)
    start_driver_controller(wapi, background, made, check)
    made.pod(wnamespace, "p", claims={"gpu": "c"})

    eventually(lambda: made.node_of(wnamespace, "p") == node, what="pod bound", timeout=90)
    assert check.calls == 4
    text = caplog.text
    assert f"claim {wnamespace}/c, device {node}/dev-0" in text
    assert "device agent not reachable" in text
