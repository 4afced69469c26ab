"""The chart's PodResources cross-check values: off by default; on, the kubelet's socket
folder is mounted read-only and the plugin gets flags it accepts."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest
from deploy_support import Helm, one

from drakit.cli import build_parser
from drakit.cli.podresources_flags import podresources_config
from drakit.node_plugin.crosscheck import CrossCheckConfig

pytestmark = pytest.mark.integration

ON = {
    "nodePlugin.podResources.enabled": "true",
    "nodePlugin.podResources.period": "30",
    "nodePlugin.podResources.grace": "120",
    "nodePlugin.podResources.eventAfter": "600",
}


def _pod(helm: Helm, values: dict[str, str] | None = None) -> dict[str, Any]:
    template: dict[str, Any] = one(helm.render(values=values), "DaemonSet")["spec"]["template"]
    return template


def test_the_cross_check_is_off_by_default_and_mounts_nothing(helm: Helm) -> None:
    pod = _pod(helm)
    container = pod["spec"]["containers"][0]
    assert not [e for e in container["env"] if e["name"].startswith("PODRESOURCES_")]
    assert "pod-resources" not in [v["name"] for v in pod["spec"]["volumes"]]
    assert "drakit.dev/node-view-port" not in (pod["metadata"].get("annotations") or {})


def test_enabled_it_mounts_the_kubelets_socket_folder_read_only(helm: Helm) -> None:
    pod = _pod(helm, {**ON, "kubeletDir": "/data/kubelet/"})
    (mount,) = [
        m for m in pod["spec"]["containers"][0]["volumeMounts"] if m["name"] == "pod-resources"
    ]
    assert mount == {
        "name": "pod-resources",
        "mountPath": "/data/kubelet/pod-resources",
        "readOnly": True,
    }
    (volume,) = [v for v in pod["spec"]["volumes"] if v["name"] == "pod-resources"]
    assert volume["hostPath"] == {"path": "/data/kubelet/pod-resources", "type": "Directory"}
    assert pod["metadata"]["annotations"]["drakit.dev/node-view-port"] == "9400"


def test_enabled_its_environment_parses_as_the_plugins_flags(
    helm: Helm, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {
        e["name"]: e["value"]
        for e in _pod(helm, ON)["spec"]["containers"][0]["env"]
        if "value" in e
    }
    for name, value in env.items():
        if name.startswith("PODRESOURCES_"):
            monkeypatch.setenv(name, value)
    args = build_parser().parse_args(
        ["node-plugin", "--driver-name", "d.example.com", "--node-name", "n"]
    )
    assert podresources_config(args) == CrossCheckConfig(
        socket=Path("/var/lib/kubelet/pod-resources/kubelet.sock"),
        period=30,
        grace=120,
        event_after=600,
    )
    assert isinstance(args, argparse.Namespace)


def test_the_schema_refuses_a_negative_grace(helm: Helm) -> None:
    proc = helm.template(values={"nodePlugin.podResources.grace": "-1"}, check=False)
    assert proc.returncode != 0
    assert "grace" in proc.stderr
