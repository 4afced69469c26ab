"""The example driver's admission must give upstream's verdicts: every generated
AdmissionReview goes to dra-example-webhook of sigs.k8s.io/dra-example-driver v0.4.0 and to
``drakit webhook`` with the example driver's admission backend, both real processes over
HTTPS, and both must admit it or both refuse it.

The only disagreements allowed are the exception classes listed in
docs/reference-parity.md (``admission_harness.EXCEPTIONS``): where upstream is at fault (its
handler crashes, it admits what its own kubelet plugin refuses at prepare, or it refuses the
metadata update of a claim whose config it would refuse today), and drakit's nesting bound,
which refuses before decoding what Go's decoder takes. Each class must still
occur (or the page is stale), and nothing else may differ.

``DRAKIT_ADMISSION_CASES`` (default 3000, split over the profiles) and
``DRAKIT_ADMISSION_SEED`` (default 41) choose the cases.
"""

from __future__ import annotations

import collections
import os

import pytest
from admission_cases import generate
from admission_harness import (
    EXCEPTIONS,
    Result,
    classify,
    documented_exceptions,
    driver_of,
    run_cases,
)

CASES = int(os.environ.get("DRAKIT_ADMISSION_CASES", "3000"))
SEED = int(os.environ.get("DRAKIT_ADMISSION_SEED", "41"))
#: The share of the cases for each profile (gpu has a config kind, cpu refuses every config).
SHARE = {"gpu": 0.85, "cpu": 0.15}
SHOWN = 5


def _summary(results: list[Result]) -> str:
    kinds = collections.Counter((r.upstream.kind, r.drakit.kind) for r in results)
    return ", ".join(f"upstream {u}/drakit {d}: {n}" for (u, d), n in sorted(kinds.items()))


# A cold build of upstream's webhook (module downloads and all) runs in the fixture.
@pytest.mark.timeout(1800)
def test_example_driver_admission_agrees_with_upstreams_webhook(webhooks: dict) -> None:
    results: list[Result] = []
    for index, (profile, (upstream, drakit)) in enumerate(webhooks.items()):
        cases = generate(SEED + index, int(CASES * SHARE[profile]), profile, driver_of(profile))
        results += run_cases(cases, upstream, drakit)
        upstream.alive()
        drakit.alive()
    by_class: dict[str | None, list[Result]] = collections.defaultdict(list)
    for result in results:
        if not result.agrees:
            by_class[classify(result)].append(result)
    unexplained = by_class.pop(None, [])
    counts = {name: len(found) for name, found in by_class.items()}
    print(f"\n{len(results)} cases: {_summary(results)}; exceptions: {counts}")
    assert not unexplained, (
        f"{len(unexplained)} of {len(results)} cases disagree outside the listed exceptions:\n"
        + "\n".join(r.report() for r in unexplained[:SHOWN])
    )
    missing = set(EXCEPTIONS) - set(by_class)
    assert not missing, (
        f"listed exception classes that no longer occur in {len(results)} cases: "
        f"{sorted(missing)}; remove them from docs/reference-parity.md and EXCEPTIONS"
    )


@pytest.mark.timeout(1800)  # the same fixture, when this test runs first
def test_crashes_are_upstreams_panics(webhooks: dict) -> None:
    """Evidence for the ``upstream-crash`` class: the closed connections are panics of
    upstream's handler (a nil pointer dereference), logged by Go's HTTP server, and the
    server goes on serving."""
    upstream, drakit = webhooks["gpu"]
    body = generate_strategy_without_settings()
    go, py = upstream.endpoint(), drakit.endpoint()
    try:
        assert go.review(body).kind == "crash"
        assert py.review(body).admitted
    finally:
        go.close()
        py.close()
    upstream.alive()
    log = upstream.log_text()
    assert "http: panic serving" in log and "nil pointer dereference" in log, log[-2000:]


def test_the_exception_classes_are_the_documented_ones() -> None:
    assert documented_exceptions() == set(EXCEPTIONS)


def generate_strategy_without_settings() -> bytes:
    """A CREATE of a claim whose GpuConfig says TimeSlicing and nothing more."""
    from admission_cases import GPU_API, Pairs, emit  # noqa: PLC0415

    params = {"apiVersion": GPU_API, "kind": "GpuConfig", "sharing": {"strategy": "TimeSlicing"}}
    obj = {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "differential"},
        "spec": {"devices": {
            "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}],
            "config": [{"opaque": {"driver": driver_of("gpu"), "parameters": params}}],
        }},
    }  # fmt: skip
    gvr = {"group": "resource.k8s.io", "version": "v1", "resource": "resourceclaims"}
    review = Pairs([
        ("apiVersion", "admission.k8s.io/v1"), ("kind", "AdmissionReview"),
        ("request", {"uid": "7d0b4c38-0b5e-4f7e-9a51-7b7c8f2a1e01", "resource": gvr,
                     "kind": {"group": "resource.k8s.io", "version": "v1", "kind": "ResourceClaim"},
                     "namespace": "differential", "operation": "CREATE", "object": obj}),
    ])  # fmt: skip
    return emit(review).encode()
