"""status.devices written by the node plugin at prepare, removed at unprepare (real apiserver)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from claims import DRIVER, NODE, call, create_claim, result
from conftest import EXAMPLE_CONFIG, CoreFactory, RecordingEvents
from helpers.rawclaims import PARAMETERS, allocate_raw, create_raw_claim, raw_claim_text, send

from drakit.backends.example import ExampleBackend
from drakit.kubeapi.deepjson import MAX_DEPTH
from drakit.kubeapi.lightclient import load_light_client
from drakit.kubeapi.resources import RESOURCE_CLAIMS, Resource
from drakit.localcluster import LocalCluster
from drakit.node_plugin.device_status import DeviceStatusWriter
from drakit.plugin import (
    BackendContext,
    BackendPrepared,
    ClaimRef,
    ClaimToPrepare,
    DeviceStatus,
    NetworkData,
    RequestContext,
)

pytestmark = pytest.mark.integration

OTHER_DRIVER = "net.example.com"

StatusFor = Callable[[ClaimToPrepare], tuple[DeviceStatus | None, ...]]


class StatusBackend(ExampleBackend):
    """The example backend, reporting the device status ``status_for`` gives."""

    def __init__(self, status_for: StatusFor) -> None:
        super().__init__(BackendContext(DRIVER, NODE, EXAMPLE_CONFIG))
        self.status_for = status_for

    def prepare(self, claim: ClaimToPrepare, context: RequestContext) -> BackendPrepared:
        prepared = super().prepare(claim, context)
        return BackendPrepared(prepared.device_edits, prepared.state, self.status_for(claim))


def gpu_status(claim: ClaimToPrepare) -> tuple[DeviceStatus | None, ...]:
    return tuple(
        DeviceStatus(
            data={"uuid": f"uuid-{d.device}", "model": "LATEST-GPU-MODEL"},
            network_data=NetworkData("eth1", ("10.9.8.7/24",), "00:11:22:33:44:55"),
            conditions=({"type": "Ready", "status": "True", "reason": "Prepared"},),
        )
        for d in claim.devices
    )


def devices_of(claims: Resource, namespace: str, name: str) -> list[dict[str, Any]]:
    return list(claims.get(name, namespace).get("status", {}).get("devices", []))


def test_prepare_writes_data_network_data_and_conditions_of_each_device(
    make_core: CoreFactory, claims: Resource, namespace: str
) -> None:
    core = make_core(backend=StatusBackend(gpu_status))
    ref = create_claim(claims, namespace, [result("gpu", "gpu-0"), result("gpu", "gpu-1")])
    assert core.prepare([ref], call(core.config))[ref.uid].error == ""
    devices = devices_of(claims, namespace, ref.name)
    assert [(d["driver"], d["pool"], d["device"]) for d in devices] == [
        (DRIVER, NODE, "gpu-0"),
        (DRIVER, NODE, "gpu-1"),
    ]
    assert devices[0]["data"] == {"uuid": "uuid-gpu-0", "model": "LATEST-GPU-MODEL"}
    assert devices[0]["networkData"] == {
        "interfaceName": "eth1",
        "ips": ["10.9.8.7/24"],
        "hardwareAddress": "00:11:22:33:44:55",
    }
    (ready,) = devices[0]["conditions"]
    assert (ready["type"], ready["status"], ready["reason"]) == ("Ready", "True", "Prepared")
    assert ready["lastTransitionTime"]


def test_unprepare_removes_the_entries_and_keeps_another_drivers(
    make_core: CoreFactory, claims: Resource, namespace: str
) -> None:
    core = make_core(backend=StatusBackend(gpu_status))
    ref = create_claim(
        claims,
        namespace,
        [result("gpu", "gpu-2"), result("nic", "nic-0", driver=OTHER_DRIVER)],
        requests=("gpu", "nic"),
    )
    other = {"driver": OTHER_DRIVER, "pool": NODE, "device": "nic-0", "data": {"mine": True}}
    obj = claims.get(ref.name, namespace)
    obj["status"]["devices"] = [other]
    claims.update_status(obj)

    assert core.prepare([ref], call(core.config))[ref.uid].error == ""
    assert [d["device"] for d in devices_of(claims, namespace, ref.name)] == ["nic-0", "gpu-2"]
    assert core.unprepare([ref], call(core.config))[ref.uid] == ""
    (left,) = devices_of(claims, namespace, ref.name)
    assert (left["driver"], left["device"], left["data"]) == (OTHER_DRIVER, "nic-0", {"mine": True})


def test_prepare_keeps_conditions_another_writer_set_on_the_same_device(
    make_core: CoreFactory, claims: Resource, namespace: str
) -> None:
    core = make_core(backend=StatusBackend(gpu_status))
    ref = create_claim(claims, namespace, [result("gpu", "gpu-3")])
    binding = {
        "type": "dra.example.com/is-prepared",
        "status": "True",
        "reason": "Checked",
        "message": "",
        "lastTransitionTime": "2026-01-02T03:04:05Z",
    }
    obj = claims.get(ref.name, namespace)
    obj["status"]["devices"] = [
        {"driver": DRIVER, "pool": NODE, "device": "gpu-3", "conditions": [binding]}
    ]
    claims.update_status(obj)

    core.prepare([ref], call(core.config))
    (entry,) = devices_of(claims, namespace, ref.name)
    assert [c["type"] for c in entry["conditions"]] == ["dra.example.com/is-prepared", "Ready"]
    assert entry["data"]["uuid"] == "uuid-gpu-3"


def test_each_share_of_one_device_gets_its_own_entry_with_its_share_id(
    make_core: CoreFactory, claims: Resource, namespace: str
) -> None:
    core = make_core(backend=StatusBackend(gpu_status))
    shares = [str(uuid.uuid4()), str(uuid.uuid4())]
    ref = create_claim(
        claims,
        namespace,
        [
            result("a", "shared-gpu-0", shareID=shares[0], consumedCapacity={"memory": "10Gi"}),
            result("b", "shared-gpu-0", shareID=shares[1], consumedCapacity={"memory": "20Gi"}),
        ],
        requests=("a", "b"),
    )
    assert core.prepare([ref], call(core.config))[ref.uid].error == ""
    devices = devices_of(claims, namespace, ref.name)
    assert sorted(d.get("shareID") for d in devices) == sorted(shares)
    assert core.unprepare([ref], call(core.config))[ref.uid] == ""
    assert devices_of(claims, namespace, ref.name) == []


def test_data_over_10_kib_fails_the_prepare_naming_device_and_limit(
    make_core: CoreFactory, claims: Resource, namespace: str
) -> None:
    events = RecordingEvents()

    def too_big(claim: ClaimToPrepare) -> tuple[DeviceStatus | None, ...]:
        return (DeviceStatus(data={"blob": "x" * 11000}),)

    core = make_core(backend=StatusBackend(too_big), events=events)
    ref = create_claim(claims, namespace, [result("gpu", "gpu-0")])
    error = core.prepare([ref], call(core.config))[ref.uid].error
    assert "device node-a/gpu-0: data:" in error
    assert "10 KiB" in error
    assert devices_of(claims, namespace, ref.name) == []
    assert [e[1] for e in events.events] == ["PrepareFailed"]
    assert not list(core.config.cdi_root.iterdir())  # rolled back


def test_a_status_that_cannot_be_written_leaves_the_prepare_successful_with_an_event(
    make_core: CoreFactory, claims: Resource, namespace: str
) -> None:
    events = RecordingEvents()
    writer = DeviceStatusWriter(
        claims, DRIVER, field_manager="test", unsupported=lambda: "feature gate off"
    )
    core = make_core(backend=StatusBackend(gpu_status), events=events, device_status=writer)
    ref = create_claim(claims, namespace, [result("gpu", "gpu-1")])
    out = core.prepare([ref], call(core.config))[ref.uid]
    assert out.error == ""
    assert out.devices
    assert devices_of(claims, namespace, ref.name) == []
    ((regarding, reason, action, note),) = events.events
    assert (regarding["metadata"]["name"], reason, action) == (
        ref.name,
        "DeviceStatusNotWritten",
        "Prepare",
    )
    assert "feature gate off" in note


def test_a_backend_without_device_status_writes_nothing(
    make_core: CoreFactory, claims: Resource, namespace: str
) -> None:
    core = make_core(backend=StatusBackend(lambda claim: ()))
    ref = create_claim(claims, namespace, [result("gpu", "gpu-0")])
    rv = claims.get(ref.name, namespace)["metadata"]["resourceVersion"]
    assert core.prepare([ref], call(core.config))[ref.uid].error == ""
    assert claims.get(ref.name, namespace)["metadata"]["resourceVersion"] == rv


def test_the_plugins_own_client_writes_and_removes_the_entries(
    cluster: LocalCluster, claims: Resource, namespace: str
) -> None:
    # The wired plugin reads and writes claims through the light client, not the test's.
    client = load_light_client(cluster.kubeconfig, user_agent="test")
    try:
        writer = DeviceStatusWriter(
            Resource(client, RESOURCE_CLAIMS), DRIVER, field_manager=f"{DRIVER}/{NODE}"
        )
        ref = create_claim(claims, namespace, [result("gpu", "gpu-0")])
        entry = {"driver": DRIVER, "pool": NODE, "device": "gpu-0", "data": {"a": 1}}
        assert writer.write(ref, [entry | {"conditions": []}]) == ""
        assert devices_of(claims, namespace, ref.name)[0]["data"] == {"a": 1}
        assert writer.remove(ref, {(NODE, "gpu-0", "")}) == ""
        assert devices_of(claims, namespace, ref.name) == []
    finally:
        client.close()


@pytest.mark.parametrize("client_kind", ["light", "full"])
def test_status_write_and_removal_leave_opaque_parameters_bytes_as_the_scheduler_wrote_them(
    cluster: LocalCluster, claims: Resource, namespace: str, client_kind: str
) -> None:
    # The apiserver compares status.allocation byte for byte: a write that sent the decoded
    # and re-encoded parameters back was refused ("field cannot be modified once set").
    light = load_light_client(cluster.kubeconfig, user_agent="test")
    try:
        api = light if client_kind == "light" else claims.api
        writer = DeviceStatusWriter(
            Resource(api, RESOURCE_CLAIMS), DRIVER, field_manager=f"{DRIVER}/{NODE}"
        )
        created = create_raw_claim(light, namespace, "raw-params", DRIVER, device_class=DRIVER)
        allocate_raw(light, created, [result("gpu", "gpu-0")], driver=DRIVER, node=NODE)
        meta = created["metadata"]
        ref = ClaimRef(namespace=namespace, uid=meta["uid"], name=meta["name"])
        entry = {"driver": DRIVER, "pool": NODE, "device": "gpu-0", "data": {"a": "<b>"}}

        assert writer.write(ref, [entry | {"conditions": []}]) == ""
        assert devices_of(claims, namespace, ref.name)[0]["data"] == {"a": "<b>"}
        assert writer.remove(ref, {(NODE, "gpu-0", "")}) == ""
        assert devices_of(claims, namespace, ref.name) == []
        # spec and allocation still carry the bytes as written
        assert raw_claim_text(light, namespace, ref.name).count(PARAMETERS) == 2
    finally:
        light.close()


# -- depth: kubeapi.deepjson's bound -----------------------------------------------------------


def nested_data(shape: str) -> dict[str, Any]:
    """A backend's ``data`` 600 objects deep, or holding arrays 2,000 deep (4 KB: within the
    apiserver's 10 KiB, and past what json.dumps can write without RecursionError)."""
    value: Any = {} if shape == "objects-600" else []
    for _ in range(599 if shape == "objects-600" else 1999):
        value = {"n": value} if shape == "objects-600" else [value]
    return value if shape == "objects-600" else {"l": value}


