"""``drakit node-plugin`` flag validation: one clear line on stderr, non-zero exit."""

from __future__ import annotations

import logging
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from drakit.cli import build_parser, main
from drakit.cli.node_plugin import build_config


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(["node-plugin", *args])
    return code, capsys.readouterr().err


@pytest.fixture
def dirs(short_tmp: Path) -> list[str]:
    return [
        "--kubelet-registrar-dir",
        str(short_tmp / "registry"),
        "--kubelet-plugins-dir",
        str(short_tmp / "plugins"),
        "--cdi-root",
        str(short_tmp / "cdi"),
    ]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("DRIVER_NAME", "NODE_NAME", "KUBECONFIG", "POD_UID", "METRICS_ADDRESS", "BACKEND"):
        monkeypatch.delenv(key, raising=False)


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    """The CLI configures the root logger; give it back as it was."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def assert_one_line_error(code: int, err: str, *fragments: str) -> None:
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("drakit node-plugin: error: ")
    for fragment in fragments:
        assert fragment in err


@pytest.mark.parametrize(
    "name", ["Gpu.Example.com", "gpu_example.com", "-gpu.example.com", "a" * 64, "gpu..example"]
)
def test_driver_name_that_is_not_a_dns_subdomain_is_rejected(
    capsys: pytest.CaptureFixture[str], dirs: list[str], name: str
) -> None:
    code, err = run_cli(capsys, f"--driver-name={name}", "--node-name", "n1", *dirs)
    assert_one_line_error(code, err, "--driver-name", "DNS subdomain")


def test_unwritable_registrar_dir_is_rejected(
    capsys: pytest.CaptureFixture[str], short_tmp: Path, dirs: list[str]
) -> None:
    blocker = short_tmp / "file"
    blocker.write_text("")
    args = [*dirs, "--kubelet-registrar-dir", str(blocker / "registry")]
    code, err = run_cli(capsys, "--driver-name", "gpu.example.com", "--node-name", "n1", *args)
    assert_one_line_error(code, err, "--kubelet-registrar-dir", "not a writable directory")


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write to a 0500 directory")
def test_read_only_cdi_root_is_rejected(
    capsys: pytest.CaptureFixture[str], short_tmp: Path, dirs: list[str]
) -> None:
    read_only = short_tmp / "ro"
    read_only.mkdir(mode=0o500)
    args = [*dirs, "--cdi-root", str(read_only)]
    code, err = run_cli(capsys, "--driver-name", "gpu.example.com", "--node-name", "n1", *args)
    assert_one_line_error(code, err, "--cdi-root", "not a writable directory")


def test_relative_directory_is_rejected(
    capsys: pytest.CaptureFixture[str], dirs: list[str]
) -> None:
    args = [*dirs, "--kubelet-plugins-dir", "plugins"]
    code, err = run_cli(capsys, "--driver-name", "gpu.example.com", "--node-name", "n1", *args)
    assert_one_line_error(code, err, "--kubelet-plugins-dir", "absolute path")


@contextmanager
def read_only_but_the_drivers_folder(plugins: Path, own: Path) -> Iterator[None]:
    """``plugins`` read-only and ``own`` (inside it) writable, as in the plugin's container:
    a read-only root file system with only the driver's host folder mounted."""
    if os.geteuid() != 0:
        plugins.chmod(0o500)
        try:
            yield
        finally:
            plugins.chmod(0o700)
        return
    source = plugins.parent / "own-source"
    source.mkdir()
    subprocess.run(["mount", "--bind", str(plugins), str(plugins)], check=True)
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(plugins)], check=True)
        subprocess.run(["mount", "--bind", str(source), str(own)], check=True)
        try:
            yield
        finally:
            subprocess.run(["umount", str(own)], check=True)
    finally:
        subprocess.run(["umount", str(plugins)], check=True)


def test_only_the_drivers_own_folder_of_the_plugins_dir_must_be_writable(
    short_tmp: Path, dirs: list[str]
) -> None:
    plugins = short_tmp / "plugins"
    own = plugins / "gpu.example.com"
    own.mkdir(parents=True)
    args = build_parser().parse_args(
        ["node-plugin", "--driver-name", "gpu.example.com", "--node-name", "n1", *dirs]
    )
    with read_only_but_the_drivers_folder(plugins, own):
        assert build_config(args).plugin_data_dir == own
    assert not [
        line
        for line in Path("/proc/self/mountinfo").read_text().splitlines()
        if str(short_tmp) in line
    ]


def test_socket_path_that_cannot_fit_is_rejected(
    capsys: pytest.CaptureFixture[str], short_tmp: Path, dirs: list[str]
) -> None:
    deep = short_tmp / ("d" * 100)
    args = [*dirs, "--kubelet-registrar-dir", str(deep)]
    code, err = run_cli(capsys, "--driver-name", "gpu.example.com", "--node-name", "n1", *args)
    assert_one_line_error(code, err, "registration socket path", "107-byte")


