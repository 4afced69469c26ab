"""The chaos soak, short and with a fixed seed, as part of ``make test`` (marker ``soak``).

It runs the whole stack for two minutes of churn and faults, then the liveness and
clean-up checks; bounds are generous (SoakOptions) and liveness is judged only after the
faults stopped, so a loaded machine makes it slower, not red.
"""

from __future__ import annotations

import pytest

from soak.run import SoakOptions, run

#: Found by hand to exercise every kind of process fault in two minutes (see --print-schedule).
SHORT_SEED = 1


@pytest.mark.timeout(1200)
def test_short_soak_with_fixed_seed_churns_pods_under_faults_without_violations(
    tmp_path: pytest.TempPathFactory,
) -> None:
    result = run(SoakOptions(seed=SHORT_SEED, duration=120.0, out_dir=tmp_path))  # type: ignore[arg-type]
    print(result.summary_line())
    assert result.pods_churned > 20, result.summary_line()
    assert sum(result.faults.values()) >= 5, result.summary_line()
    assert not result.violations, (
        f"{result.summary_line()}; reproduction in {result.repro_dir}:\n"
        + "\n".join(f"{v.invariant} {v.subject}: {v.detail}" for v in result.violations)
    )
