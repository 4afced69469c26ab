"""The production install (what deploy/Dockerfile builds) needs no launcher-only packages."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).parents[2]


def test_cryptography_is_only_an_extra_of_drakit_and_a_dependency_of_its_dev_tools() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert not any(d.startswith("cryptography") for d in project["dependencies"])
    assert any(d.startswith("cryptography") for d in project["optional-dependencies"]["webhook"])
    dev_tools = ROOT / "distributions" / "drakit-localcluster" / "pyproject.toml"
    dependencies = tomllib.loads(dev_tools.read_text())["project"]["dependencies"]
    assert any(d.startswith("cryptography") for d in dependencies)


def test_the_node_plugin_and_controller_load_without_cryptography() -> None:
    # A meta-path finder that refuses cryptography stands in for an install without it.
    code = (
        "import sys\n"
        "class NoCrypto:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] == 'cryptography':\n"
        "            raise ImportError('no cryptography')\n"
        "sys.meta_path.insert(0, NoCrypto())\n"
        "import drakit.cli.node_plugin, drakit.cli.controller\n"
        "import drakit.node_plugin.wiring, drakit.controller.main, drakit.plugin\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
