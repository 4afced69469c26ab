"""Metric names and the claim gauge computed from the cache at scrape time."""

from __future__ import annotations

from prometheus_client import generate_latest

from controller.metrics import ControllerMetrics
from controller.naming import POD_CLAIM_NAME_ANNOTATION


def test_claim_gauge_counts_claims_by_allocation_admin_access_and_source():
    claims = [
        {"metadata": {"annotations": {POD_CLAIM_NAME_ANNOTATION: "gpu"}},
         "spec": {}, "status": {"allocation": {"devices": {}}}},
        {"metadata": {}, "spec": {"devices": {"requests": [
            {"name": "r", "exactly": {"deviceClassName": "c", "adminAccess": True}}]}}},
    ]  # fmt: skip
    metrics = ControllerMetrics()
    metrics.watch_claims(lambda: claims)
    metrics.claim_creates.labels("success", "false").inc()
    text = generate_latest(metrics.registry).decode()
    assert (
        'dynamic_resource_allocation_resource_claims{admin_access="false",allocated="true",'
        'source="resource_claim_template"} 1.0' in text
    )
    assert (
        'dynamic_resource_allocation_resource_claims{admin_access="true",allocated="false",'
        'source=""} 1.0' in text
    )
    assert (
        'dynamic_resource_allocation_resourceclaim_creates_total{admin_access="false",'
        'status="success"} 1.0' in text
    )
