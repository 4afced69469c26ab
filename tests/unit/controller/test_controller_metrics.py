"""Metric names and the claim gauge computed from the cache at scrape time."""

from __future__ import annotations

from drakit.controller.metrics import ControllerMetrics
from drakit.controller.naming import POD_CLAIM_NAME_ANNOTATION
from drakit.telemetry.endpoint import render_text


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
    text = render_text(metrics.registry)
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


def test_claims_by_namespace_keep_the_top_namespaces_and_sum_the_rest_as_other():
    def claim(ns: str, allocated: bool) -> dict[str, object]:
        status = {"allocation": {"devices": {}}} if allocated else {}
        return {"metadata": {"namespace": ns, "name": "c"}, "spec": {}, "status": status}

    claims = (
        [claim("big", True)] * 3
        + [claim("mid", False)] * 2
        + [claim(f"small-{i}", i % 2 == 0) for i in range(50)]
    )
    metrics = ControllerMetrics(top_namespaces=2)
    metrics.watch_pools(list, lambda: claims)
    lines = [
        line for line in render_text(metrics.registry).splitlines()
        if line.startswith("drakit_resource_claims{")
    ]  # fmt: skip
    assert sorted(lines) == [
        'drakit_resource_claims{namespace="_other",state="allocated"} 25.0',
        'drakit_resource_claims{namespace="_other",state="pending"} 25.0',
        'drakit_resource_claims{namespace="big",state="allocated"} 3.0',
        'drakit_resource_claims{namespace="mid",state="pending"} 2.0',
    ]


TAINT = {"key": "k", "effect": "NoSchedule"}


def test_pool_gauges_export_every_state_of_every_pool():
    slices = [
        {
            "metadata": {"name": "s"},
            "spec": {
                "driver": "d.example.com", "nodeName": "n",
                "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": "a"}, {"name": "b", "taints": [TAINT]}],
            },
        }
    ]  # fmt: skip
    metrics = ControllerMetrics()
    metrics.watch_pools(lambda: slices, list)
    text = render_text(metrics.registry)
    labels = 'driver="d.example.com",node="n",pool="p"'
    assert f'drakit_pool_devices{{{labels},state="free"}} 1.0' in text
    assert f'drakit_pool_devices{{{labels},state="tainted"}} 1.0' in text
    assert f'drakit_pool_devices{{{labels},state="allocated"}} 0.0' in text


def test_scrapes_without_a_cache_change_decode_no_claims_again(monkeypatch):
    import drakit.controller.metrics as module  # noqa: PLC0415

    decoded: list[int] = []
    real_held_claims = module.held_claims

    def counting_held_claims(claims):  # type: ignore[no-untyped-def]
        decoded.append(len(claims))
        return real_held_claims(claims)

    monkeypatch.setattr(module, "held_claims", counting_held_claims)
    claims = [{"metadata": {"namespace": "ns", "name": "c", "uid": "u"}, "spec": {}}]
    metrics = ControllerMetrics(refresh_seconds=0.0)
    metrics.watch_pools(list, lambda: claims)
    first = render_text(metrics.registry)
    second = render_text(metrics.registry)
    assert first == second
    assert decoded == [1]  # the second scrape served the first count
    metrics.caches_changed()
    render_text(metrics.registry)
    assert decoded == [1, 1]  # a change is counted at the next scrape
