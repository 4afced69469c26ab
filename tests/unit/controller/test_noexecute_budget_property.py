"""The NoExecute budget as a property: over 10,000 random schedules of failures, recoveries,
plugin restarts, controller restarts, leader changes and API write failures, across up to
hundreds of simulated nodes, the cap is never exceeded and no device's effect flips more than
once per real change (tests/unit/controller/noexecute_sim.py has the model and the checks)."""

from __future__ import annotations

import pytest
from noexecute_sim import Sim, Violation

SCHEDULES = 10_000
STEPS = 30


def test_the_cap_holds_and_no_effect_flips_over_ten_thousand_random_schedules() -> None:
    for seed in range(SCHEDULES):
        try:
            Sim(seed).run(STEPS)
        except Violation as err:
            pytest.fail(f"schedule {seed}: {err}")
