"""``drakit controller`` flags: help, validation with one-line errors, environment twins."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from drakit.cli import build_parser, main
from drakit.cli.controller import build_config
from drakit.controller.noexecute.decision import Budget

DRAKIT = str(Path(sys.executable).with_name("drakit"))


def test_help_names_every_flag_and_its_environment_twin():
    out = subprocess.run([DRAKIT, "controller", "--help"], capture_output=True, text=True,
                         check=True).stdout  # fmt: skip
    twins = [
        ("--kubeconfig", "KUBECONFIG"),
        ("--scheduler-name", "SCHEDULER_NAME"),
        ("--claim-generation", "CLAIM_GENERATION"),
        ("--leader-elect", "LEADER_ELECT"),
        ("--workers", "WORKERS"),
        ("--lifecycle-workers", "LIFECYCLE_WORKERS"),
        ("--noexecute-per-node", "NOEXECUTE_PER_NODE"),
        ("--noexecute-cluster-percent", "NOEXECUTE_CLUSTER_PERCENT"),
        ("--noexecute-forget-after", "NOEXECUTE_FORGET_AFTER"),
        ("--metrics-address", "METRICS_ADDRESS"),
    ]
    flat = " ".join(out.split())  # argparse wraps "[env X]" anywhere
    for flag, env in twins:
        assert flag in out and f"env {env}" in flat
    assert "scoped" in out and "kube-controller-manager" in out


def test_bad_claim_generation_is_one_line_and_exit_code_2(capsys):
    assert main(["controller", "--claim-generation", "some"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--claim-generation 'some' is not one of" in err


def test_environment_twin_is_validated_like_the_flag(capsys, monkeypatch):
    monkeypatch.setenv("WORKERS", "none")
    assert main(["controller"]) == 2
    assert "--workers 'none' is not a number (int)" in capsys.readouterr().err


def test_bad_metrics_address_is_refused(capsys):
    assert main(["controller", "--metrics-address", "localhost"]) == 2
    assert "--metrics-address" in capsys.readouterr().err


def test_missing_kubeconfig_fails_without_traceback(tmp_path):
    result = subprocess.run(
        [DRAKIT, "controller", "--kubeconfig", str(tmp_path / "nope")],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 1
    assert "Traceback" not in result.stderr and "no such file" in result.stderr


def test_lifecycle_workers_must_be_at_least_one(capsys):
    assert main(["controller", "--lifecycle-workers", "0"]) == 2
    assert "--lifecycle-workers must be at least 1, got 0" in capsys.readouterr().err


def test_the_noexecute_budget_flags_build_the_budget(monkeypatch):
    monkeypatch.setenv("NOEXECUTE_FORGET_AFTER", "90")
    args = build_parser().parse_args(
        ["controller", "--noexecute-per-node", "2", "--noexecute-cluster-percent", "2.5"]
    )
    assert build_config(args).controller.noexecute == Budget(2, 2.5, 90)


def test_bad_noexecute_budget_values_name_the_flag(capsys):
    assert main(["controller", "--noexecute-cluster-percent", "150"]) == 2
    assert "--noexecute-cluster-percent '150' must be a percentage in [0, 100]" in (
        capsys.readouterr().err
    )
    assert main(["controller", "--noexecute-per-node", "-1"]) == 2
    assert "--noexecute-per-node" in capsys.readouterr().err
