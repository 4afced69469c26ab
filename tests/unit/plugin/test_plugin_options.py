"""PluginOptions: the settings of a plugin a driver runs from its own program, with the
defaults and environment variables of ``drakit node-plugin``."""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

import pytest

from drakit.backends.example import ExampleBackend
from drakit.cli import build_parser
from drakit.cli import node_plugin as cmd_node_plugin
from drakit.node_plugin.embedded import plugin_config
from drakit.plugin import PluginOptions, PluginOptionsError
from drakit.plugin.options import ENVIRONMENT

# PluginOptions field -> the destination of drakit node-plugin's flag for it.
CLI_FLAG = {
    "driver_name": "driver_name",
    "node_name": "node_name",
    "kubeconfig": "kubeconfig",
    "registrar_dir": "kubelet_registrar_dir",
    "plugins_dir": "kubelet_plugins_dir",
    "cdi_root": "cdi_root",
    "pod_uid": "pod_uid",
    "metrics_address": "metrics_address",
    "health_resend_seconds": "health_resend_interval",
    "unprepare_timeout_seconds": "unprepare_timeout",
}
# The client limits are read from the environment only, by name (drakit.cli.node_plugin).
CLI_ENVIRONMENT_ONLY = {
    "kube_api_qps": (cmd_node_plugin.KUBE_API_QPS_ENV, cmd_node_plugin.DEFAULT_QPS),
    "kube_api_burst": (cmd_node_plugin.KUBE_API_BURST_ENV, cmd_node_plugin.DEFAULT_BURST),
}


def as_flag_text(value: object) -> str | None:
    """An option's value as the flag's default is written (``20.0`` as ``"20"``)."""
    if value is None:
        return None
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def node_plugin_actions(monkeypatch: pytest.MonkeyPatch) -> dict[str, argparse.Action]:
    """The node-plugin command's flags by destination, parsed with none of their variables."""
    for variable in ENVIRONMENT.values():
        monkeypatch.delenv(variable, raising=False)
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    command = sub.choices["node-plugin"]
    return {action.dest: action for action in command._actions}


