"""The drakit console script: one entry point, subcommands with real help."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from helpers.childpython import python_output

from drakit.cli import SUBCOMMANDS, main
from drakit.version import KUBELET_SERVICES, KUBERNETES_VERSION


def test_help_lists_every_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for name in ("node-plugin", "controller", "allocate", "devices", "version", "local-cluster"):
        assert name in out
    assert set(SUBCOMMANDS) >= {"node-plugin", "controller", "allocate", "version"}


def test_version_json_names_kubernetes_and_kubelet_services(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["version", "-o", "json"]) == 0
    facts = json.loads(capsys.readouterr().out)
    assert facts["kubernetes"] == KUBERNETES_VERSION
    assert facts["resourceAPIs"][0] == "resource.k8s.io/v1"
    assert facts["kubeletServices"] == list(KUBELET_SERVICES)


def test_unknown_subcommand_is_a_usage_error_without_traceback() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "drakit.cli", "frobnicate"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert "invalid choice: 'frobnicate'" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_console_script_entry_point_runs_version() -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from drakit.cli import main; sys.exit(main(['version']))",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0
    assert proc.stdout.startswith("drakit ")


def test_devices_help_explains_states_filters_and_partial_views(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["devices", "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for text in ("--summary", "--class", "--watch", "admin-access", "unknown", "hidden"):
        assert text in out


def test_a_subcommand_loads_only_its_own_module_and_help_still_lists_them_all() -> None:
    probe = (
        "import sys\n"
        "from drakit.cli import SUBCOMMANDS, build_parser\n"
        "build_parser('version')\n"
        "print(sorted(n for n, m in SUBCOMMANDS.items() if m in sys.modules))\n"
    )
    out = python_output(probe)
    assert out.split() == ["['version']"]
    help_text = subprocess.run(
        [sys.executable, "-m", "drakit.cli", "node-plugin", "--help"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "--driver-name" in help_text
