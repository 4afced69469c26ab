"""example_driver uses drakit only through its public API (drakit.plugin), and its tests
only through drakit.plugin and the test kit (drakit.testing), so both work wherever drakit's
two distributions are installed, outside drakit's repository too."""

from __future__ import annotations

import ast
import pkgutil
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from example_paths import EXAMPLE, subprocess_env

import drakit

PUBLIC = {"drakit.plugin"}
TESTS = Path(__file__).resolve().parent
#: What the tests may import: drakit's public modules (and the namespace package itself, for
#: its folders), the example itself, the test folder's own modules, pytest and PyYAML, and
#: the standard library.
TESTS_MAY_IMPORT = {
    "drakit",
    "drakit.plugin",
    "drakit.plugin.metrics",
    "drakit.plugin.plainconfig",
    "drakit.testing",
    "example_driver",
    "pytest",
    "yaml",
}


def drakit_folders() -> list[str]:
    """The folders of the drakit package as installed: one where pip installed drakit and
    drakit-localcluster, two in drakit's checkout (drakit's and the development tools')."""
    return list(drakit.__path__)


def drakit_modules() -> set[str]:
    """Every top-level module and package of drakit."""
    return {f"drakit.{m.name}" for m in pkgutil.iter_modules(drakit_folders())}


def contract() -> dict[str, object]:
    config = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())
    (only,) = config["tool"]["importlinter"]["contracts"]
    return dict(only)


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every absolute import in ``path``; ``from a import b`` counts as
    ``a.b`` as well as ``a``, since ``b`` may be a module."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
    return found


def allowed(module: str, local: set[str]) -> bool:
    top = module.partition(".")[0]
    if top in local or (top in sys.stdlib_module_names and top != "drakit"):
        return True
    if top == "drakit":
        return module in TESTS_MAY_IMPORT
    return any(module == m or module.startswith(f"{m}.") for m in TESTS_MAY_IMPORT)


def test_the_contract_forbids_every_drakit_module_but_the_public_api() -> None:
    # A new drakit module is internal until documented: the contract must name it.
    assert set(contract()["forbidden_modules"]) == drakit_modules() - PUBLIC  # type: ignore[arg-type]


def test_the_tests_import_drakit_only_through_drakit_plugin_and_drakit_testing() -> None:
    local = {p.stem for p in TESTS.glob("*.py")}
    broken = [
        f"{path.name}:{line}: {module}"
        for path in sorted(TESTS.glob("*.py"))
        for line, module in imported_modules(path)
        if not allowed(module, local)
    ]
    assert broken == [], "imports outside drakit.plugin, drakit.testing, pytest, yaml, stdlib"


def test_example_driver_keeps_the_import_contract(tmp_path: Path) -> None:
    # import-linter reads a package from one folder: drakit as pip lays out its two
    # distributions. In drakit's checkout they are two source folders, copied into one here.
    path = []
    if len(drakit_folders()) > 1:
        view = tmp_path / "drakit"
        for folder in drakit_folders():
            shutil.copytree(folder, view, dirs_exist_ok=True)
        path.append(str(tmp_path))
    env = subprocess_env()
    env["PYTHONPATH"] = ":".join([*path, *filter(None, [env.get("PYTHONPATH")])])
    linter = Path(sys.executable).with_name("lint-imports")
    proc = subprocess.run(
        [str(linter), "--config", str(EXAMPLE / "pyproject.toml"), "--no-cache"],
        cwd=tmp_path,  # lint-imports puts its working folder first on sys.path
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 kept, 0 broken" in proc.stdout
