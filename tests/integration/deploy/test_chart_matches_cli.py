"""The chart starts drakit the way drakit's command line understands.

The DaemonSet configures the node plugin through the flags' environment
twins, and the controller Deployment calls flags by name; a rename on either
side must fail here, not in a cluster.
"""

from __future__ import annotations

import argparse
from typing import Any

import pytest
from deploy_support import Helm, one

from drakit.cli import build_parser

pytestmark = pytest.mark.integration

# Set by the chart for the Python runtime, and the pod IP that a metrics address without
# a host binds (telemetry.address): not drakit flags.
NOT_FLAGS = {"PYTHONDONTWRITEBYTECODE", "POD_IP"}


def _subcommand(name: str) -> argparse.ArgumentParser | None:
    parser = build_parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found: argparse.ArgumentParser | None = action.choices.get(name)
            return found
    return None


def _container(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    container: dict[str, Any] = one(objects, kind)["spec"]["template"]["spec"]["containers"][0]
    return container


def test_every_node_plugin_environment_variable_is_a_flag_twin(helm: Helm) -> None:
    values = {"nodePlugin.backendConfig.x": "1"}  # renders BACKEND_CONFIG too
    container = _container(helm.render(values=values), "DaemonSet")
    parser = _subcommand("node-plugin")
    assert parser is not None
    # Each flag's help ends with "[env NAME]" when it has an environment twin.
    help_text = " ".join(action.help or "" for action in parser._actions)
    unknown = [
        e["name"]
        for e in container["env"]
        if e["name"] not in NOT_FLAGS and f"[env {e['name']}]" not in help_text
    ]
    assert unknown == []


def test_every_controller_environment_variable_is_a_flag_twin(helm: Helm) -> None:
    container = _container(helm.render(), "Deployment")
    parser = _subcommand("controller")
    assert parser is not None
    help_text = " ".join(action.help or "" for action in parser._actions)
    unknown = [
        e["name"]
        for e in container["env"]
        if e["name"] not in NOT_FLAGS and f"[env {e['name']}]" not in help_text
    ]
    assert unknown == []


def test_controller_deployment_flags_parse(helm: Helm) -> None:
    container = _container(helm.render(), "Deployment")
    assert container["command"] == ["drakit", "controller"]
    parser = _subcommand("controller")
    assert parser is not None
    args = parser.parse_args(container["args"])
    assert args.leader_elect is True
    assert args.scheduler_name == "drakit"
    assert args.claim_generation == "scoped"
    assert str(args.workers) == "4"
    assert args.metrics_address == ":9401"
