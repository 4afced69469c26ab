"""Read-modify-write with retry on conflict, against concurrent writers."""

from __future__ import annotations

from typing import Any

import pytest

from drakit.kubeapi import errors
from drakit.kubeapi.objects import KubeObject
from drakit.kubeapi.resources import RESOURCE_CLAIMS, Resource
from drakit.kubeapi.retry import retry_on_conflict, update_with_retry

pytestmark = pytest.mark.integration


@pytest.fixture
def claims(api: Any, namespace: str) -> Resource:
    resource = Resource(api, RESOURCE_CLAIMS)
    body = {
        "metadata": {"name": "c", "namespace": namespace},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}},
    }
    resource.create(body)
    return resource


def test_update_with_retry_keeps_a_concurrent_writers_change(
    claims: Resource, namespace: str
) -> None:
    attempts = 0

    def add_finalizer(claim: KubeObject) -> None:
        nonlocal attempts
        attempts += 1
        if attempts == 1:  # someone else writes between our GET and our PUT
            claims.patch("c", {"metadata": {"labels": {"other": "writer"}}}, namespace)
        claim["metadata"].setdefault("finalizers", []).append("drakit.dev/test")

    stored = update_with_retry(claims, "c", add_finalizer, namespace)
    assert attempts == 2
    assert stored["metadata"]["finalizers"] == ["drakit.dev/test"]
    assert stored["metadata"]["labels"] == {"other": "writer"}
    claims.patch("c", {"metadata": {"finalizers": None}}, namespace)


def test_update_with_retry_writes_nothing_when_nothing_changed(
    claims: Resource, namespace: str
) -> None:
    before = claims.get("c", namespace)
    after = update_with_retry(claims, "c", lambda claim: None, namespace)
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]


def test_retry_on_conflict_gives_up_after_the_last_attempt(
    claims: Resource, namespace: str
) -> None:
    calls = 0

    def always_stale() -> KubeObject:
        nonlocal calls
        calls += 1
        stale = claims.get("c", namespace)
        claims.patch("c", {"metadata": {"labels": {"n": str(calls)}}}, namespace)
        return claims.update(stale)

    with pytest.raises(errors.Conflict):
        retry_on_conflict(always_stale, attempts=3)
    assert calls == 3


def test_already_exists_is_not_retried(claims: Resource, namespace: str) -> None:
    calls = 0

    def create_twice() -> KubeObject:
        nonlocal calls
        calls += 1
        return claims.create(
            claims.get("c", namespace) | {"metadata": {"name": "c", "namespace": namespace}}
        )

    with pytest.raises(errors.AlreadyExists):
        retry_on_conflict(create_twice)
    assert calls == 1
