"""The local cluster serves the extra API versions named by its runtime_config option
(the reference harness turns on scheduling.k8s.io/v1beta1, Workloads and PodGroups), and refuses a
malformed entry before starting anything."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from drakit.localcluster import ClusterConfig, LocalCluster

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
EXTRA_GROUP = "/apis/scheduling.k8s.io/v1beta1"
#: Its resources (Workload, PodGroup) exist only with this gate on.
GATES = "GenericWorkload=true"


def test_runtime_config_entries_are_served_next_to_the_default_ones() -> None:
    config = ClusterConfig(runtime_config="scheduling.k8s.io/v1beta1=true", feature_gates=GATES)
    with LocalCluster(config) as cluster:
        status, _ = cluster.request(EXTRA_GROUP)
        assert status == 200, f"GET {EXTRA_GROUP}: HTTP {status}"
        # The drakit defaults stay on.
        assert cluster.request("/apis/resource.k8s.io/v1beta2")[0] == 200


def test_without_runtime_config_that_beta_version_is_not_served() -> None:
    with LocalCluster(ClusterConfig(feature_gates=GATES)) as cluster:
        assert cluster.request(EXTRA_GROUP)[0] == 404


def test_a_malformed_runtime_config_entry_is_refused_naming_it() -> None:
    with pytest.raises(ValueError, match=r"'scheduling\.k8s\.io/v1alpha2' is not GROUP/VERSION"):
        LocalCluster(ClusterConfig(runtime_config="scheduling.k8s.io/v1alpha2"))


def test_the_command_line_refuses_a_malformed_entry_without_a_traceback(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "drakit",
            "local-cluster",
            "run",
            str(tmp_path / "c"),
            "--runtime-config",
            "api/all=maybe",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        cwd=ROOT,
    )
    assert proc.returncode == 2
    assert "runtime-config entry 'api/all=maybe'" in proc.stderr
    assert "Traceback" not in proc.stderr
