"""drakit.kubeapi.testing keeps the apiserver rules logic tests depend on."""

from __future__ import annotations

import pytest

from drakit.kubeapi.errors import Conflict, NotFound
from drakit.kubeapi.resources import RESOURCE_CLAIMS
from drakit.kubeapi.testing import FakeApi


def test_generate_name_resource_version_and_watch_events() -> None:
    api = FakeApi()
    claims = api.resource(RESOURCE_CLAIMS)
    created = claims.create({"metadata": {"generateName": "pod-gpu-", "namespace": "ns"}})
    assert created["metadata"]["name"].startswith("pod-gpu-")
    created["status"] = {"allocation": {}}
    updated = claims.update_status(created)
    assert int(updated["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])
    assert [kind for kind, _ in api.events_since("0")] == ["ADDED", "MODIFIED"]
    assert api.events_since(updated["metadata"]["resourceVersion"]) == []


def test_stale_update_and_failed_delete_precondition_are_conflicts() -> None:
    claims = FakeApi().resource(RESOURCE_CLAIMS)
    first = claims.create({"metadata": {"name": "c", "namespace": "ns"}, "spec": {"a": 1}})
    claims.update({**first, "spec": {"a": 2}})
    with pytest.raises(Conflict):
        claims.update({**first, "spec": {"a": 3}})  # first's resourceVersion is stale
    with pytest.raises(Conflict):
        claims.delete("c", "ns", uid="another-uid")
    claims.delete("c", "ns", uid=first["metadata"]["uid"])
    with pytest.raises(NotFound):
        claims.get("c", "ns")
