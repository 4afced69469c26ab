"""``kubernetes`` is the extra ``drakit[kubernetes]``: without it, the paths that need the full
client stop with one line naming the extra, and everything else works.

A child interpreter hides the package with a meta-path finder that refuses it, which is what
an install without the extra looks like to drakit's imports.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
EXTRA_HINT = "pip install 'drakit[kubernetes]'"

_HIDE_KUBERNETES = (
    "import sys\n"
    "class NoKubernetes:\n"
    "    def find_spec(self, name, path=None, target=None):\n"
    "        if name.split('.')[0] == 'kubernetes':\n"
    "            raise ImportError('No module named ' + repr(name))\n"
    "sys.meta_path.insert(0, NoKubernetes())\n"
)


def _run_without_kubernetes(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _HIDE_KUBERNETES + code],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def _kubeconfig(path: Path, user: str) -> Path:
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: k, cluster: {server: 'https://127.0.0.1:6443',"
        " insecure-skip-tls-verify: true}}]\n"
        "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
        f"users: [{{name: u, user: {user}}}]\n"
    )
    return path


def test_kubernetes_is_an_extra_not_a_dependency() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert not any(d.lower().startswith("kubernetes") for d in project["dependencies"])
    extra = project["optional-dependencies"]["kubernetes"]
    assert [d.split(">")[0] for d in extra] == ["kubernetes"]


def test_exec_kubeconfig_without_the_extra_fails_with_one_line_naming_it(tmp_path: Path) -> None:
    config = _kubeconfig(
        tmp_path / "exec.yaml",
        "{exec: {apiVersion: client.authentication.k8s.io/v1, command: get-token}}",
    )
    done = _run_without_kubernetes(
        "from drakit.kubeapi.errors import ConfigError\n"
        "from drakit.kubeapi.lightclient import load_light_client\n"
        "try:\n"
        f"    load_light_client({str(config)!r})\n"
        "except ConfigError as err:\n"
        "    print(err)\n"
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 1, done.stdout
    assert str(config) in lines[0] and "'exec'" in lines[0]
    assert lines[0].endswith(EXTRA_HINT), lines[0]


def test_drakit_devices_without_the_extra_prints_one_line_not_a_traceback(
    tmp_path: Path,
) -> None:
    config = _kubeconfig(tmp_path / "token.yaml", "{token: abc}")
    done = _run_without_kubernetes(
        "from drakit.cli import main\n"
        f"sys.exit(main(['devices', '--kubeconfig', {str(config)!r}]))\n"
    )
    assert done.returncode == 1, done.stderr
    assert done.stderr.splitlines() == [
        f"drakit devices: the kubernetes client is not installed; install the extra: {EXTRA_HINT}"
    ]


def test_token_kubeconfig_and_missing_file_need_no_extra(tmp_path: Path) -> None:
    config = _kubeconfig(tmp_path / "token.yaml", "{token: abc}")
    done = _run_without_kubernetes(
        "from drakit.kubeapi.errors import ConfigError\n"
        "from drakit.kubeapi.lightclient import LightApiClient, load_light_client\n"
        f"print(type(load_light_client({str(config)!r})).__name__)\n"
        "import os\n"
        "os.environ.pop('KUBERNETES_SERVICE_HOST', None)\n"
        f"os.environ['KUBECONFIG'] = {str(tmp_path / 'absent.yaml')!r}\n"
        "try:\n"
        "    load_light_client()\n"
        "except ConfigError as err:\n"
        "    print(err)\n"
        "print('kubernetes' in sys.modules)\n"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "LightApiClient",
        f"kubeconfig {tmp_path / 'absent.yaml'}: no such file",
        "False",
    ]
