"""The device book: in-flight allocations win over stale cache events until they end."""

from __future__ import annotations

from typing import Any

from drakit.allocator.model import DeviceID, ModelError
from drakit.controller.devicebook import DeviceBook, claim_model, decode_claim_model, held_model


def claim(uid: str, device: str | None, rv: str = "1") -> dict[str, Any]:
    status: dict[str, Any] = {}
    if device is not None:
        result = {"request": "r", "driver": "d", "pool": "p", "device": device}
        status["allocation"] = {"devices": {"results": [result]}}
    return {
        "metadata": {"name": uid, "namespace": "ns", "uid": uid, "resourceVersion": rv},
        "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "c"}}]}},
        "status": status,
    }


def book(cache: dict[str, Any]) -> DeviceBook:
    return DeviceBook(list_slices=list, list_classes=list, get_claim=cache.get)


def book_deciding(uid: str, device: str) -> tuple[DeviceBook, dict[str, Any]]:
    """A book whose cache holds claim `uid` unallocated, with `device` decided for it in flight."""
    cache: dict[str, Any] = {f"ns/{uid}": claim(uid, None)}
    b = book(cache)
    decide(b, claim(uid, device))
    return b, cache


def decide(b: DeviceBook, written: dict[str, Any]) -> None:
    model = claim_model(written)
    assert model is not None
    b.begin(written, model)


def test_cache_events_add_and_remove_allocated_devices():
    b = book({})
    b.claim_changed(claim("a", "d0"))
    assert b.state.is_allocated(DeviceID("d", "p", "d0"))
    b.claim_changed(claim("a", None, rv="2"))
    assert not b.state.is_allocated(DeviceID("d", "p", "d0"))


def test_in_flight_allocation_survives_a_stale_unallocated_event():
    b = book({"ns/a": claim("a", None)})
    written = claim("a", "d0")
    decide(b, written)
    b.claim_changed(claim("a", None))  # e.g. the finalizer write, before the allocation
    assert b.state.is_allocated(DeviceID("d", "p", "d0"))
    assert b.in_flight("a") is written


def test_finish_after_success_keeps_the_devices_from_the_assumed_claim():
    b, cache = book_deciding("a", "d0")
    cache["ns/a"] = claim("a", "d0", rv="5")  # assumed after the write
    b.finish("a", "ns/a")
    assert b.in_flight("a") is None
    assert b.state.is_allocated(DeviceID("d", "p", "d0"))


def test_finish_after_failure_frees_the_devices():
    b, _ = book_deciding("a", "d0")
    b.finish("a", "ns/a")
    assert not b.state.is_allocated(DeviceID("d", "p", "d0"))


def test_snapshot_is_unaffected_by_later_changes_and_every_change_moves_the_generation():
    cache: dict[str, Any] = {"ns/b": claim("b", None)}
    b = book(cache)
    b.claim_changed(claim("a", "d0"))
    generation, state = b.snapshot()
    assert b.snapshot() == (generation, state)  # shared until something changes
    decide(b, claim("b", "d1"))
    assert b.generation > generation
    assert b.state.is_allocated(DeviceID("d", "p", "d1"))
    assert not state.is_allocated(DeviceID("d", "p", "d1"))
    b.claim_deleted(claim("a", "d0"))
    assert state.is_allocated(DeviceID("d", "p", "d0"))
    before = b.generation
    b.invalidate_inventory()
    assert b.generation > before


def deep(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"n": value}
    return value


def test_allocated_claim_with_undecodable_spec_still_holds_its_device():
    """Fail closed: opaque parameters nested 600 deep cannot be modelled, but the device the
    claim's allocation names is still taken (it used to be forgotten, and handed out again)."""
    undecodable = claim("a", "d0")
    undecodable["spec"]["devices"]["config"] = [
        {"opaque": {"driver": "d", "parameters": deep(600)}}
    ]
    b = book({})
    b.claim_changed(undecodable)
    assert b.state.is_allocated(DeviceID("d", "p", "d0"))
    b.claim_deleted(undecodable)
    assert not b.state.is_allocated(DeviceID("d", "p", "d0"))


def test_a_claim_object_is_decoded_once_and_a_new_object_again():
    first = claim("a", "d0")
    model = claim_model(first)
    assert model is not None
    assert claim_model(first) is model  # remembered by identity
    assert held_model(first) is held_model(first)
    second = claim("a", "d1", rv="2")  # a newer copy from the informer
    newer = claim_model(second)
    assert newer is not None and newer is not model
    assert newer.status.allocation is not None
    assert newer.status.allocation.devices.results[0].device == "d1"


def test_an_undecodable_claim_stays_undecodable_when_asked_again():
    bad = claim("a", None)
    bad["spec"]["devices"]["config"] = [{"opaque": {"driver": "d", "parameters": deep(600)}}]
    first, again = decode_claim_model(bad), decode_claim_model(bad)
    assert isinstance(first, ModelError) and again is first
    assert claim_model(bad) is None


def test_the_informer_event_of_an_assumed_write_changes_nothing():
    b = book({})
    b.claim_changed(claim("a", "d0", rv="2"))  # the scheduler's assumed write
    generation = b.generation
    b.claim_changed(claim("a", "d0", rv="2"))  # the informer's event of the same write
    assert b.generation == generation  # no recheck forced on deciders
    b.claim_changed(claim("a", None, rv="3"))
    assert b.generation > generation
    assert not b.state.is_allocated(DeviceID("d", "p", "d0"))


def test_a_claim_deleted_and_seen_again_at_the_same_version_is_recorded_again():
    b = book({})
    b.claim_changed(claim("a", "d0", rv="2"))
    b.claim_deleted(claim("a", "d0", rv="2"))
    b.claim_changed(claim("a", "d0", rv="2"))  # e.g. a relist after a missed delete
    assert b.state.is_allocated(DeviceID("d", "p", "d0"))


def test_a_write_that_landed_as_decided_ends_in_flight_without_a_change():
    b, cache = book_deciding("a", "d0")
    generation = b.generation
    cache["ns/a"] = claim("a", "d0", rv="5")  # the assumed answer of the write
    b.finish("a", "ns/a")
    b.claim_changed(claim("a", "d0", rv="5"))  # the informer's event of it
    assert b.generation == generation
    assert b.in_flight("a") is None
    assert b.state.is_allocated(DeviceID("d", "p", "d0"))


def test_a_stored_allocation_other_than_decided_replaces_the_decision():
    b, cache = book_deciding("a", "d0")
    cache["ns/a"] = claim("a", "d1", rv="5")
    b.finish("a", "ns/a")
    assert not b.state.is_allocated(DeviceID("d", "p", "d0"))
    assert b.state.is_allocated(DeviceID("d", "p", "d1"))