@pytest.mark.parametrize(
    ("flag", "value", "fragment"),
    [
        ("--pod-uid", "../etc", "--pod-uid"),
        ("--metrics-address", "9400", "HOST:PORT"),
        ("--metrics-address", ":99999", "HOST:PORT"),
        ("--health-resend-interval", "45", "(0, 30]"),
        ("--health-resend-interval", "soon", "(0, 30]"),
        ("--unprepare-timeout", "0", "--unprepare-timeout '0' must be seconds in (0, 40]"),
        ("--unprepare-timeout", "45", "(0, 40]"),
        ("--unprepare-timeout", "nan", "(0, 40]"),
        ("--backend", "my backend", "module:Class"),
        ("--backend-config", "/nonexistent/config.yaml", "not a readable file"),
        ("--kubeconfig", "/nonexistent/kubeconfig", "not a readable file"),
        ("--node-name", "Node_1", "--node-name"),
        ("--cpu-home", "on", "auto, off"),
    ],
)
def test_bad_flag_values_are_rejected_with_the_flag_named(
    capsys: pytest.CaptureFixture[str], dirs: list[str], flag: str, value: str, fragment: str
) -> None:
    base = ["--driver-name", "gpu.example.com", "--node-name", "n1", *dirs]
    code, err = run_cli(capsys, *base, flag, value)
    assert_one_line_error(code, err, flag, fragment)


def test_env_twins_supply_values_and_are_validated_too(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, dirs: list[str]
) -> None:
    monkeypatch.setenv("DRIVER_NAME", "Not_Valid")
    monkeypatch.setenv("NODE_NAME", "n1")
    code, err = run_cli(capsys, *dirs)
    assert_one_line_error(code, err, "'Not_Valid'")


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(("LOG_LEVEL", "loud", "--log-level 'loud'"), id="choice-flag-twin"),
        pytest.param(("KUBE_API_BURST", "0", "$KUBE_API_BURST must be at least 1"), id="burst"),
        pytest.param(("KUBE_API_QPS", "fast", "$KUBE_API_QPS 'fast' is not a number"), id="qps"),
    ],
)
def test_bad_environment_value_is_one_clear_error(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    dirs: list[str],
    case: tuple[str, str, str],
) -> None:
    variable, value, error = case
    monkeypatch.setenv(variable, value)
    code, err = run_cli(capsys, "--driver-name", "gpu.example.com", "--node-name", "n1", *dirs)
    assert_one_line_error(code, err, error)


def test_missing_driver_name_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["node-plugin", "--node-name", "n1"])
    assert exit_info.value.code == 2
    assert "--driver-name" in capsys.readouterr().err


def test_unknown_flag_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["node-plugin", "--driver-name", "d.example.com", "--node-name", "n", "--node", "x"])
    assert exit_info.value.code == 2
    assert "unrecognized arguments: --node x" in capsys.readouterr().err


def test_help_lists_every_flag_with_its_environment_variable(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        main(["node-plugin", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for flag, env in [
        ("--driver-name", "DRIVER_NAME"),
        ("--node-name", "NODE_NAME"),
        ("--kubeconfig", "KUBECONFIG"),
        ("--kubelet-registrar-dir", "KUBELET_REGISTRAR_DIRECTORY_PATH"),
        ("--kubelet-plugins-dir", "KUBELET_PLUGINS_DIRECTORY_PATH"),
        ("--cdi-root", "CDI_ROOT"),
        ("--backend", "BACKEND"),
        ("--backend-config", "BACKEND_CONFIG"),
        ("--pod-uid", "POD_UID"),
        ("--metrics-address", "METRICS_ADDRESS"),
        ("--unprepare-timeout", "UNPREPARE_TIMEOUT"),
    ]:
        assert flag in text and f"env {env}]" in text
    assert "/var/lib/kubelet/plugins_registry" in text


def test_kube_api_qps_zero_means_no_limit_like_the_controller(
    monkeypatch: pytest.MonkeyPatch, dirs: list[str]
) -> None:
    monkeypatch.setenv("KUBE_API_QPS", "0")
    args = build_parser().parse_args(
        ["node-plugin", "--driver-name", "gpu.example.com", "--node-name", "n1", *dirs]
    )
    assert build_config(args).kube_api_qps == 0.0


def test_unprepare_timeout_defaults_below_the_kubelets_call_timeout_and_is_read_from_env(
    monkeypatch: pytest.MonkeyPatch, dirs: list[str]
) -> None:
    command = ["node-plugin", "--driver-name", "gpu.example.com", "--node-name", "n1", *dirs]
    default = build_config(build_parser().parse_args(command)).unprepare_timeout_seconds
    assert 0 < default < 45  # the kubelet's defaultClientCallTimeout
    monkeypatch.setenv("UNPREPARE_TIMEOUT", "2.5")
    assert build_config(build_parser().parse_args(command)).unprepare_timeout_seconds == 2.5
