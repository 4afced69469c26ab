"""The Event recorder against a real apiserver: creation, aggregation, flood limits."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from helpers.waiting import eventually

from drakit.kubeapi.events import EventRecorder
from drakit.kubeapi.objects import KubeObject
from drakit.kubeapi.resources import EVENTS, NAMESPACES, PODS, Resource

pytestmark = pytest.mark.integration


@pytest.fixture
def recorder(api: Any) -> Iterator[Callable[..., EventRecorder]]:
    made: list[EventRecorder] = []

    def make(**kwargs: Any) -> EventRecorder:
        rec = EventRecorder(
            api, reporting_controller="drakit.dev/test", reporting_instance="test-0", **kwargs
        )
        made.append(rec)
        return rec

    yield make
    for rec in made:
        rec.stop()


@pytest.fixture
def pod(api: Any, namespace: str) -> KubeObject:
    body = {
        "metadata": {"name": "p", "namespace": namespace},
        "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]},
    }
    return Resource(api, PODS).create(body)


def events_in(api: Any, namespace: str) -> list[KubeObject]:
    return Resource(api, EVENTS).list(namespace).items


def test_an_event_is_recorded_about_the_object(
    api: Any, namespace: str, pod: KubeObject, recorder: Callable[..., EventRecorder]
) -> None:
    rec = recorder()
    rec.warning(
        pod, "FailedResourceClaimCreation", "CreateClaim", "template gpu-template not found"
    )
    assert rec.flush()
    [event] = events_in(api, namespace)
    assert event["type"] == "Warning"
    assert event["reason"] == "FailedResourceClaimCreation"
    assert event["action"] == "CreateClaim"
    assert event["note"] == "template gpu-template not found"
    assert event["regarding"]["uid"] == pod["metadata"]["uid"]
    assert event["reportingController"] == "drakit.dev/test"


def test_repeats_are_aggregated_into_one_event_series(
    api: Any, namespace: str, pod: KubeObject, recorder: Callable[..., EventRecorder]
) -> None:
    rec = recorder(min_interval=3600)  # repeats are only written by flush()
    for _ in range(100):
        rec.warning(pod, "Unschedulable", "Schedule", "0/3 nodes have a free gpu")
    rec.normal(pod, "Scheduled", "Bind", "bound to node-1")
    assert rec.flush()
    by_reason = {e["reason"]: e for e in events_in(api, namespace)}
    assert sorted(by_reason) == ["Scheduled", "Unschedulable"]
    assert by_reason["Unschedulable"]["series"]["count"] == 100
    assert "series" not in by_reason["Scheduled"]


def test_held_back_repeats_are_written_by_the_timer_without_a_flush(
    api: Any, namespace: str, pod: KubeObject, recorder: Callable[..., EventRecorder]
) -> None:
    rec = recorder(min_interval=1.0)
    for _ in range(3):
        rec.warning(pod, "Unschedulable", "Schedule", "0/3 nodes have a free gpu")
    rec.normal(pod, "Scheduled", "Bind", "bound to node-1")  # a series with nothing pending

    def series_count() -> int | None:
        by_reason = {e["reason"]: e for e in events_in(api, namespace)}
        event = by_reason.get("Unschedulable")
        return (event.get("series") or {}).get("count") if event else None

    assert eventually(lambda: series_count() == 3, "the timer writes the repeats", timeout=30)


def test_a_loop_of_ever_different_events_is_capped_per_object(
    api: Any, namespace: str, pod: KubeObject, recorder: Callable[..., EventRecorder]
) -> None:
    rec = recorder(burst=5, refill_seconds=3600)
    for attempt in range(40):
        rec.warning(pod, "FailedPrepare", "Prepare", f"attempt {attempt} failed")
    assert rec.flush()
    assert len(events_in(api, namespace)) == 5


def test_events_past_the_queue_bound_are_dropped_counted_and_warned_once(
    api: Any,
    namespace: str,
    pod: KubeObject,
    recorder: Callable[..., EventRecorder],
    caplog: pytest.LogCaptureFixture,
) -> None:
    rec = recorder(max_queued=5)
    release = threading.Event()
    writing = threading.Event()
    create = rec._events.create

    def slow_create(body: KubeObject, *args: Any, **kwargs: Any) -> KubeObject:
        writing.set()
        release.wait(30)  # the apiserver is slow: the writer is stuck on its first event
        return create(body, *args, **kwargs)

    rec._events.create = slow_create  # type: ignore[method-assign,assignment]
    rec.normal(pod, "Scheduled", "Bind", "first")
    assert writing.wait(10)
    for attempt in range(20):
        rec.warning(pod, "FailedPrepare", "Prepare", f"attempt {attempt}")
    assert rec.dropped == 15  # 5 wait behind the one being written
    release.set()
    assert rec.flush()
    notes = sorted(e["note"] for e in events_in(api, namespace))
    assert notes == sorted(["first", *(f"attempt {i}" for i in range(5))])
    warnings = [r for r in caplog.records if "Events dropped" in r.getMessage()]
    assert len(warnings) == 1  # at most one a minute


def test_events_about_cluster_scoped_objects_go_to_the_default_namespace(
    api: Any, namespace: str, recorder: Callable[..., EventRecorder]
) -> None:
    ns_object = Resource(api, NAMESPACES).get(namespace)
    rec = recorder()
    rec.normal(ns_object, "Tested", "Test", f"about {namespace}")
    assert rec.flush()
    # Other tests share the cluster: events in "default" may be about anything, or nothing.
    notes = [
        e["note"]
        for e in events_in(api, "default")
        if (e.get("regarding") or {}).get("name") == namespace
    ]
    assert notes == [f"about {namespace}"]


def test_a_bad_event_type_is_refused(
    recorder: Callable[..., EventRecorder], pod: KubeObject
) -> None:
    with pytest.raises(ValueError, match="Normal or Warning"):
        recorder().record(pod, type="Error", reason="X", action="Y")


@pytest.mark.parametrize("character", [".", "-"])
def test_event_about_an_object_whose_name_is_cut_before_a_dot_or_dash_is_accepted(
    api: Any, namespace: str, recorder: Callable[..., EventRecorder], character: str
) -> None:
    # The Event name keeps 200 characters of the object's: here the 200th is "." or "-",
    # which must not end up in front of the timestamp ("x-.17f..." is not a valid name).
    name = "a" * 199 + character + "b" * 53
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace, "uid": "uid-1"},
    }
    rec = recorder()
    rec.warning(claim, "PrepareFailed", "Prepare", "no such device")
    assert rec.flush()
    [event] = events_in(api, namespace)
    assert event["regarding"]["name"] == name
    assert event["metadata"]["name"].startswith("a" * 199 + ".")
