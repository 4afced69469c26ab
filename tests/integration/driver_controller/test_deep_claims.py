"""``drakit driver-controller`` and a claim nested past kubeapi.deepjson's bound (real apiserver).

The controller copied ``status.devices`` entries with ``copy.deepcopy``: a claim holding
another driver's entry, or parameters, 600 levels deep raised RecursionError on every sync,
retried with backoff and a traceback, forever. Now such a claim is not handed to the driver's
check: a Warning Event on the claim names the field and the reason, once per
resourceVersion, and the claim is left alone until it changes.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from helpers.deepshapes import CLAIM_LEVEL, SHAPES
from helpers.rawclaims import allocate_raw, create_raw_claim, send

from drakit.controller.bindingconditions import BindingConditionsController, DriverControllerConfig
from drakit.kubeapi.deepjson import EVENT_REASON, MAX_DEPTH
from drakit.kubeapi.events import EventRecorder
from drakit.kubeapi.lightclient import LightApiClient, load_light_client
from drakit.kubeapi.resources import EVENTS, RESOURCE_CLAIMS, PatchType, Resource
from drakit.localcluster import LocalCluster
from drakit.plugin import BindingClaim, BindingDevice, BindingVerdict

pytestmark = pytest.mark.integration

DRIVER = "deep.test.drakit.dev"
ATTACHED, FAILED = "example.com/attached", "example.com/failed"


class RecordingCheck:
    """Says every condition is met; remembers the claims it was asked about."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def check(self, claim: BindingClaim, device: BindingDevice) -> BindingVerdict:
        self.asked.append(claim.name)
        return BindingVerdict.all_met(device)


@pytest.fixture
def light(workload_cluster: LocalCluster) -> Iterator[LightApiClient]:
    client = load_light_client(workload_cluster.kubeconfig, qps=0, fast_json=True)
    yield client
    client.close()


SHALLOW = '{"n":' * 20 + "{}" + "}" * 20
OTHER = "net.example.com"
#: The level of an entry's ``data`` in a claim (claim, status, devices, [i], data).
DATA_LEVEL = 5


def deep_allocated_claim(
    light: LightApiClient, namespace: str, parameters: str, other_data: str | None = None
) -> str:
    """A claim allocated with a device of DRIVER waiting for ATTACHED, whose opaque
    parameters (in the spec and, copied, in the allocation) are ``parameters``; with
    ``other_data``, another driver's device whose status entry holds that ``data``."""
    name = f"deep-{uuid.uuid4().hex[:6]}"
    created = create_raw_claim(light, namespace, name, DRIVER, device_class="x",
                               parameters=parameters)  # fmt: skip
    result = {"request": "gpu", "driver": DRIVER, "pool": "p", "device": "d",
              "bindingConditions": [ATTACHED], "bindingFailureConditions": [FAILED]}  # fmt: skip
    other = {"request": "gpu", "driver": OTHER, "pool": "p", "device": "nic"}
    allocate_raw(light, created, [result, other], driver=DRIVER, node="n", parameters=parameters)
    if other_data is not None:
        entry = f'{{"driver":"{OTHER}","pool":"p","device":"nic","data":{other_data}}}'
        send(light, "PATCH", RESOURCE_CLAIMS.path(namespace, name, "status"),
             f'[{{"op":"add","path":"/status/devices","value":[{entry}]}}]',
             content_type="application/json-patch+json")  # fmt: skip
    return name


def too_deep_events(recorder: EventRecorder, wapi: Any, namespace: str) -> list[Any]:
    recorder.flush()
    return [e for e in Resource(wapi, EVENTS).list(namespace).items
            if e.get("reason") == EVENT_REASON]  # fmt: skip


@pytest.mark.parametrize("place", ["parameters", "another-drivers-status-data"])
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_claim_past_the_depth_bound_is_reported_once_per_version_and_never_checked(
    *, wapi, light, wnamespace, background, eventually, caplog, shape, place
):
    # Another driver's deep status entry made copy.deepcopy raise RecursionError on every
    # sync: retried with backoff and a traceback, forever.
    _depth, deep = SHAPES[shape]
    if place == "parameters":
        name = deep_allocated_claim(light, wnamespace, deep(CLAIM_LEVEL))
        field = "spec.devices.config[0].opaque.parameters."
    else:
        name = deep_allocated_claim(light, wnamespace, SHALLOW, other_data=deep(DATA_LEVEL))
        field = "status.devices[0].data."
    recorder = EventRecorder(wapi, reporting_controller="drakit.dev/test", reporting_instance="t")
    check = RecordingCheck()
    controller = BindingConditionsController(
        light, DriverControllerConfig(DRIVER, check), events=recorder
    )
    caplog.set_level(logging.INFO)
    try:
        background.start(controller.run)
        assert controller.started.wait(60)
        (event,) = eventually(lambda: too_deep_events(recorder, wapi, wnamespace))
        assert event["type"] == "Warning"
        assert (event["regarding"]["kind"], event["regarding"]["name"]) == ("ResourceClaim", name)
        assert event["note"].startswith(field)
        assert f"nested more than {MAX_DEPTH} levels deep" in event["note"]

        # Not retried, not checked, and not reported again for the same resourceVersion.
        key = f"{wnamespace}/{name}"
        assert controller.sync(key) is None
        assert controller.queue.rate_limiter.retries(key) == 0

        def refusals() -> list[Any]:
            return [
                r for r in caplog.records
                if "nested too deep" in r.getMessage() and getattr(r, "claim", "") == key
            ]  # fmt: skip

        assert len(refusals()) == 1
        # A new resourceVersion is looked at again (and refused again).
        Resource(light, RESOURCE_CLAIMS).patch(
            name, {"metadata": {"labels": {"touched": "yes"}}}, wnamespace,
            patch_type=PatchType.MERGE,
        )  # fmt: skip
        eventually(lambda: len(refusals()) == 2, what="the new version refused too")
        assert name not in check.asked
        assert not [r for r in caplog.records if r.exc_info or "Sync failed" in r.getMessage()]
    finally:
        recorder.stop()


def test_a_shallow_claim_beside_it_is_checked_as_usual(
    *, wapi, light, wnamespace, background, eventually
):
    # The class's other side: the bound refuses only what is past it.
    name = deep_allocated_claim(light, wnamespace, SHALLOW, other_data=SHALLOW)
    check = RecordingCheck()
    controller = BindingConditionsController(light, DriverControllerConfig(DRIVER, check))
    background.start(controller.run)
    assert controller.started.wait(60)
    eventually(lambda: name in check.asked, what="the claim checked")
    claims = Resource(light, RESOURCE_CLAIMS)

    def mine() -> list[Any]:
        entries = claims.get(name, wnamespace)["status"].get("devices") or []
        return [e for e in entries if e["driver"] == DRIVER]

    (entry,) = eventually(mine, what="the condition written")
    assert [c["type"] for c in entry["conditions"]] == [ATTACHED]