def test_every_option_has_the_default_and_the_variable_of_the_commands_flag(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    actions = node_plugin_actions(monkeypatch)
    options = PluginOptions("gpu.example.com", "node-a")
    for option, dest in CLI_FLAG.items():
        action = actions[dest]
        variable = re.search(r"\[env (\w+)\]", action.help or "")
        assert variable is not None and variable.group(1) == ENVIRONMENT[option], option
        if option in ("driver_name", "node_name"):
            continue  # required, no default
        assert as_flag_text(getattr(options, option)) == action.default, option
    for option, (variable, default) in CLI_ENVIRONMENT_ONLY.items():
        assert ENVIRONMENT[option] == variable
        assert getattr(options, option) == type(getattr(options, option))(default)
    assert set(ENVIRONMENT) == set(CLI_FLAG) | set(CLI_ENVIRONMENT_ONLY)


def test_from_env_reads_every_variable_and_given_options_win() -> None:
    environ = {
        "DRIVER_NAME": "gpu.example.com",
        "NODE_NAME": "node-a",
        "KUBECONFIG": "/etc/kube/config",
        "KUBELET_REGISTRAR_DIRECTORY_PATH": "/k/registry",
        "KUBELET_PLUGINS_DIRECTORY_PATH": "/k/plugins",
        "CDI_ROOT": "/k/cdi",
        "POD_UID": "uid-1",
        "METRICS_ADDRESS": ":9400",
        "HEALTH_RESEND_INTERVAL": "15",
        "UNPREPARE_TIMEOUT": "2.5",
        "KUBE_API_QPS": "5.5",
        "KUBE_API_BURST": "7",
    }
    options = PluginOptions.from_env(environ, node_name="node-b")
    assert options == PluginOptions(
        driver_name="gpu.example.com",
        node_name="node-b",
        kubeconfig=Path("/etc/kube/config"),
        registrar_dir=Path("/k/registry"),
        plugins_dir=Path("/k/plugins"),
        cdi_root=Path("/k/cdi"),
        pod_uid="uid-1",
        metrics_address=":9400",
        health_resend_seconds=15.0,
        unprepare_timeout_seconds=2.5,
        kube_api_qps=5.5,
        kube_api_burst=7,
    )
    assert options.plugin_data_dir == Path("/k/plugins/gpu.example.com")


def test_an_empty_variable_counts_as_unset_as_for_the_commands_flags() -> None:
    options = PluginOptions.from_env(
        {"DRIVER_NAME": "gpu.example.com", "NODE_NAME": "node-a", "CDI_ROOT": "", "POD_UID": ""}
    )
    assert options.cdi_root == Path("/var/run/cdi")
    assert options.pod_uid is None


def test_a_missing_driver_name_names_its_variable() -> None:
    with pytest.raises(PluginOptionsError, match=r"driver_name is required.*\$DRIVER_NAME"):
        PluginOptions.from_env({"NODE_NAME": "node-a"})


def test_a_malformed_number_in_the_environment_names_the_variable() -> None:
    environ = {"DRIVER_NAME": "d.example.com", "NODE_NAME": "n", "KUBE_API_BURST": "lots"}
    with pytest.raises(PluginOptionsError, match=r"kube_api_burst \(\$KUBE_API_BURST\) 'lots'"):
        PluginOptions.from_env(environ)


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"driver_name": "GPU_example"}, r"driver_name \(\$DRIVER_NAME\) 'GPU_example' is not"),
        ({"driver_name": "a" * 64}, r"driver_name .* at most 63 characters"),
        ({"node_name": "node a"}, r"node_name \(\$NODE_NAME\) 'node a' is not"),
        ({"registrar_dir": "relative/dir"}, r"registrar_dir .* must be an absolute path"),
        ({"cdi_root": Path("cdi")}, r"cdi_root .* must be an absolute path"),
        ({"pod_uid": "a/b"}, r"pod_uid \(\$POD_UID\) 'a/b' may contain only"),
        ({"metrics_address": "9400"}, r"metrics_address \(\$METRICS_ADDRESS\) '9400'"),
        ({"health_resend_seconds": 31}, r"health_resend_seconds .* must be seconds in \(0, 30\]"),
        ({"health_resend_seconds": float("nan")}, r"health_resend_seconds"),
        ({"unprepare_timeout_seconds": 0}, r"unprepare_timeout_seconds .* \(0, 40\]"),
        ({"unprepare_timeout_seconds": 41}, r"unprepare_timeout_seconds .* \(0, 40\]"),
        ({"kube_api_qps": -1}, r"kube_api_qps .* at least 0"),
        ({"kube_api_burst": 0}, r"kube_api_burst .* at least 1"),
        ({"kube_api_burst": True}, r"kube_api_burst .* whole number"),
    ],
)
def test_a_bad_option_is_refused_naming_the_option_its_variable_and_the_reason(
    change: dict[str, Any], named: str
) -> None:
    given: dict[str, Any] = {"driver_name": "gpu.example.com", "node_name": "node-a", **change}
    with pytest.raises(PluginOptionsError, match=named):
        PluginOptions(**given)


def test_folders_given_as_text_become_paths() -> None:
    options = PluginOptions("gpu.example.com", "node-a", cdi_root="/x/cdi")  # type: ignore[arg-type]
    assert options.cdi_root == Path("/x/cdi")


def test_the_backend_context_carries_the_driver_the_node_and_the_backends_own_config() -> None:
    options = PluginOptions("gpu.example.com", "node-a")
    context = options.backend_context({"slots": 4}, Path("/etc/npu.yaml"))
    assert (context.driver_name, context.node_name) == ("gpu.example.com", "node-a")
    assert dict(context.config) == {"slots": 4}
    assert context.config_path == Path("/etc/npu.yaml")
    assert dict(options.backend_context().config) == {}


def test_every_option_that_is_a_plugin_setting_reaches_the_plugins_configuration() -> None:
    """An option the embedding program sets is the one its plugin runs with (the command's
    flag and the option are one setting)."""
    options = PluginOptions(
        "gpu.example.com", "node-a", health_resend_seconds=15.0, unprepare_timeout_seconds=2.5
    )
    config = plugin_config(options, object.__new__(ExampleBackend))
    for option in set(ENVIRONMENT) - {"kubeconfig"}:
        assert getattr(config, option) == getattr(options, option), option
