"""Scale: many pods onto many simulated nodes, then an independent check of every allocation.

The full workload (1,000 pods, 500 nodes, 8 devices each) runs in ``make bench``
(``tests/bench/bench_scheduling.py``); this test uses the same shapes at the size given below
to stay within the CI budget on two cores.
"""

from __future__ import annotations

import uuid

import pytest
from scale_workload import BoundWatch, build_nodes, check_allocations, create_pods

from drakit.controller.config import ClaimGeneration

pytestmark = pytest.mark.integration

PODS = 1000
NODES = 500
DEVICES_PER_NODE = 8


def test_1000_pods_on_500_nodes_never_share_a_device_and_satisfy_their_claims(
    objects, namespace, start_controller
):
    build_nodes(objects, NODES, DEVICES_PER_NODE, prefix=f"scale-{uuid.uuid4().hex[:6]}")
    objects.template(namespace, "tpl", objects.device_class())
    start_controller(claim_generation=ClaimGeneration.SCOPED, workers=16)
    with BoundWatch(objects, namespace) as watch:
        create_pods(objects, namespace, PODS, "tpl", scheduler="drakit")
        watch.wait(PODS, timeout=240)
    assert check_allocations(objects, namespace) == []
    assert len(objects.claims.list(namespace).items) == PODS