@pytest.mark.parametrize("shape", ["objects-600", "lists-2000"])
def test_data_nested_past_the_depth_bound_fails_the_prepare_naming_device_field_and_reason(
    make_core: CoreFactory, claims: Resource, namespace: str, shape: str
) -> None:
    # Such data used to be written as it was (600) or to raise RecursionError out of the
    # prepare (2,000): the first is a claim no drakit component can walk, the second a crash.
    events = RecordingEvents()
    data = nested_data(shape)

    def deep(claim: ClaimToPrepare) -> tuple[DeviceStatus | None, ...]:
        return (DeviceStatus(data=data),)

    core = make_core(backend=StatusBackend(deep), events=events)
    ref = create_claim(claims, namespace, [result("gpu", "gpu-0")])
    error = core.prepare([ref], call(core.config))[ref.uid].error
    assert f"device {NODE}/gpu-0: data." in error
    assert f"nested more than {MAX_DEPTH - 3} levels deep (the claim may nest {MAX_DEPTH})" in error
    assert "Traceback" not in error and "RecursionError" not in error
    assert devices_of(claims, namespace, ref.name) == []
    assert [e[1] for e in events.events] == ["PrepareFailed"]
    assert not list(core.config.cdi_root.iterdir())  # rolled back


def entry_text(claim_text: str, driver: str) -> str:
    """The text of ``driver``'s status.devices entry, as the apiserver served it."""
    start = claim_text.index(f'{{"driver":"{driver}"')
    depth, in_string, escaped = 0, False, False
    for end, char in enumerate(claim_text[start:], start):
        if in_string:
            escaped, in_string = (False, True) if escaped else (char == "\\", char != '"')
        elif char == '"':
            in_string = True
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
            if depth == 0:
                return claim_text[start : end + 1]
    raise AssertionError(f"no entry of {driver}")


