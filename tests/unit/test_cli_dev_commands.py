"""The development commands (local-cluster, local-node) are shown and run only where their
modules are installed (drakit-localcluster, or a source checkout); elsewhere, as in drakit's
image, ``drakit --help`` does not list them and running one prints one line naming what to
install. The installed-wheel version of this is tests/unit/test_wheel.py."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from drakit.cli import DEV_DISTRIBUTION, DEV_SUBCOMMANDS, main

# None in sys.modules is Python's "this module does not exist" (importing it raises
# ModuleNotFoundError): it stands in for an install without drakit.localcluster.
WITHOUT_DEV_TOOLS = (
    "import sys\n"
    "sys.modules['drakit.localcluster'] = None\n"
    "from drakit.cli import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


def _drakit_without_dev_tools(*words: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_DEV_TOOLS, *words],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def test_help_without_the_dev_tools_lists_no_dev_command_and_says_what_to_install() -> None:
    shown = _drakit_without_dev_tools("--help")
    assert shown.returncode == 0, shown.stderr
    commands = shown.stdout.split("positional arguments:")[1]
    for name in DEV_SUBCOMMANDS:
        # As a word at the start of a help line: "dev" is also the start of "devices".
        assert not re.search(rf"^\s+{name}\s", shown.stdout, re.M), shown.stdout
    assert f"pip install {DEV_DISTRIBUTION}" in shown.stdout
    assert "node-plugin" in commands


@pytest.mark.parametrize("name", sorted(DEV_SUBCOMMANDS))
def test_a_dev_command_without_the_dev_tools_fails_with_one_line_naming_the_distribution(
    name: str,
) -> None:
    ran = _drakit_without_dev_tools(name, "up", "/nonexistent")
    assert ran.returncode == 2
    lines = ran.stderr.strip().splitlines()
    assert len(lines) == 1, ran.stderr
    assert name in lines[0] and f"pip install {DEV_DISTRIBUTION}" in lines[0]


def test_help_in_a_source_checkout_lists_the_dev_commands(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    commands = capsys.readouterr().out.split("positional arguments:")[1]
    for name in DEV_SUBCOMMANDS:
        assert re.search(rf"^\s+{name}\s", commands, re.M), commands
