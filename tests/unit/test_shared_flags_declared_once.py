"""Every flag that several commands share is declared once, in drakit/cli/flags.py: a
command's parser gets it from there, so its name, default, environment variable and help
cannot drift between commands (issue 42: --kube-api-qps, --kube-api-burst, --metrics-address
and --workers were each declared four times)."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SOURCE_ROOTS = (REPO / "drakit", REPO / "distributions" / "drakit-localcluster" / "src" / "drakit")
FLAGS_MODULE = REPO / "drakit" / "cli" / "flags.py"
#: The flags of more than one command.
SHARED = frozenset(
    {
        "--kubeconfig",
        "--log-format",
        "--log-level",
        "--driver-name",
        "--backend",
        "--backend-config",
        "--workers",
        "--metrics-address",
        "--kube-api-qps",
        "--kube-api-burst",
        "--leader-elect",
        "--leader-elect-namespace",
        "--leader-elect-lease-name",
    }
)


def declarations(source: str) -> list[tuple[int, str]]:
    """(line, flag) of every ``add_argument`` call in ``source`` that names a shared flag."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if node.func.attr != "add_argument":
            continue
        for arg in node.args:
            if isinstance(arg, ast.Constant) and arg.value in SHARED:
                found.append((node.lineno, arg.value))
    return found


def test_shared_flags_are_declared_only_in_the_flags_module() -> None:
    elsewhere = {
        f"{path.relative_to(REPO)}:{line}": flag
        for root in SOURCE_ROOTS
        for path in sorted(root.rglob("*.py"))
        if path != FLAGS_MODULE
        for line, flag in declarations(path.read_text())
    }
    assert elsewhere == {}, "declare these through drakit.cli.flags"


def test_a_command_that_declares_a_shared_flag_itself_is_found() -> None:
    planted = 'parser.add_argument("--workers", type=int, default=4)\nparser.add_argument("--x")\n'
    assert declarations(planted) == [(1, "--workers")]


def test_every_shared_flag_is_declared_in_the_flags_module() -> None:
    source = FLAGS_MODULE.read_text()
    named = {
        node.value
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    }
    assert not SHARED - named
