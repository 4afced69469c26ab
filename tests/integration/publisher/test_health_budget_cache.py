"""The NoExecute budget against the real apiserver: it reads a watch cache, not a LIST per
evaluation; an apiserver that refuses its requests (429 with Retry-After) does not hold up
publishing; and slices left behind by a pool's generation or inflated by one node do not move
the cluster-wide limit beyond the documented bound (docs/health.md, health/census.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.apiproxy import ApiProxy, Request
from publisher_support import HealthDevices, Pool, plain_devices

from drakit.kubeapi.lightclient import load_light_client
from drakit.kubeapi.objects import KubeObject
from drakit.kubeapi.resources import Resource
from drakit.localcluster import LocalCluster
from drakit.node_plugin.health.policy import HealthPolicy

pytestmark = pytest.mark.integration

SLICES_PATH = "/apis/resource.k8s.io/v1/resourceslices"
EVICT = HealthPolicy(default_effect="NoExecute", noexecute_cluster_percent=100)


@pytest.fixture
def proxy(cluster: LocalCluster) -> Iterator[ApiProxy]:
    proxy = ApiProxy(cluster)
    yield proxy
    proxy.close()


@pytest.fixture
def proxied_api(proxy: ApiProxy, tmp_path: Path) -> Any:
    """The node plugin's own client, reaching the apiserver through ``proxy``."""
    return load_light_client(proxy.write_kubeconfig(tmp_path / "kubeconfig"), qps=0)


def budget_reads(driver: str) -> Callable[[Request], bool]:
    """The budget's requests: every slice of the driver (no node in the selector)."""
    return lambda r: (
        r.path == SLICES_PATH and r.query.get("fieldSelector") == f"spec.driver={driver}"
    )


def budget_lists(driver: str) -> Callable[[Request], bool]:
    reads = budget_reads(driver)
    return lambda r: reads(r) and r.method == "GET" and not r.watch


def node_devices(slices: Resource, node: str) -> dict[str, dict[str, Any]]:
    return {
        d["name"]: d
        for s in slices.list(field_selector=f"spec.nodeName={node}").items
        for d in s["spec"].get("devices") or ()
    }


def effects(slices: Resource, node: str) -> dict[str, str]:
    """Device -> effect of its health taint, for the tainted devices of ``node``."""
    return {
        name: taint["effect"]
        for name, d in node_devices(slices, node).items()
        for taint in d.get("taints") or ()
    }


def test_the_budget_reads_a_watch_cache_not_a_list_per_evaluation(
    *,
    proxy: ApiProxy,
    proxied_api: Any,
    health_driver: str,
    fake_nodes: Any,
    health_publishers: Any,
    slices: Resource,
    eventually: Any,
) -> None:
    devices = HealthDevices(fake_nodes(), 3)
    health_publishers(devices, EVICT, proxied_api)
    eventually(lambda: node_devices(slices, devices.node), what="published")
    devices.set("gpu-0", "Xid79")
    eventually(lambda: effects(slices, devices.node) == {"gpu-0": "NoExecute"}, what="NoExecute")
    reads = devices.backend.discoveries
    # Every report re-evaluates the budget while gpu-0 wants NoExecute.
    eventually(lambda: devices.backend.discoveries >= reads + 20, what="20 more evaluations")
    assert proxy.count(budget_lists(health_driver)) == 1  # the watch cache's first list
    assert proxy.count(lambda r: budget_reads(health_driver)(r) and r.watch) >= 1


def test_a_429_on_the_budget_path_does_not_hold_up_publishing(
    *,
    proxy: ApiProxy,
    proxied_api: Any,
    health_driver: str,
    fake_nodes: Any,
    health_publishers: Any,
    slices: Resource,
    eventually: Any,
) -> None:
    # The apiserver refuses every read of the budget and asks for 30 s each time (the
    # client's longest wait, ten times over): a worker that waited would publish nothing
    # for five minutes.
    refused = budget_reads(health_driver)
    proxy.refuse = lambda r: 30 if refused(r) else None
    devices = HealthDevices(fake_nodes(), 2)
    publisher = health_publishers(devices, EVICT, proxied_api)
    eventually(lambda: node_devices(slices, devices.node), what="published")
    devices.set("gpu-0", "Xid79")
    devices.backend.set([Pool(devices.node, plain_devices(3))])  # and a device more
    eventually(
        lambda: set(node_devices(slices, devices.node)) == {"gpu-0", "gpu-1", "gpu-2"},
        what="the pool change",
        timeout=30,
    )
    # NoSchedule meanwhile: the budget cannot be read, so it grants nothing new.
    eventually(lambda: effects(slices, devices.node) == {"gpu-0": "NoSchedule"}, what="held")
    assert proxy.refused, "the budget's reads were refused meanwhile"
    assert proxy.count(refused) == len(proxy.refused), "no budget read got through"
    assert publisher.cluster_taints is not None
    assert not publisher.cluster_taints.informer.has_synced()


