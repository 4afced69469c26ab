"""The real node's share of the workload (``--real-node``), without a cluster."""

from __future__ import annotations

import pytest

from drakit.demo.real_node import EXAMPLE_IMAGE
from soak.realnode import REAL_LABEL_VALUE
from soak.stack import SCHEDULER_LABEL
from soak.workload import (
    DRAKIT_HALF,
    KUBE_HALF,
    PARTITION,
    REAL_TEMPLATES,
    real_pod_body,
    real_template,
)


@pytest.mark.parametrize("kind", ["template", "drakit", "partition", "matched", "doomed"])
def test_each_scheduler_takes_only_its_own_share_of_the_real_node(kind: str) -> None:
    kube = REAL_TEMPLATES[real_template(kind, "kube")]
    drakit = REAL_TEMPLATES[real_template(kind, "drakit")]
    assert kube == KUBE_HALF
    assert drakit in (DRAKIT_HALF, PARTITION)
    assert "index < 2" in KUBE_HALF and "index >= 2" in DRAKIT_HALF


def test_real_node_pods_run_busybox_on_the_real_node_and_print_their_gpus() -> None:
    body = real_pod_body("real-drakit-7", "drakit", "real-drakit-gpu")
    spec = body["spec"]
    assert spec["nodeSelector"] == {SCHEDULER_LABEL: REAL_LABEL_VALUE}
    assert spec["schedulerName"] == "drakit"
    [container] = spec["containers"]
    assert container["image"] == EXAMPLE_IMAGE
    assert container["imagePullPolicy"] == "Never"
    assert "GPU_" in container["command"][-1]
    assert spec["resourceClaims"] == [
        {"name": "dev", "resourceClaimTemplateName": "real-drakit-gpu"}
    ]


def test_kube_scheduled_real_node_pods_keep_the_default_scheduler() -> None:
    assert "schedulerName" not in real_pod_body("real-kube-3", "kube", "real-kube-gpu")["spec"]
