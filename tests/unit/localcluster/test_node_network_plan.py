"""The pure parts of several real nodes on one machine: the address plan, the names a
record may delete, the CNI and kube-proxy configuration, and a record of a group's network
refused when it names a link that is not its own."""

from __future__ import annotations

import ipaddress
import json
import subprocess
from pathlib import Path

import pytest
import yaml

from drakit.localcluster import hoststate
from drakit.localcluster.netplan import (
    MAX_NODES,
    PlanError,
    bridge_name,
    check_unused,
    node_addresses,
    planned_networks,
    veth_name,
)
from drakit.localcluster.nodeconfig import NodePaths, cni_conflist, kube_proxy_config
from drakit.localcluster.noderecord import HostPath, NodeRecord, RecordError


@pytest.fixture(autouse=True)
def private_registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DRAKIT_CACHE_DIR", str(tmp_path / "cache"))


def test_each_node_gets_its_own_address_and_pod_range_inside_the_test_networks() -> None:
    nodes = node_addresses(3)
    assert [str(n.ip) for n in nodes] == ["198.19.0.11", "198.19.0.12", "198.19.0.13"]
    assert [str(n.pod_subnet) for n in nodes] == [f"198.18.{i}.0/24" for i in (1, 2, 3)]
    benchmarking = ipaddress.IPv4Network("198.18.0.0/15")  # RFC 2544: never routed
    for network in planned_networks(3)[:1] + [n.pod_subnet for n in nodes]:
        assert network.subnet_of(benchmarking)


@pytest.mark.parametrize("count", [0, MAX_NODES + 1])
def test_a_node_count_outside_the_plan_is_refused_naming_the_limit(count: int) -> None:
    with pytest.raises(PlanError, match=f"between 1 and {MAX_NODES}"):
        node_addresses(count)


def test_a_range_the_host_already_uses_is_refused_naming_what_holds_it() -> None:
    with pytest.raises(PlanError, match=r"198\.18\.1\.0/24 .* route 198\.18\.0\.0/16"):
        check_unused(planned_networks(3), ["192.0.2.7/24"], ["default", "198.18.0.0/16"])
    with pytest.raises(PlanError, match=r"10\.0\.0\.0/24 .* address 10\.1\.2\.3/8"):
        check_unused(planned_networks(3), ["10.1.2.3/8"], ["default"])
    check_unused(planned_networks(3), ["192.0.2.7/24"], ["default", "192.0.2.0/24"])


def test_a_node_in_its_own_namespace_gets_the_bridge_plugin_on_its_pod_range(
    tmp_path: Path,
) -> None:
    config = json.loads(cni_conflist(NodePaths(tmp_path), "198.18.2.0/24"))
    bridge, portmap = config["plugins"]
    assert bridge["type"] == "bridge" and bridge["isGateway"] and not bridge["ipMasq"]
    assert bridge["ipam"]["ranges"] == [[{"subnet": "198.18.2.0/24"}]]
    assert bridge["ipam"]["dataDir"].startswith(str(tmp_path))
    assert portmap["type"] == "portmap"


def test_kube_proxy_leaves_the_hosts_conntrack_settings_and_localhost_alone(
    tmp_path: Path,
) -> None:
    config = yaml.safe_load(
        kube_proxy_config(tmp_path / "kc", "n1", "198.19.0.11", "198.18.0.0/16", 10256)
    )
    assert config["mode"] == "iptables"
    assert config["clusterCIDR"] == "198.18.0.0/16"  # masquerades what comes from the host
    assert config["conntrack"]["maxPerCore"] == 0 and config["conntrack"]["min"] == 0
    assert config["iptables"]["localhostNodePorts"] is False
    assert config["healthzBindAddress"] == "198.19.0.11:10256"


def _group_record(tmp_path: Path, links: list[str]) -> NodeRecord:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return NodeRecord(
        owner_pid=proc.pid,
        token="g1",
        work_dir=HostPath.of(tmp_path),
        owns_work_dir=False,
        cgroup_name="drakit-g1",
        kind="network",
        links=links,
    )


def test_a_record_may_name_only_its_own_bridge_and_veth(tmp_path: Path) -> None:
    _group_record(tmp_path, [bridge_name("g1"), veth_name("g1")]).validate()
    with pytest.raises(RecordError, match="links: 'eth0' is not one of"):
        _group_record(tmp_path, ["eth0"]).validate()


def test_a_sweep_refuses_a_record_naming_a_link_it_did_not_make(tmp_path: Path) -> None:
    record = _group_record(tmp_path, [bridge_name("g1")])
    record.save()
    data = json.loads(record.path.read_text())
    data["links"] = ["eth0"]  # the host's own interface: never to be deleted
    record.path.write_text(json.dumps(data))
    done = hoststate.sweep_nodes()
    assert record.path.exists()
    assert any("links: 'eth0' is not one of" in line for line in done)
    assert Path("/sys/class/net/lo").exists()
