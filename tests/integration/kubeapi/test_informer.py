"""Informers against a real kube-apiserver: add/update/delete, indexes, resync, relist on 410."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from drakit.kubeapi.informer import EventHandlers, Informer
from drakit.kubeapi.objects import KubeObject
from drakit.kubeapi.resources import EVENTS, RESOURCE_CLAIMS, Resource

pytestmark = pytest.mark.integration


def claim_body(namespace: str, name: str, labels: dict[str, str] | None = None) -> KubeObject:
    return {
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}},
    }


class Recorder:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.events: list[tuple[str, str, Any]] = []

    def handlers(self) -> EventHandlers:
        return EventHandlers(
            on_add=lambda o, initial: self._add(("add", name(o), initial)),
            on_update=lambda old, new: self._add(("update", name(new), old is new)),
            on_delete=lambda o: self._add(("delete", name(o), None)),
        )

    def _add(self, event: tuple[str, str, Any]) -> None:
        with self.lock:
            self.events.append(event)

    def snapshot(self) -> list[tuple[str, str, Any]]:
        with self.lock:
            return list(self.events)


def name(obj: KubeObject) -> str:
    return str(obj["metadata"]["name"])


@pytest.fixture
def start_informer() -> Iterator[Callable[..., Informer]]:
    started: list[Informer] = []

    def start(resource: Resource, recorder: Recorder | None = None, **kwargs: Any) -> Informer:
        informer = Informer(resource, **kwargs)
        if recorder is not None:
            informer.add_handlers(recorder.handlers())
        informer.start()
        started.append(informer)
        assert informer.wait_for_sync(60)
        return informer

    yield start
    for informer in started:
        informer.stop()


def test_existing_objects_arrive_as_initial_adds_before_sync(
    claims: Resource, namespace: str, start_informer: Callable[..., Informer]
) -> None:
    claims.create(claim_body(namespace, "old"))
    rec = Recorder()
    informer = start_informer(claims, rec, namespace=namespace)
    assert rec.snapshot() == [("add", "old", True)]
    assert informer.store.get(f"{namespace}/old") is not None


def test_informer_sees_add_update_and_delete_in_order(
    claims: Resource, namespace: str, start_informer: Callable[..., Informer], eventually: Any
) -> None:
    rec = Recorder()
    informer = start_informer(claims, rec, namespace=namespace)
    claims.create(claim_body(namespace, "c"))
    claims.patch("c", {"metadata": {"labels": {"step": "2"}}}, namespace)
    claims.delete("c", namespace)
    eventually(lambda: len(rec.snapshot()) == 3)
    assert rec.snapshot() == [("add", "c", False), ("update", "c", False), ("delete", "c", None)]
    assert informer.store.get(f"{namespace}/c") is None


def test_the_store_already_holds_a_change_when_its_handler_runs(
    claims: Resource, namespace: str, start_informer: Callable[..., Informer], eventually: Any
) -> None:
    seen_in_store: list[bool] = []
    informer = Informer(claims, namespace=namespace)
    informer.add_handlers(
        EventHandlers(
            on_add=lambda o, _i: seen_in_store.append(
                informer.store.get(f"{namespace}/{name(o)}") is o
            )
        )
    )
    informer.start()
    try:
        assert informer.wait_for_sync(60)
        claims.create(claim_body(namespace, "c"))
        eventually(lambda: seen_in_store)
    finally:
        informer.stop()
    assert seen_in_store == [True]


def test_objects_can_be_found_by_namespace_and_by_custom_index(
    claims: Resource, namespace: str, start_informer: Callable[..., Informer], eventually: Any
) -> None:
    def by_team(obj: KubeObject) -> list[str]:
        team = (obj["metadata"].get("labels") or {}).get("team")
        return [team] if team else []

    informer = start_informer(claims, indexers={"team": by_team})
    claims.create(claim_body(namespace, "a", {"team": "red"}))
    claims.create(claim_body(namespace, "b", {"team": "blue"}))
    eventually(lambda: len(informer.store.by_index("namespace", namespace)) == 2)
    assert [
        name(o)
        for o in informer.store.by_index("team", "red")
        if o["metadata"]["namespace"] == namespace
    ] == ["a"]
    claims.patch("a", {"metadata": {"labels": {"team": "blue"}}}, namespace)
    eventually(
        lambda: (
            not [
                o
                for o in informer.store.by_index("team", "red")
                if o["metadata"]["namespace"] == namespace
            ]
        )
    )
    assert sorted(
        name(o)
        for o in informer.store.by_index("team", "blue")
        if o["metadata"]["namespace"] == namespace
    ) == ["a", "b"]


def test_label_selected_informer_sees_only_matching_objects(
    claims: Resource, namespace: str, start_informer: Callable[..., Informer], eventually: Any
) -> None:
    rec = Recorder()
    start_informer(claims, rec, namespace=namespace, label_selector="app=drakit")
    claims.create(claim_body(namespace, "other"))
    claims.create(claim_body(namespace, "mine", {"app": "drakit"}))
    eventually(rec.snapshot)
    claims.create(claim_body(namespace, "mine-too", {"app": "drakit"}))
    eventually(lambda: len(rec.snapshot()) == 2)
    assert [e[1] for e in rec.snapshot()] == ["mine", "mine-too"]


def test_a_handler_added_after_start_first_gets_the_current_objects(
    claims: Resource, namespace: str, start_informer: Callable[..., Informer], eventually: Any
) -> None:
    claims.create(claim_body(namespace, "a"))
    informer = start_informer(claims, namespace=namespace)
    rec = Recorder()
    informer.add_handlers(rec.handlers())
    assert rec.snapshot() == [("add", "a", True)]
    claims.create(claim_body(namespace, "b"))
    eventually(lambda: len(rec.snapshot()) == 2)
    assert rec.snapshot()[1] == ("add", "b", False)


def test_resync_delivers_every_object_again_as_an_update(
    claims: Resource, namespace: str, start_informer: Callable[..., Informer], eventually: Any
) -> None:
    claims.create(claim_body(namespace, "a"))
    rec = Recorder()
    start_informer(claims, rec, namespace=namespace, resync_period=0.2)
    eventually(lambda: ("update", "a", True) in rec.snapshot())


def test_informer_relists_after_410_gone_and_catches_up(
    api: Any,
    namespace: str,
    start_informer: Callable[..., Informer],
    eventually: Any,
    compact_etcd: Callable[[], int],
) -> None:
    # Events bypass the apiserver's watch cache, so a re-watch from a compacted revision gets
    # 410 Gone from etcd, as any watch does once its resourceVersion is older than the window.
    events = Resource(api, EVENTS)
    rec = Recorder()
    informer = start_informer(events, rec, namespace=namespace, watch_timeout_seconds=1)
    events.create(event_body(namespace, "first"))
    eventually(lambda: len(informer.store) == 1)
    # Advance etcd past the informer's last resourceVersion (another namespace), then compact:
    # the informer's next watch (each ends after 1 s) starts from a revision that is gone.
    other = Resource(api, RESOURCE_CLAIMS)
    other.create(claim_body(namespace, "bump-1"))
    other.create(claim_body(namespace, "bump-2"))
    compact_etcd()
    eventually(lambda: informer.relists >= 1, what="informer never relisted")
    events.create(event_body(namespace, "second"))
    eventually(lambda: len(informer.store) == 2)
    assert [e[1] for e in rec.snapshot() if e[0] == "add"] == ["first", "second"]


def test_stop_ends_the_informer_threads(claims: Resource, namespace: str) -> None:
    informer = Informer(claims, namespace=namespace)
    informer.start()
    assert informer.wait_for_sync(60)
    informer.stop()
    assert not informer.is_running()


def event_body(namespace: str, name: str) -> KubeObject:
    return {
        "metadata": {"name": name, "namespace": namespace},
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "reportingController": "drakit.dev/test",
        "reportingInstance": "test",
        "action": "Test",
        "reason": "Testing",
        "type": "Normal",
        "regarding": {"kind": "Pod", "namespace": namespace, "name": "p", "apiVersion": "v1"},
    }


def test_bookmarks_advance_the_resource_version_without_events(
    api: Any,
    claims: Resource,
    namespace: str,
    start_informer: Callable[..., Informer],
    eventually: Any,
) -> None:
    # The apiserver sends a bookmark 2 s before a watch times out (and about once a minute),
    # carrying its watch cache's resourceVersion.
    informer = start_informer(claims, namespace=namespace, watch_timeout_seconds=5)
    claims.create(claim_body(namespace, "a"))
    eventually(lambda: len(informer.store) == 1)
    seen = int(informer.last_resource_version)
    elsewhere = Resource(api, EVENTS).create(event_body(namespace, "elsewhere"))  # not a claim
    target = int(elsewhere["metadata"]["resourceVersion"])
    assert target > seen
    claims.list(namespace)  # a consistent read brings the claim watch cache up to date
    eventually(lambda: int(informer.last_resource_version) >= target)
    assert len(informer.store) == 1


def test_a_failing_list_is_retried_with_its_cause_logged_and_never_reports_synced(
    claims: Resource, namespace: str, eventually: Any, caplog: pytest.LogCaptureFixture
) -> None:
    informer = Informer(claims, namespace=namespace, field_selector="spec.bogus=1")
    with caplog.at_level(logging.WARNING, logger="drakit.kubeapi.informer"):
        informer.start()
        try:
            failures = eventually(
                lambda: [
                    r for r in caplog.records if r.getMessage().startswith("List or watch failed")
                ]
            )
            assert not informer.has_synced()
        finally:
            informer.stop()
    assert "BadRequest" in failures[0].cause
    assert "spec.bogus" in failures[0].cause


def test_a_transform_shapes_what_the_store_keeps_from_the_list_and_the_watch(
    claims: Resource, namespace: str, start_informer: Callable[..., Informer], eventually: Any
) -> None:
    def keep_name(obj: KubeObject) -> KubeObject:
        meta = obj["metadata"]
        return {"metadata": {k: meta[k] for k in ("name", "namespace", "resourceVersion")}}

    claims.create(claim_body(namespace, "listed"))
    rec = Recorder()
    informer = start_informer(claims, rec, namespace=namespace, transform=keep_name)
    claims.create(claim_body(namespace, "watched"))
    eventually(lambda: informer.store.get(f"{namespace}/watched"), what="the watched claim")
    for claim in ("listed", "watched"):
        kept = informer.store.get(f"{namespace}/{claim}")
        assert kept is not None
        assert set(kept) == {"metadata"}
        assert set(kept["metadata"]) == {"name", "namespace", "resourceVersion"}
    assert rec.snapshot() == [("add", "listed", True), ("add", "watched", False)]
