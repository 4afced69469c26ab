"""The PodResources cross-check's comparison and its grace periods (pure logic)."""

from __future__ import annotations

import pytest

from drakit.node_plugin.crosscheck import (
    LEAK,
    LOST_CLAIM,
    UNKNOWN_DEVICE,
    ContainerUse,
    DeviceRef,
    PreparedClaim,
    Tracker,
    compare,
)

GPU0 = DeviceRef("node-a", "gpu-0")
GPU1 = DeviceRef("node-a", "gpu-1")
UID = "6f1d2c3b-0000-4000-8000-000000000001"


def _claim(
    name: str = "c1", *, completed: bool = True, devices: tuple[DeviceRef, ...] = (GPU0,)
) -> PreparedClaim:
    return PreparedClaim(UID, "team", name, completed, tuple(devices))


def _use(
    claim: str = "c1",
    pod: str = "p1",
    container: str = "main",
    devices: tuple[DeviceRef, ...] = (GPU0,),
) -> ContainerUse:
    return ContainerUse("team", pod, container, "team", claim, tuple(devices))


def test_a_claim_used_by_a_container_with_its_own_devices_is_no_finding() -> None:
    assert compare([_use()], [_claim()]) == []


def test_a_prepared_claim_that_no_container_uses_is_a_leak() -> None:
    (finding,) = compare([], [_claim()])
    assert (finding.kind, finding.claim, finding.claim_uid) == (LEAK, "team/c1", UID)
    assert finding.devices == (GPU0,)


def test_a_claim_whose_prepare_only_started_is_never_a_leak_nor_checked() -> None:
    started = _claim(completed=False)
    assert compare([], [started]) == []
    assert compare([_use(devices=(GPU1,))], [started]) == []


def test_a_claim_in_use_that_the_checkpoint_does_not_hold_is_a_lost_claim() -> None:
    (finding,) = compare([_use(pod="p1"), _use(pod="p2", devices=(GPU1,))], [])
    assert finding.kind == LOST_CLAIM
    assert finding.pods == ("team/p1", "team/p2")
    assert finding.devices == (GPU0, GPU1)
    assert finding.claim_uid == ""


def test_a_container_using_a_device_the_claim_does_not_list_is_an_unknown_device() -> None:
    (finding,) = compare([_use(devices=(GPU0, GPU1))], [_claim(devices=(GPU0,))])
    assert finding.kind == UNKNOWN_DEVICE
    assert finding.devices == (GPU1,)
    assert finding.pods == ("team/p1 container main",)


def test_a_share_id_differing_from_the_checkpoints_is_the_same_device() -> None:
    shared = DeviceRef("node-a", "gpu-0", "share-2")
    assert compare([_use(devices=(shared,))], [_claim(devices=(GPU0,))]) == []


def test_claims_are_matched_by_namespace_and_name() -> None:
    other_namespace = ContainerUse("other", "p1", "main", "other", "c1", (GPU0,))
    kinds = sorted(f.kind for f in compare([other_namespace], [_claim()]))
    assert kinds == [LEAK, LOST_CLAIM]


def test_a_finding_is_reported_only_after_the_grace_period_and_only_once() -> None:
    tracker = Tracker(grace=300, event_after=1800)
    leak = compare([], [_claim()])
    assert tracker.update(leak, now=1000).current == ()
    assert tracker.update(leak, now=1299).current == ()
    at_grace = tracker.update(leak, now=1300)
    assert [f.kind for f in at_grace.current] == [LEAK]
    assert at_grace.new == at_grace.current
    later = tracker.update(leak, now=1400)
    assert later.current == at_grace.current
    assert later.new == ()
    assert later.ages[leak[0].key] == 400


def test_a_finding_that_goes_away_within_the_grace_period_is_never_reported() -> None:
    tracker = Tracker(grace=300, event_after=1800)
    tracker.update(compare([], [_claim()]), now=0)
    assert tracker.update([], now=100).resolved == ()
    # It came back: its grace period starts again.
    tracker.update(compare([], [_claim()]), now=200)
    assert tracker.update(compare([], [_claim()]), now=450).current == ()


def test_a_reported_finding_that_goes_away_is_resolved() -> None:
    tracker = Tracker(grace=0, event_after=0)
    leak = compare([], [_claim()])
    tracker.update(leak, now=0)
    done = tracker.update([], now=10)
    assert done.resolved == tuple(leak)
    assert done.current == ()


def test_a_leak_older_than_the_event_period_gets_one_event_per_episode() -> None:
    tracker = Tracker(grace=300, event_after=1800)
    leak = compare([], [_claim()])
    tracker.update(leak, now=0)
    assert tracker.update(leak, now=1799).events == ()
    assert tracker.update(leak, now=1800).events == tuple(leak)
    assert tracker.update(leak, now=5000).events == ()
    tracker.update([], now=5001)
    tracker.update(leak, now=6000)
    assert tracker.update(leak, now=7800).events == tuple(leak)


def test_lost_claims_and_unknown_devices_never_get_events() -> None:
    tracker = Tracker(grace=0, event_after=0)
    findings = compare([_use(), _use("c2")], [_claim("c2", devices=(GPU1,))])
    assert {f.kind for f in findings} == {LOST_CLAIM, UNKNOWN_DEVICE}
    assert tracker.update(findings, now=0).events == ()


@pytest.mark.parametrize(("grace", "event_after"), [(-1, 10), (10, 5)])
def test_the_tracker_refuses_periods_out_of_order(grace: float, event_after: float) -> None:
    with pytest.raises(ValueError, match="grace"):
        Tracker(grace, event_after)
