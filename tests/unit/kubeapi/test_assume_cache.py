"""Assume cache semantics with synthetic objects (controller-semantics.md §4)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from drakit.kubeapi.assume_cache import AssumeCache, NotInCacheError, OutOfSyncError
from drakit.kubeapi.informer import EventHandlers
from drakit.kubeapi.objects import KubeObject


def claim(name: str, rv: int | str, *, node: str = "", namespace: str = "ns") -> KubeObject:
    obj: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace, "resourceVersion": str(rv)},
    }
    if node:
        obj["status"] = {"allocation": {"nodeSelector": node}}
    return obj


def rv_of(obj: KubeObject | None) -> str:
    assert obj is not None
    return str(obj["metadata"]["resourceVersion"])


class Recorder:
    """Records handler calls as tuples."""

    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []

    def handlers(self) -> EventHandlers:
        return EventHandlers(
            on_add=lambda obj, initial: self.events.append(("add", rv_of(obj), initial)),
            on_update=lambda old, new: self.events.append(("update", rv_of(old), rv_of(new))),
            on_delete=lambda obj: self.events.append(("delete", rv_of(obj))),
        )


@pytest.fixture
def cache() -> AssumeCache:
    return AssumeCache(None, description="ResourceClaim")


def test_a_newer_informer_version_replaces_the_object(cache: AssumeCache) -> None:
    cache.informer_add(claim("a", 5))
    cache.informer_add(claim("a", 6))
    assert rv_of(cache.get("ns/a")) == "6"


def test_a_stale_informer_event_is_ignored(cache: AssumeCache) -> None:
    cache.informer_add(claim("a", 6))
    cache.informer_add(claim("a", 5))
    assert rv_of(cache.get("ns/a")) == "6"


def test_resync_and_stale_events_never_overwrite_an_assumed_object(cache: AssumeCache) -> None:
    cache.informer_add(claim("a", 5))
    cache.assume(claim("a", 7, node="n1"))
    cache.informer_add(claim("a", 5))  # resync
    cache.informer_add(claim("a", 6))  # an older write the informer delivers late
    cache.informer_add(claim("a", 7))  # the write itself: equal, not newer
    latest = cache.get("ns/a")
    assert rv_of(latest) == "7"
    assert latest is not None and latest["status"]["allocation"]["nodeSelector"] == "n1"
    assert rv_of(cache.get_api_obj("ns/a")) == "5"


def test_a_newer_informer_event_replaces_an_assumed_object(cache: AssumeCache) -> None:
    cache.informer_add(claim("a", 5))
    cache.assume(claim("a", 7, node="n1"))
    cache.informer_add(claim("a", 8))
    assert rv_of(cache.get("ns/a")) == "8"
    assert rv_of(cache.get_api_obj("ns/a")) == "8"


def test_resource_versions_compare_as_integers_not_strings(cache: AssumeCache) -> None:
    cache.informer_add(claim("a", 9))
    cache.informer_add(claim("a", 10))  # "10" < "9" as strings
    assert rv_of(cache.get("ns/a")) == "10"
    with pytest.raises(OutOfSyncError):
        cache.assume(claim("a", 9))


def test_assume_needs_the_object_in_the_cache(cache: AssumeCache) -> None:
    with pytest.raises(NotInCacheError, match="ns/a"):
        cache.assume(claim("a", 1))


def test_assuming_an_older_version_is_out_of_sync(cache: AssumeCache) -> None:
    cache.informer_add(claim("a", 5))
    with pytest.raises(OutOfSyncError, match="stored: 5, assume: 4"):
        cache.assume(claim("a", 4))
    assert rv_of(cache.get("ns/a")) == "5"


def test_assume_with_an_equal_version_is_allowed_and_loses_to_a_later_event(
    cache: AssumeCache,
) -> None:
    cache.informer_add(claim("a", 5))
    cache.assume(claim("a", 5, node="local-guess"))
    latest = cache.get("ns/a")
    assert latest is not None and "status" in latest
    cache.informer_add(claim("a", 6))
    latest = cache.get("ns/a")
    assert latest is not None and "status" not in latest


def test_a_non_integer_resource_version_is_refused_by_assume(cache: AssumeCache) -> None:
    cache.informer_add(claim("a", 5))
    with pytest.raises(ValueError, match="not an integer"):
        cache.assume(claim("a", "abc"))


def test_a_non_integer_resource_version_from_the_informer_is_ignored(cache: AssumeCache) -> None:
    cache.informer_add(claim("a", "abc"))
    assert cache.get("ns/a") is None


def test_restore_brings_back_the_informer_version(cache: AssumeCache) -> None:
    rec = Recorder()
    cache.add_handlers(rec.handlers())
    cache.informer_add(claim("a", 5))
    cache.assume(claim("a", 7))
    cache.restore("ns/a")
    assert rv_of(cache.get("ns/a")) == "5"
    assert rec.events[-1] == ("update", "7", "5")


def test_restore_without_an_assumed_version_emits_nothing(cache: AssumeCache) -> None:
    rec = Recorder()
    cache.informer_add(claim("a", 5))
    cache.add_handlers(rec.handlers())
    cache.restore("ns/a")
    cache.restore("ns/missing")  # not an error
    assert rec.events == [("add", "5", True)]


def test_an_informer_delete_removes_even_an_assumed_object(cache: AssumeCache) -> None:
    rec = Recorder()
    cache.add_handlers(rec.handlers())
    cache.informer_add(claim("a", 5))
    cache.assume(claim("a", 7))
    cache.informer_delete(claim("a", 8))
    assert cache.get("ns/a") is None
    assert rec.events[-1] == ("delete", "7")  # the last version handlers knew


def test_handlers_see_adds_updates_and_assumes_in_order(cache: AssumeCache) -> None:
    rec = Recorder()
    cache.add_handlers(rec.handlers())
    cache.informer_add(claim("a", 5))
    cache.assume(claim("a", 6))
    cache.informer_add(claim("a", 6))  # ignored: not newer
    cache.informer_add(claim("a", 7))
    assert rec.events == [("add", "5", False), ("update", "5", "6"), ("update", "6", "7")]


def test_new_handlers_first_get_every_cached_object_as_initial_add(cache: AssumeCache) -> None:
    cache.informer_add(claim("a", 5))
    cache.informer_add(claim("b", 6))
    rec = Recorder()
    cache.add_handlers(rec.handlers())
    assert sorted(rec.events) == [("add", "5", True), ("add", "6", True)]


def test_the_index_follows_the_latest_version(cache: AssumeCache) -> None:
    def by_node(obj: KubeObject) -> list[str]:
        node = (obj.get("status") or {}).get("allocation", {}).get("nodeSelector")
        return [node] if node else []

    cache = AssumeCache(None, description="ResourceClaim", index_fn=by_node)
    cache.informer_add(claim("a", 5))
    cache.informer_add(claim("b", 5, node="n2"))
    cache.assume(claim("a", 6, node="n1"))
    assert [o["metadata"]["name"] for o in cache.list("n1")] == ["a"]
    cache.restore("ns/a")
    assert cache.list("n1") == []
    assert [o["metadata"]["name"] for o in cache.list("n2")] == ["b"]
    assert len(cache.list()) == 2


def test_a_handler_may_read_the_cache_while_events_are_delivered(cache: AssumeCache) -> None:
    seen: list[str] = []
    cache.add_handlers(EventHandlers(on_add=lambda obj, _i: seen.append(rv_of(cache.get("ns/a")))))
    cache.informer_add(claim("a", 5))
    assert seen == ["5"]


def test_a_failing_handler_does_not_stop_delivery_to_the_others(cache: AssumeCache) -> None:
    def broken(obj: KubeObject, initial: bool) -> None:
        raise RuntimeError("handler bug")

    rec = Recorder()
    cache.add_handlers(EventHandlers(on_add=broken))
    cache.add_handlers(rec.handlers())
    cache.informer_add(claim("a", 5))
    assert rec.events == [("add", "5", False)]


def test_events_from_many_threads_are_delivered_one_at_a_time_and_before_assume_returns(
    cache: AssumeCache,
) -> None:
    keys = [f"c{i}" for i in range(8)]
    for key in keys:
        cache.informer_add(claim(key, 1))
    lock = threading.Lock()
    in_handler = 0
    overlaps = 0
    last_seen: dict[str, int] = {}
    order_violations: list[str] = []
    not_delivered_on_return: list[str] = []

    def on_update(old: KubeObject, new: KubeObject) -> None:
        nonlocal in_handler, overlaps
        with lock:
            in_handler += 1
            overlaps += in_handler > 1
        name = new["metadata"]["name"]
        rv = int(new["metadata"]["resourceVersion"])
        if rv <= last_seen.get(name, 0):
            order_violations.append(name)
        last_seen[name] = rv
        threading.Event().wait(0.0001)
        with lock:
            in_handler -= 1

    cache.add_handlers(EventHandlers(on_update=on_update))

    def writer(name: str) -> None:
        for rv in range(2, 60):
            if rv % 3:
                cache.assume(claim(name, rv))
            else:
                cache.informer_add(claim(name, rv))
            if last_seen.get(name) != rv:
                not_delivered_on_return.append(f"{name}@{rv}")

    threads = [threading.Thread(target=writer, args=(k,)) for k in keys]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert overlaps == 0
    assert order_violations == []
    assert not_delivered_on_return == []
    assert all(last_seen[k] == 59 for k in keys)