def test_another_drivers_entry_600_levels_deep_is_left_as_stored(
    cluster: LocalCluster, make_core: CoreFactory, claims: Resource, namespace: str
) -> None:
    # Its data (another driver's, past the bound, in bytes no Python encoder reproduces) is
    # neither walked nor sent: the plugin patches its own entry only.
    core = make_core(backend=StatusBackend(gpu_status))
    ref = create_claim(
        claims,
        namespace,
        [result("gpu", "gpu-1"), result("nic", "nic-0", driver=OTHER_DRIVER)],
        requests=("gpu", "nic"),
    )
    deep = '{"z":1E3,"d":' + '{"n":' * 600 + "{}" + "}" * 600 + "}"
    entry = f'{{"driver":"{OTHER_DRIVER}","pool":"{NODE}","device":"nic-0","data":{deep}}}'
    light = load_light_client(cluster.kubeconfig, user_agent="test")
    try:
        path = RESOURCE_CLAIMS.path(namespace, ref.name, "status")
        patch = f'[{{"op":"add","path":"/status/devices","value":[{entry}]}}]'
        send(light, "PATCH", path, patch, content_type="application/json-patch+json")
        stored = entry_text(raw_claim_text(light, namespace, ref.name), OTHER_DRIVER)
        assert deep in stored

        assert core.prepare([ref], call(core.config))[ref.uid].error == ""
        assert entry_text(raw_claim_text(light, namespace, ref.name), OTHER_DRIVER) == stored
        assert [d["device"] for d in devices_of(claims, namespace, ref.name)] == ["nic-0", "gpu-1"]
        assert core.unprepare([ref], call(core.config))[ref.uid] == ""
        assert entry_text(raw_claim_text(light, namespace, ref.name), OTHER_DRIVER) == stored
    finally:
        light.close()
