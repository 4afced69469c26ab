"""End to end through the controller: template -> claim -> allocation -> bound pod."""

from __future__ import annotations

import uuid

import pytest

pytestmark = pytest.mark.integration


def test_pod_with_template_is_allocated_and_bound(objects, namespace, start_controller, eventually):
    cls = objects.device_class()
    node = f"n-{uuid.uuid4().hex[:6]}"
    objects.node(node, devices=2)
    objects.template(namespace, "gpu", cls)
    start_controller()
    objects.pod(namespace, "p1", templates={"gpu": "gpu"})
    pod = eventually(lambda: (p := objects.pods.get("p1", namespace))["spec"].get("nodeName") and p)
    assert pod["spec"]["nodeName"] == node
    (claim,) = objects.pod_claims(namespace, "p1")
    assert claim["status"]["allocation"]["devices"]["results"][0]["driver"] == objects.driver
    assert claim["status"]["reservedFor"] == [
        {"resource": "pods", "name": "p1", "uid": pod["metadata"]["uid"]}
    ]
