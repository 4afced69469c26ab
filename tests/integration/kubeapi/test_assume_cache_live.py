"""The assume cache on a real informer, with real writes."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest

from drakit.kubeapi.assume_cache import AssumeCache, OutOfSyncError
from drakit.kubeapi.informer import Informer
from drakit.kubeapi.objects import KubeObject
from drakit.kubeapi.resources import Resource

pytestmark = pytest.mark.integration


@pytest.fixture
def informer(claims: Resource, namespace: str) -> Iterator[Informer]:
    # A fast resync keeps re-delivering the informer's (older) copies: they must not win.
    informer = Informer(claims, namespace=namespace, resync_period=0.05)
    yield informer
    informer.stop()


def claim_body(namespace: str, name: str) -> KubeObject:
    return {
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}},
    }


def labels(obj: KubeObject | None) -> dict[str, str] | None:
    """The object's labels; None while the object is not there (yet)."""
    return None if obj is None else dict(obj["metadata"].get("labels") or {})


def test_an_assumed_write_is_read_back_at_once_and_survives_resyncs(
    claims: Resource, informer: Informer, namespace: str, eventually: Any
) -> None:
    cache = AssumeCache(informer, description="ResourceClaim")
    informer.start()
    created = claims.create(claim_body(namespace, "c"))
    eventually(lambda: cache.get(f"{namespace}/c"))
    # Write, then assume what the server returned, as the allocator does after UpdateStatus.
    changed = copy.deepcopy(created)
    changed["metadata"]["labels"] = {"allocated": "yes"}
    written = claims.update(changed)
    cache.assume(written)
    assert labels(cache.get(f"{namespace}/c")) == {"allocated": "yes"}
    # The informer catches up (same resourceVersion) and keeps resyncing: nothing regresses.
    eventually(lambda: labels(informer.store.get(f"{namespace}/c")) == {"allocated": "yes"})
    assert labels(cache.get(f"{namespace}/c")) == {"allocated": "yes"}
    # A later write by someone else is newer and replaces the assumed copy.
    claims.patch("c", {"metadata": {"labels": {"allocated": "no"}}}, namespace)
    eventually(lambda: labels(cache.get(f"{namespace}/c")) == {"allocated": "no"})


def test_restore_after_a_failed_sequence_returns_the_informer_copy(
    claims: Resource, informer: Informer, namespace: str, eventually: Any
) -> None:
    cache = AssumeCache(informer, description="ResourceClaim")
    informer.start()
    claims.create(claim_body(namespace, "c"))
    eventually(lambda: cache.get(f"{namespace}/c"))
    # Assume a local guess with the same resourceVersion (e.g. before a bind that then fails).
    guess = copy.deepcopy(cache.get(f"{namespace}/c"))
    assert guess is not None
    guess["metadata"]["labels"] = {"guess": "yes"}
    cache.assume(guess)
    assert labels(cache.get(f"{namespace}/c")) == {"guess": "yes"}
    cache.restore(f"{namespace}/c")
    assert labels(cache.get(f"{namespace}/c")) == {}


def test_assuming_a_copy_older_than_the_cached_one_is_refused(
    claims: Resource, informer: Informer, namespace: str, eventually: Any
) -> None:
    cache = AssumeCache(informer, description="ResourceClaim")
    informer.start()
    old = claims.create(claim_body(namespace, "c"))
    newer = claims.patch("c", {"metadata": {"labels": {"v": "2"}}}, namespace)
    eventually(lambda: labels(cache.get(f"{namespace}/c")) == {"v": "2"})
    with pytest.raises(OutOfSyncError):
        cache.assume(old)
    assert cache.get(f"{namespace}/c") is not None
    assert labels(cache.get(f"{namespace}/c")) == labels(newer)