def test_the_budget_unknown_gives_noschedule_until_the_cache_is_filled(
    *,
    proxy: ApiProxy,
    proxied_api: Any,
    health_driver: str,
    fake_nodes: Any,
    health_publishers: Any,
    slices: Resource,
    eventually: Any,
) -> None:
    refused = budget_reads(health_driver)
    proxy.refuse = lambda r: 1 if refused(r) else None
    devices = HealthDevices(fake_nodes(), 2)
    health_publishers(devices, EVICT, proxied_api)
    eventually(lambda: node_devices(slices, devices.node), what="published")
    devices.set("gpu-0", "Xid79")
    eventually(lambda: effects(slices, devices.node) == {"gpu-0": "NoSchedule"}, what="held")
    proxy.refuse = lambda _r: None
    eventually(lambda: effects(slices, devices.node) == {"gpu-0": "NoExecute"}, what="granted")


def _create(slices: Resource, driver: str, node: str, pool: str, **kw: Any) -> KubeObject:
    """A slice of ``node`` written directly (as a node plugin of ``node`` could write it)."""
    devices: list[dict[str, Any]] = [
        {"name": f"dev-{kw.get('first', 0) + i}"} for i in range(kw["devices"])
    ]
    for i, time_added in (kw.get("holders") or {}).items():
        devices[i]["taints"] = [
            {"key": f"{driver}/unhealthy", "effect": "NoExecute", "timeAdded": time_added}
        ]
    return slices.create(
        {
            "metadata": {"generateName": f"{node}-{pool}-"},
            "spec": {
                "driver": driver,
                "nodeName": node,
                "pool": {
                    "name": pool,
                    "generation": kw.get("generation", 1),
                    "resourceSliceCount": kw.get("count", 1),
                },
                "devices": devices,
            },
        }
    )


def test_stale_generations_and_an_inflated_node_do_not_move_the_budget(
    *,
    health_driver: str,
    fake_nodes: Any,
    health_publishers: Any,
    slices: Resource,
    eventually: Any,
) -> None:
    # Node b: 5 devices now (generation 2), and a slice of generation 1 not deleted yet with
    # 60 devices, one of them holding an old NoExecute taint. Node c: 1,000 devices. With
    # this node's 5 the census is 5 + 5 + min(1000, median 5) = 15, so 10 % is one device;
    # counted naively it would be 1,070 devices and one stale holder, room for 106 more.
    try:
        _create(slices, health_driver, "b", "b", devices=5, generation=2)
        _create(slices, health_driver, "b", "b", devices=60, holders={0: "2020-01-01T00:00:00Z"})
        for i in range(8):
            _create(slices, health_driver, "c", "c", devices=125, first=125 * i, count=8)
        policy = HealthPolicy(
            default_effect="NoExecute", noexecute_cluster_percent=10, noexecute_per_node=5
        )
        devices = HealthDevices(fake_nodes(), 5)
        health_publishers(devices, policy)
        eventually(lambda: node_devices(slices, devices.node), what="published")
        devices.set("gpu-0", "Xid79")
        eventually(lambda: effects(slices, devices.node) == {"gpu-0": "NoExecute"}, what="one")
        devices.set("gpu-1", "Xid79")
        expected = {"gpu-0": "NoExecute", "gpu-1": "NoSchedule"}
        eventually(lambda: effects(slices, devices.node) == expected, what="the second held")
        reads = devices.backend.discoveries
        eventually(lambda: devices.backend.discoveries >= reads + 10, what="10 more evaluations")
        assert effects(slices, devices.node) == expected
    finally:
        for obj in slices.list(field_selector=f"spec.driver={health_driver}").items:
            if obj["spec"].get("nodeName") in ("b", "c"):
                slices.delete(obj["metadata"]["name"])
