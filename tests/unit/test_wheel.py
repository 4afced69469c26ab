"""The built wheel installs one import namespace, ``drakit``, and works on its own.

drakit's packages keep their folders at the repository root and are reached as
``drakit.allocator``, ``drakit.controller`` and so on through links in ``drakit/``. This test
builds the wheel the way a release does (``pip wheel``, with build isolation), checks that
``drakit`` is its only top-level name, installs it into a new virtual environment and runs
the console script and an import of the public API there, away from the source tree. The
development tools are not in it: the drakit-localcluster wheel adds them and their commands.

The new environment takes drakit's dependencies from this one (a ``.pth`` line naming its
site-packages folders; ``.pth`` files in them, such as the editable install's, are not
processed there), so the test needs no download beyond the build backend.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from helpers.cleanbuild import clean_build_env

ROOT = Path(__file__).resolve().parents[2]


def _pip_wheel(source: Path, out: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(out), str(source)],
        check=True,
        cwd=out,
        timeout=600,
        env=clean_build_env(out / "work"),
    )


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    _pip_wheel(ROOT, out)
    (built,) = out.glob("drakit-*.whl")
    return built


@pytest.fixture(scope="module")
def dev_tools_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The drakit-localcluster distribution's wheel (distributions/drakit-localcluster)."""
    out = tmp_path_factory.mktemp("dev-tools-wheel")
    _pip_wheel(ROOT / "distributions" / "drakit-localcluster", out)
    (built,) = out.glob("drakit_localcluster-*.whl")
    return built


def test_wheel_holds_no_top_level_name_but_drakit(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    tops = {name.split("/")[0] for name in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"drakit"}
    for package in ("allocator", "controller", "kubeapi", "kubeletapi", "node_plugin", "telemetry"):
        assert f"drakit/{package}/__init__.py" in names, f"drakit.{package} is not in the wheel"
    assert "drakit/kubeletapi/gen/dra/v1/api_pb2.py" in names
    dev_tools = [
        n
        for n in names
        if n.startswith(("drakit/localcluster/", "drakit/demo/", "drakit/testing/"))
        or n in ("drakit/cli/dev.py", "drakit/cli/local_cluster.py", "drakit/cli/local_node.py")
    ]
    assert dev_tools == [], f"the drakit wheel holds development tools: {dev_tools[:5]}"


def _venv_with_drakits_dependencies(venv: Path) -> tuple[Path, str]:
    """A new venv (python, purelib) that takes drakit's dependencies from this one."""
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    dependencies = "\n".join(p for p in sys.path if p.endswith("site-packages"))
    (Path(purelib) / "drakit-test-dependencies.pth").write_text(dependencies + "\n")
    return python, purelib


def _pip_install(python: Path, wheel: Path) -> None:
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--no-deps", str(wheel)],
        check=True,
        timeout=300,
    )


def test_dev_commands_come_with_the_dev_tools_wheel_only(
    wheel: Path, dev_tools_wheel: Path, tmp_path: Path
) -> None:
    python, _purelib = _venv_with_drakits_dependencies(tmp_path / "venv")
    _pip_install(python, wheel)
    drakit = str(tmp_path / "venv" / "bin" / "drakit")
    elsewhere = {"cwd": tmp_path, "capture_output": True, "text": True, "timeout": 120}

    shown = subprocess.run([drakit, "--help"], check=False, **elsewhere)
    assert shown.returncode == 0, shown.stderr
    commands = shown.stdout.split("positional arguments:")[1]
    assert "local-cluster" not in commands and "local-node" not in commands
    assert "pip install drakit-localcluster" in shown.stdout
    refused = subprocess.run([drakit, "local-cluster", "up", "x"], check=False, **elsewhere)
    assert refused.returncode == 2
    assert refused.stderr.count("\n") == 1 and "drakit-localcluster" in refused.stderr
    absent = subprocess.run([str(python), "-c", "import drakit.demo"], check=False, **elsewhere)
    assert "No module named 'drakit.demo'" in absent.stderr

    _pip_install(python, dev_tools_wheel)
    shown = subprocess.run([drakit, "--help"], check=False, **elsewhere)
    commands = shown.stdout.split("positional arguments:")[1]
    assert "local-cluster" in commands and "local-node" in commands
    for name in ("local-cluster", "local-node"):
        helped = subprocess.run([drakit, name, "--help"], check=False, **elsewhere)
        assert helped.returncode == 0 and "up" in helped.stdout, helped.stderr
    demo = subprocess.run([str(python), "-m", "drakit.demo", "--help"], check=False, **elsewhere)
    assert demo.returncode == 0, demo.stderr


def test_installed_wheel_runs_drakit_help_and_imports_the_public_api(
    wheel: Path, tmp_path: Path
) -> None:
    venv = tmp_path / "venv"
    python, purelib = _venv_with_drakits_dependencies(venv)
    _pip_install(python, wheel)
    elsewhere = {"cwd": tmp_path, "capture_output": True, "text": True, "timeout": 120}
    shown = subprocess.run([str(venv / "bin" / "drakit"), "--help"], check=False, **elsewhere)
    assert shown.returncode == 0, shown.stderr
    assert "node-plugin" in shown.stdout and "controller" in shown.stdout
    imported = subprocess.run(
        [
            str(python),
            "-c",
            "import drakit.plugin, drakit.node_plugin.core as c; print(c.__file__)",
        ],
        check=False,
        **elsewhere,
    )
    assert imported.returncode == 0, imported.stderr
    assert imported.stdout.strip().startswith(purelib), imported.stdout
    old_name = subprocess.run([str(python), "-c", "import allocator"], check=False, **elsewhere)
    assert old_name.returncode != 0, "a top-level 'allocator' is importable from the wheel"
