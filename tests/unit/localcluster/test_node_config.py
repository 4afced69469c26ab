"""The real node's configuration files: what they promise about where the
node writes and listens."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import yaml

from drakit.localcluster.nodeconfig import (
    KubeletPorts,
    NodePaths,
    cni_conflist,
    containerd_toml,
    kubelet_config,
    parse_feature_gates,
)


def test_containerd_keeps_its_state_in_the_work_folder_and_reads_cdi_from_the_node(
    tmp_path: Path,
) -> None:
    paths = NodePaths(tmp_path)
    config = tomllib.loads(containerd_toml(paths, Path("/b"), Path("/b/cni"), "localhost/p:1"))
    assert config["version"] == 3
    assert config["root"].startswith(str(tmp_path)) and config["state"].startswith(str(tmp_path))
    assert config["grpc"]["address"] == str(paths.containerd_socket)
    runtime = config["plugins"]["io.containerd.cri.v1.runtime"]
    assert runtime["cdi_spec_dirs"] == [str(paths.cdi_root)]
    assert runtime["restrict_oom_score_adj"] is True
    assert runtime["netns_mounts_under_state_dir"] is True
    runc = runtime["containerd"]["runtimes"]["runc"]["options"]
    assert runc["Root"].startswith(str(tmp_path)) and runc["BinaryName"] == "/b/runc"
    assert (
        config["plugins"]["io.containerd.cri.v1.images"]["pinned_images"]["sandbox"]
        == "localhost/p:1"
    )
    assert config["debug"]["address"] == "" and config["metrics"]["address"] == ""
    assert "io.containerd.internal.v1.opt" in config["disabled_plugins"]


def test_containerd_sockets_go_to_the_short_run_folder_when_given(tmp_path: Path) -> None:
    paths = NodePaths(tmp_path / ("long" * 30), run=Path("/run/drakit-node-x"))
    config = tomllib.loads(containerd_toml(paths, Path("/b"), Path("/b/cni"), "localhost/p:1"))
    assert config["grpc"]["address"] == "/run/drakit-node-x/containerd.sock"
    assert config["ttrpc"]["address"] == "/run/drakit-node-x/containerd.sock.ttrpc"


def test_kubelet_listens_only_on_loopback_and_keeps_pods_under_its_cgroup(tmp_path: Path) -> None:
    paths = NodePaths(tmp_path)
    config = yaml.safe_load(
        kubelet_config(
            paths, KubeletPorts(10250, 10248), "drakit-x", tmp_path / "ca.crt", {"A": True}
        )
    )
    assert config["address"] == "127.0.0.1" and config["healthzBindAddress"] == "127.0.0.1"
    assert config["readOnlyPort"] == 0
    assert config["cgroupRoot"] == "/drakit-x"
    assert config["failCgroupV1"] is False and config["makeIPTablesUtilChains"] is False
    assert config["imageGCHighThresholdPercent"] == 100
    assert config["podLogsDir"].startswith(str(tmp_path))
    assert config["featureGates"] == {"A": True}


def test_pods_off_the_host_network_get_only_a_carrier_less_tap() -> None:
    config = json.loads(cni_conflist(NodePaths(Path("/w"))))
    assert [p["type"] for p in config["plugins"]] == ["tap"]
    assert config["plugins"][0]["ipam"]["dataDir"].startswith("/w/")


def test_feature_gate_flag_becomes_the_kubelet_config_map() -> None:
    assert parse_feature_gates("A=true, B=false,,C=True") == {"A": True, "B": False, "C": True}
