"""The chaos soak, short and with a fixed seed, as part of ``make test`` (marker ``soak``).

It runs the whole stack for 90 s of churn and faults, then the liveness and
clean-up checks; bounds are generous (SoakOptions) and liveness is judged only after the
faults stopped, so a loaded machine makes it slower, not red.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from soak.run import SoakOptions, run

#: Chosen with --print-schedule for the mix its 90 s give at one fault per 8 s on average:
#: the apiserver, the leader, kube-scheduler, kube-controller-manager, a kubelet harness and
#: a node plugin killed; pauses; proxy faults; a read-only checkpoint file system.
SHORT_SEED = 11


@pytest.mark.timeout(1200)
def test_short_soak_with_fixed_seed_churns_pods_under_faults_without_violations(
    tmp_path: Path,
) -> None:
    options = SoakOptions(seed=SHORT_SEED, duration=90.0, fault_interval=8.0, out_dir=tmp_path)
    result = run(options)
    print(result.summary_line())
    assert result.pods_churned > 15, result.summary_line()
    assert sum(result.faults.values()) >= 5, result.summary_line()
    assert not result.violations, (
        f"{result.summary_line()}; reproduction in {result.repro_dir}:\n"
        + "\n".join(f"{v.invariant} {v.subject}: {v.detail}" for v in result.violations)
    )
