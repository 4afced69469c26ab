"""NodePorts: host ports of containers and sidecars, conflicts by IP, protocol and port."""

from __future__ import annotations

from drakit.controller.podfit.ports import host_ports, ports_conflict


def test_host_ports_come_from_containers_and_sidecars_only():
    pod = {
        "spec": {
            "containers": [{"name": "c", "ports": [{"containerPort": 80, "hostPort": 8080},
                                                   {"containerPort": 81}]}],
            "initContainers": [
                {"name": "s", "restartPolicy": "Always",
                 "ports": [{"hostPort": 9090, "protocol": "UDP", "hostIP": "127.0.0.1"}]},
                {"name": "i", "ports": [{"hostPort": 7070}]},
            ],
        }
    }  # fmt: skip
    assert set(host_ports(pod)) == {("0.0.0.0", "TCP", 8080), ("127.0.0.1", "UDP", 9090)}


def test_same_port_conflicts_when_either_side_binds_all_addresses():
    assert ports_conflict([("0.0.0.0", "TCP", 80)], [("10.0.0.1", "TCP", 80)])
    assert ports_conflict([("10.0.0.1", "TCP", 80)], [("0.0.0.0", "TCP", 80)])
    assert ports_conflict([("10.0.0.1", "TCP", 80)], [("10.0.0.1", "TCP", 80)])


def test_other_address_protocol_or_port_does_not_conflict():
    assert not ports_conflict([("10.0.0.1", "TCP", 80)], [("10.0.0.2", "TCP", 80)])
    assert not ports_conflict([("0.0.0.0", "UDP", 80)], [("0.0.0.0", "TCP", 80)])
    assert not ports_conflict([("0.0.0.0", "TCP", 81)], [("0.0.0.0", "TCP", 80)])
