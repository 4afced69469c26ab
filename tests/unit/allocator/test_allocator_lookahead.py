"""The search's lookahead (``drakit.allocator.lookahead``): claims no path can allocate are
answered "no" without walking the combinations before the request that dooms them, and
only when walking them could not have ended in an error instead.

The answers themselves are compared with the Kubernetes reference allocator in
``tests/differential/test_differential_search.py``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import drakit.allocator.allocate
from drakit.allocator.inventory import DeviceEntry
from drakit.allocator.lookahead import ClaimOutlook, Verdict, claim_outlook, hopeless
from drakit.allocator.scenario import run_scenario

CASE = Path(__file__).parents[2] / "differential" / "cases" / "search-unschedulable.json"


@dataclass
class _Alt:
    num_devices: int
    all_mode: bool = False
    all_devices: Sequence[DeviceEntry] = field(default_factory=list)


def _devices(n: int) -> list[Any]:
    return [object() for _ in range(n)]


def _outlook(
    slots: list[list[_Alt]], devices: list[Any], verdicts: dict[int, Verdict]
) -> ClaimOutlook:
    """Every device POSSIBLE for every alternative unless ``verdicts`` (by device index)
    says otherwise."""
    index = {id(d): i for i, d in enumerate(devices)}

    def check(_alt: Any, d: Any) -> Verdict:
        return verdicts.get(index[id(d)], Verdict.POSSIBLE)

    return claim_outlook(slots, False, devices, check)


def test_request_with_fewer_possible_devices_than_it_needs_dooms_its_claim() -> None:
    devices = _devices(3)
    never = {0: Verdict.NEVER, 1: Verdict.NEVER}
    assert _outlook([[_Alt(1)], [_Alt(2)]], devices, never).doomed
    assert not _outlook([[_Alt(1)], [_Alt(1)]], devices, never).doomed


def test_first_available_request_dooms_its_claim_only_when_every_alternative_is_doomed() -> None:
    devices = _devices(2)
    assert not _outlook([[_Alt(3), _Alt(2)]], devices, {}).doomed
    assert _outlook([[_Alt(3), _Alt(4)]], devices, {}).doomed


def test_all_mode_request_without_devices_dooms_its_claim() -> None:
    devices = _devices(2)
    assert _outlook([[_Alt(0, all_mode=True)]], devices, {}).doomed
    assert not _outlook([[_Alt(2, all_mode=True, all_devices=devices)]], devices, {}).doomed


def test_device_that_may_fail_makes_its_claim_loud_and_counts_as_possible() -> None:
    devices = _devices(2)
    outlook = _outlook([[_Alt(2)]], devices, {0: Verdict.MAY_FAIL})
    assert not outlook.quiet
    assert not outlook.doomed


def test_all_mode_request_in_a_claim_with_constraints_makes_the_claim_loud() -> None:
    devices = _devices(1)
    alt = _Alt(1, all_mode=True, all_devices=devices)
    assert claim_outlook([[alt]], False, devices, lambda a, d: Verdict.POSSIBLE).quiet
    assert not claim_outlook([[alt]], True, devices, lambda a, d: Verdict.POSSIBLE).quiet


def test_claim_that_can_ask_for_more_than_32_devices_is_unbounded() -> None:
    devices = _devices(1)
    assert _outlook([[_Alt(20)], [_Alt(1), _Alt(13)]], devices, {}).bounded is False
    assert _outlook([[_Alt(20)], [_Alt(12), _Alt(1)]], devices, {}).bounded is True


def test_search_is_hopeless_only_when_every_claim_up_to_a_doomed_one_is_quiet() -> None:
    doomed = ClaimOutlook(doomed=True, quiet=True, bounded=True)
    fine = ClaimOutlook(doomed=False, quiet=True, bounded=True)
    loud = ClaimOutlook(doomed=False, quiet=False, bounded=True)
    assert hopeless([fine, doomed, loud])
    assert not hopeless([loud, doomed])
    assert not hopeless([fine, fine])
    assert not hopeless([ClaimOutlook(doomed=False, quiet=True, bounded=False), doomed])


def test_claim_after_one_whose_last_request_no_device_can_satisfy_is_unschedulable() -> None:
    """drakit issue 30 item 10: upstream walks every combination of the earlier requests
    (7 to 11 s here); the lookahead answers at once. The limit is generous for the
    0.1 s the search needs now, and far below what the walk took."""
    scenario = json.loads(CASE.read_text())
    assert run_scenario(scenario, timeout=3.0) == {"outcome": "unschedulable"}


def test_selector_error_before_a_doomed_request_is_still_reported(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(drakit.allocator.allocate, "_LOOK_AHEAD_AT", 1)
    scenario = json.loads(CASE.read_text())
    first = scenario["claims"][0]["spec"]["devices"]["requests"][0]["exactly"]
    first["selectors"] = [{"cel": {"expression": 'device.attributes["nic.example.com"]'
                                               '.missing == "x"'}}]  # fmt: skip
    answer = run_scenario(scenario, timeout=30.0)
    assert answer["outcome"] == "error"
    assert "missing" in answer["error"]
