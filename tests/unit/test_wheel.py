"""The built wheel installs one import namespace, ``drakit``, and works on its own.

drakit's packages keep their folders at the repository root and are reached as
``drakit.allocator``, ``drakit.controller`` and so on through links in ``drakit/``. This test
builds the wheel the way a release does (``pip wheel``, with build isolation), checks that
``drakit`` is its only top-level name, installs it into a new virtual environment and runs
the console script and an import of the public API there, away from the source tree.

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

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(out), str(ROOT)],
        check=True,
        cwd=out,
        timeout=600,
    )
    (built,) = out.glob("drakit-*.whl")
    return built


def test_wheel_holds_no_top_level_name_but_drakit(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    tops = {name.split("/")[0] for name in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"drakit"}
    for package in ("allocator", "controller", "kubeapi", "kubeletapi", "node_plugin", "telemetry"):
        assert f"drakit/{package}/__init__.py" in names, f"drakit.{package} is not in the wheel"
    assert "drakit/kubeletapi/gen/dra/v1/api_pb2.py" in names


def test_installed_wheel_runs_drakit_help_and_imports_the_public_api(
    wheel: Path, tmp_path: Path
) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    dependencies = "\n".join(p for p in sys.path if p.endswith("site-packages"))
    (Path(purelib) / "drakit-test-dependencies.pth").write_text(dependencies + "\n")
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--no-deps", str(wheel)],
        check=True,
        timeout=300,
    )
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
