"""``drakit webhook``'s command line: bad flags and backends are one line and exit 2;
without cryptography (not in the node plugin's and controller's install) it says which
extra to install."""

from __future__ import annotations

import subprocess
import sys

import pytest

from drakit.cli import main

VALID = ["webhook", "--backend", "example", "--driver-name", "gpu.example.com",
         "--webhook-configuration", "gpu-webhook"]  # fmt: skip


@pytest.mark.parametrize(
    ("change", "error"),
    [
        (["--driver-name", "Not_A_Name"], "--driver-name 'Not_A_Name' is not a DNS subdomain"),
        (["--port", "0"], "--port must be at least 1"),
        (["--bind-address", "localhost"], "--bind-address 'localhost' is not an IP address"),
        (["--dns-name", "bad name"], "--dns-name 'bad name' is not a DNS subdomain"),
        (["--cert-lifetime", "1"], "--cert-lifetime must be at least 3.0"),
        (["--ca-secret", "no-namespace"], "--ca-secret 'no-namespace' must be NAMESPACE/NAME"),
        (["--ca-secret", "ns/Bad_Name"], "--ca-secret name 'Bad_Name' is not a DNS subdomain"),
        (["--backend", "nomodule_here:X"], "cannot import 'nomodule_here'"),
        (["--backend", "json:JSONDecoder"], "config_model"),
    ],
)
def test_bad_flags_are_one_line_and_exit_2(
    change: list[str], error: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*VALID, *change]) == 2
    err = capsys.readouterr().err
    assert err.startswith("drakit webhook: ") and error in err, err
    assert err.count("\n") == 1


def test_without_cryptography_it_names_the_extra_to_install() -> None:
    code = (
        "import sys\n"
        "class NoCrypto:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] == 'cryptography':\n"
        "            raise ImportError('no cryptography')\n"
        "sys.meta_path.insert(0, NoCrypto())\n"
        "from drakit.cli import main\n"
        f"sys.exit(main({VALID!r} + ['--kubeconfig', '/nonexistent']))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 1
    assert "pip install 'drakit[webhook]'" in done.stderr
    assert "Traceback" not in done.stderr
