"""``drakit node-plugin``'s --podresources-* flags: off by default, each bad value refused with
the flag's name and the reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from drakit.cli import build_parser
from drakit.cli.flags import ConfigError
from drakit.cli.podresources_flags import podresources_config
from drakit.node_plugin.crosscheck import CrossCheckConfig

BASE = ["node-plugin", "--driver-name", "gpu.example.com", "--node-name", "n1"]


def _config(*flags: str) -> CrossCheckConfig | None:
    return podresources_config(build_parser().parse_args([*BASE, *flags]))


def test_the_cross_check_is_off_by_default() -> None:
    assert _config() is None


def test_on_it_takes_the_socket_and_periods_from_the_flags() -> None:
    assert _config(
        "--podresources-check=on",
        "--podresources-socket=/k/pod-resources/kubelet.sock",
        "--podresources-period=5",
        "--podresources-grace=10",
        "--podresources-event-after=10",
    ) == CrossCheckConfig(Path("/k/pod-resources/kubelet.sock"), period=5, grace=10, event_after=10)


def test_its_environment_twins_set_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PODRESOURCES_CHECK", "on")
    monkeypatch.setenv("PODRESOURCES_GRACE", "42")
    config = _config()
    assert config is not None
    assert config.grace == 42


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--podresources-check=yes"], "--podresources-check 'yes' must be on or off"),
        (["--podresources-socket=kubelet.sock"], "--podresources-socket 'kubelet.sock' must be"),
        (["--podresources-period=0"], "--podresources-period '0' must be seconds in [1,"),
        (["--podresources-grace=soon"], "--podresources-grace 'soon' must be seconds"),
        (
            ["--podresources-grace=600", "--podresources-event-after=60"],
            "--podresources-event-after '60' must be at least --podresources-grace (600)",
        ),
    ],
)
def test_a_bad_value_is_refused_naming_the_flag_and_the_reason(
    flags: list[str], message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        _config("--podresources-check=on", *flags)
    assert message in str(caught.value)


def test_bad_values_are_refused_even_while_the_check_is_off() -> None:
    with pytest.raises(ConfigError, match="--podresources-period"):
        _config("--podresources-period=-3")
