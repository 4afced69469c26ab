"""example_driver uses drakit only through its public API: drakit.plugin."""

from __future__ import annotations

import subprocess
import tomllib

from example_paths import EXAMPLE, ROOT, subprocess_env

PUBLIC = {"drakit.plugin"}


def drakit_modules() -> set[str]:
    """Every top-level module and package of drakit: drakit's own folder and the
    development tools' (drakit-localcluster's source root)."""
    names: set[str] = set()
    for package in (ROOT / "drakit", ROOT / "distributions/drakit-localcluster/src/drakit"):
        names |= {p.stem for p in package.glob("*.py") if p.stem != "__init__"}
        names |= {p.name for p in package.iterdir() if (p / "__init__.py").exists()}
    return {f"drakit.{n}" for n in names}


def contract() -> dict[str, object]:
    config = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())
    (only,) = config["tool"]["importlinter"]["contracts"]
    return dict(only)


def test_the_contract_forbids_every_drakit_module_but_the_public_api() -> None:
    # A new drakit module is internal until documented: the contract must name it.
    assert set(contract()["forbidden_modules"]) == drakit_modules() - PUBLIC  # type: ignore[arg-type]


def test_example_driver_keeps_the_import_contract() -> None:
    # drakit's script checks against drakit as installed (its two source roots in one
    # folder), which is what a driver's own lint-imports sees.
    proc = subprocess.run(
        [str(ROOT / "hack" / "lint-imports.sh"), "pyproject.toml", "src"],
        cwd=EXAMPLE,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 kept, 0 broken" in proc.stdout
