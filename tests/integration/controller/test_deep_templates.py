"""A claim template nested past kubeapi.deepjson's bound, from the real apiserver.

Claim generation copies a template's spec into the claim. A template with opaque
parameters 600 levels deep reached it as plain containers and ``copy.deepcopy`` raised
RecursionError: the pod was retried with backoff and a traceback, forever. Now no claim is
made from such a template: a Warning Event on the template names the field and the reason,
the pod's Event says why it has no claim, and the pod is not retried until the template
changes (a new template of the name here: a template's spec is immutable).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
from controller_harness import RunningController
from helpers.deepshapes import SHAPES, TEMPLATE_LEVEL
from helpers.rawclaims import create_raw_template

from drakit.controller.app import Controller
from drakit.controller.config import ClaimGeneration, ControllerConfig
from drakit.kubeapi.deepjson import EVENT_REASON, MAX_DEPTH
from drakit.kubeapi.events import EventRecorder
from drakit.kubeapi.lightclient import LightApiClient, load_light_client
from drakit.kubeapi.resources import EVENTS, RESOURCE_CLAIM_TEMPLATES, Resource
from drakit.localcluster import LocalCluster

pytestmark = pytest.mark.integration


@pytest.fixture
def light(cluster: LocalCluster) -> Iterator[LightApiClient]:
    client = load_light_client(cluster.kubeconfig, qps=0)
    yield client
    client.close()


def warnings(recorder: EventRecorder, api: Any, namespace: str, reason: str) -> list[Any]:
    recorder.flush()
    return [
        e for e in Resource(api, EVENTS).list(namespace).items
        if e.get("reason") == reason and e.get("type") == "Warning"
    ]  # fmt: skip


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_template_past_the_depth_bound_gets_events_no_claim_and_no_retries_until_replaced(
    *, objects, api, light, namespace, eventually, caplog, shape
):
    cls = objects.device_class()
    _depth, parameters = SHAPES[shape]
    create_raw_template(light, namespace, "deep", objects.driver, device_class=cls,
                        parameters=parameters(TEMPLATE_LEVEL))  # fmt: skip
    recorder = EventRecorder(api, reporting_controller="drakit.dev/test", reporting_instance="t")
    config = ControllerConfig(claim_generation=ClaimGeneration.SCOPED, scoped_generation_grace=0)
    running = RunningController(Controller(api, config, events=recorder)).start()
    try:
        caplog.set_level(logging.INFO)
        objects.pod(namespace, "p", templates={"gpu": "deep"})
        (on_template,) = eventually(lambda: warnings(recorder, api, namespace, EVENT_REASON))
        assert on_template["regarding"]["kind"] == "ResourceClaimTemplate"
        assert on_template["regarding"]["name"] == "deep"
        assert on_template["note"].startswith("spec.spec.devices.config[0].opaque.parameters.")
        assert f"nested more than {MAX_DEPTH} levels deep" in on_template["note"]
        (on_pod,) = eventually(
            lambda: warnings(recorder, api, namespace, "FailedResourceClaimCreation")
        )
        assert on_pod["regarding"]["name"] == "p"
        assert "'deep'" in on_pod["note"] and "nested more than" in on_pod["note"]

        # Not retried: a sync of the pod ends normally and leaves nothing to back off.
        key = f"pod:{namespace}/p"
        assert running.controller.sync(key) is None
        assert running.controller.queue.rate_limiter.retries(key) == 0
        assert not [r for r in caplog.records if r.exc_info or "Sync failed" in r.getMessage()]
        assert objects.pod_claims(namespace, "p") == []

        # A new template of the name: the pod gets its claim at once.
        templates = Resource(api, RESOURCE_CLAIM_TEMPLATES)
        templates.delete("deep", namespace)
        objects.template(namespace, "deep", cls)
        eventually(lambda: objects.pod_claims(namespace, "p"), what="the claim generated")
    finally:
        running.stop()
        recorder.stop()
