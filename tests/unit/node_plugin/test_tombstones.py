"""The tombstones of unprepared claims (pure bookkeeping; the race they close is tested on
the real socket in tests/integration/node_plugin/test_late_prepare.py)."""

from __future__ import annotations

from drakit.node_plugin.prepare.tombstones import UnprepareTombstones

UID = "5b0c7c3e-1f6a-4a8e-9d55-0a2b3c4d5e6f"
OTHER = "5b0c7c3e-1f6a-4a8e-9d55-0a2b3c4d5e70"


def test_a_prepare_that_began_before_the_unprepare_sees_the_claim_unprepared() -> None:
    stones = UnprepareTombstones()
    with stones.prepare_in_flight() as began:
        stones.unprepared([UID])
        assert stones.unprepared_since(UID, began)
        assert not stones.unprepared_since(OTHER, began)


def test_a_prepare_that_began_after_the_unprepare_does_not() -> None:
    stones = UnprepareTombstones()
    with stones.prepare_in_flight():
        stones.unprepared([UID])
        with stones.prepare_in_flight() as later:
            assert not stones.unprepared_since(UID, later)


def test_an_unprepare_with_no_prepare_in_flight_leaves_no_tombstone() -> None:
    stones = UnprepareTombstones()
    stones.unprepared([UID])
    assert stones.count() == 0
    with stones.prepare_in_flight() as began:
        assert not stones.unprepared_since(UID, began)


def test_tombstones_are_dropped_once_no_prepare_that_began_before_them_is_in_flight() -> None:
    stones = UnprepareTombstones()
    with stones.prepare_in_flight():
        stones.unprepared([UID])
        with stones.prepare_in_flight():
            stones.unprepared([OTHER])
        # The first prepare began before both: both kept.
        assert stones.count() == 2
    assert stones.count() == 0


def test_tombstones_kept_are_only_those_newer_than_the_oldest_prepare_in_flight() -> None:
    stones = UnprepareTombstones()
    first = stones.prepare_in_flight()
    first.__enter__()
    stones.unprepared([UID])
    second = stones.prepare_in_flight()
    second.__enter__()
    first.__exit__(None, None, None)
    # Only the second prepare is in flight; it began after UID's tombstone.
    assert stones.count() == 0
    stones.unprepared([OTHER])
    assert stones.count() == 1
    second.__exit__(None, None, None)
    assert stones.count() == 0
