"""The chaos soak with the real node (``--real-node``), short and with a fixed seed.

In the node tier (root, one real node per machine): the soak's whole stack plus the real
node, 75 s of churn and faults, then liveness and the quiet checks. The seed was chosen with
``python -m soak --real-node --duration 75s --fault-interval 8 --print-schedule`` for a
schedule with every real-node kind (plugin container, kubelet and containerd SIGKILLed, a
rolling update of the plugin DaemonSet) beside the apiserver, the leader, a kubelet harness,
pauses and proxy faults.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import NodeAssets
from soak.faults import plan
from soak.realnode import REAL_NODE
from soak.run import SoakOptions, run
from soak.stack import node_names

SEED = 62
DURATION = 75.0
FAULT_INTERVAL = 8.0
REAL_KINDS = {
    "kill-real-plugin",
    "kill-real-kubelet",
    "kill-real-containerd",
    "rolling-update-real-plugin",
}


@pytest.mark.timeout(1800)
def test_short_real_node_soak_runs_pods_on_the_real_node_under_its_faults_without_violations(
    node_assets: NodeAssets, tmp_path: Path
) -> None:
    planned = plan(SEED, DURATION, node_names(3), FAULT_INTERVAL, real_node=True)
    assert {f.kind for f in planned} >= REAL_KINDS  # the seed still gives every real kind
    options = SoakOptions(
        seed=SEED,
        duration=DURATION,
        fault_interval=FAULT_INTERVAL,
        real_node=True,
        out_dir=tmp_path,
    )
    result = run(options)
    print(result.summary_line())
    print(f"checker: {result.checker}; faults that failed: {result.faults_failed}")
    assert not result.violations, (
        f"{result.summary_line()}; reproduction in {result.repro_dir}:\n"
        + "\n".join(f"{v.invariant} {v.subject}: {v.detail}" for v in result.violations)
    )
    injected_real = {k for k, n in result.faults.items() if n and k in REAL_KINDS}
    assert injected_real == REAL_KINDS, (result.faults, result.faults_failed)
    assert result.pods_by_kind.get("real-kube", 0) > 0, result.pods_by_kind
    assert result.pods_by_kind.get("real-drakit", 0) > 0, result.pods_by_kind
    assert result.checker["pods_seen_running"].get(REAL_NODE, 0) > 0, result.checker
