"""``drakit devices --node`` reads the node view only from the plugin DaemonSet's own pods,
against the real apiserver and its pod proxy.

The plugin's namespace is given through the flag's environment twin
(``DRAKIT_PLUGIN_NAMESPACE``). A pod proxied at 127.0.0.1 is refused by the apiserver itself
("address not allowed"): that note is the proof a pod was trusted and read; "is not
trusted" the proof it was not. Where the machine has a global unicast address the proxy
really reaches a served view, and the test shows which view gets printed.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from helpers.nodeviews import serving_view, view
from node_view_pods import (
    CHART_LABELS,
    SELECTOR,
    create_daemonset,
    create_pod,
    local_global_ipv4,
    owner_of,
)

from drakit.cli import main
from drakit.kubeapi.client import RateLimitedApiClient
from drakit.localcluster import LocalCluster

pytestmark = pytest.mark.integration

REFUSED_BY_APISERVER = "address not allowed"


def _node() -> str:
    return f"nv-{uuid.uuid4().hex[:8]}"


def _devices_node(cluster: LocalCluster, node: str, *extra: str) -> int:
    return main(["devices", "--kubeconfig", cluster.kubeconfig, "--node", node, *extra])


def test_the_plugin_daemonsets_own_pod_is_read_through_the_pod_proxy(
    cluster: LocalCluster,
    api: RateLimitedApiClient,
    other_namespace: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    node = _node()
    ds = create_daemonset(api, other_namespace)
    pod = create_pod(api, other_namespace, node, owner=owner_of(ds))
    monkeypatch.setenv("DRAKIT_PLUGIN_NAMESPACE", other_namespace)
    assert _devices_node(cluster, node) == 0
    out = capsys.readouterr().out
    assert f"note: node view: pod {other_namespace}/{pod['metadata']['name']}: " in out
    assert REFUSED_BY_APISERVER in out  # trusted, so asked for; the apiserver said no
    assert "not trusted" not in out


def test_an_annotated_pod_in_another_namespace_is_never_read(
    *,
    cluster: LocalCluster,
    api: RateLimitedApiClient,
    namespace: str,
    other_namespace: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A user's pod, however well it copies the plugin pod (labels, annotation, even an
    owner reference to the real DaemonSet's UID), is outside the plugin's namespace."""
    node = _node()
    ds = create_daemonset(api, other_namespace)
    forged = create_pod(api, namespace, node, owner=owner_of(ds))
    monkeypatch.setenv("DRAKIT_PLUGIN_NAMESPACE", other_namespace)
    assert _devices_node(cluster, node) == 0
    out = capsys.readouterr().out
    assert forged["metadata"]["name"] not in out
    assert REFUSED_BY_APISERVER not in out
    assert f"note: node view: no node plugin pod in namespace {other_namespace} on {node}" in out


def test_by_default_only_the_install_namespace_is_read(
    cluster: LocalCluster,
    api: RateLimitedApiClient,
    namespace: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """With no flag, a user's annotated pod is not read either: the default plugin namespace
    is drakit-system, as the install docs use."""
    node = _node()
    forged = create_pod(api, namespace, node)
    assert _devices_node(cluster, node) == 0
    out = capsys.readouterr().out
    assert forged["metadata"]["name"] not in out
    assert REFUSED_BY_APISERVER not in out
    assert "no node plugin pod in namespace drakit-system" in out


# How a pod in the plugin's namespace can look like a plugin pod and not be one: each builds
# the pod (and maybe a lookalike DaemonSet) and says the reason the note must give.
def _no_owner(api: Any, ns: str, node: str, ds: dict[str, Any]) -> dict[str, Any]:
    return create_pod(api, ns, node)


def _lookalike_daemonset(api: Any, ns: str, node: str, ds: dict[str, Any]) -> dict[str, Any]:
    lookalike = create_daemonset(api, ns, name="drakit-node-plugin-x", labels=SELECTOR)
    return create_pod(api, ns, node, owner=owner_of(lookalike))


def _wrong_uid(api: Any, ns: str, node: str, ds: dict[str, Any]) -> dict[str, Any]:
    return create_pod(api, ns, node, owner=owner_of(ds, uid=str(uuid.uuid4())))


def _outside_selector(api: Any, ns: str, node: str, ds: dict[str, Any]) -> dict[str, Any]:
    labels = {**CHART_LABELS, "app.kubernetes.io/instance": "other"}
    return create_pod(api, ns, node, owner=owner_of(ds), labels=labels)


def _other_port(api: Any, ns: str, node: str, ds: dict[str, Any]) -> dict[str, Any]:
    return create_pod(api, ns, node, owner=owner_of(ds), port=10250)


def _huge_port(api: Any, ns: str, node: str, ds: dict[str, Any]) -> dict[str, Any]:
    return create_pod(api, ns, node, owner=owner_of(ds), port="9" * 40)


def _not_controller(api: Any, ns: str, node: str, ds: dict[str, Any]) -> dict[str, Any]:
    return create_pod(api, ns, node, owner=owner_of(ds, controller=False))


def _replicaset(api: Any, ns: str, node: str, ds: dict[str, Any]) -> dict[str, Any]:
    return create_pod(api, ns, node, owner=owner_of(ds, kind="ReplicaSet"))


def _gone_daemonset(api: Any, ns: str, node: str, ds: dict[str, Any]) -> dict[str, Any]:
    return create_pod(api, ns, node, owner=owner_of(ds, name="no-such-ds"))


LOOKALIKES = {
    "no owner": (_no_owner, "it is not controlled by a DaemonSet"),
    "lookalike DaemonSet": (
        _lookalike_daemonset,
        "DaemonSet drakit-node-plugin-x is not a drakit node plugin",
    ),
    "owner uid not the DaemonSet's": (_wrong_uid, "but that DaemonSet's uid is"),
    "labels outside the selector": (_outside_selector, "do not match the selector"),
    "another port": (_other_port, "annotation differs from its DaemonSet's (9400)"),
    "a port that is no port": (_huge_port, "annotation differs from its DaemonSet's"),
    "owner not controller": (_not_controller, "it is not controlled by a DaemonSet"),
    "ReplicaSet owner": (_replicaset, "it is not controlled by a DaemonSet"),
    "missing DaemonSet": (_gone_daemonset, "its DaemonSet no-such-ds does not exist"),
}


@pytest.mark.parametrize(("make", "reason"), LOOKALIKES.values(), ids=LOOKALIKES.keys())
def test_a_lookalike_pod_in_the_plugin_namespace_is_not_trusted(
    *,
    cluster: LocalCluster,
    api: RateLimitedApiClient,
    other_namespace: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    make: Any,
    reason: str,
) -> None:
    node = _node()
    ds = create_daemonset(api, other_namespace)
    pod = make(api, other_namespace, node, ds)
    monkeypatch.setenv("DRAKIT_PLUGIN_NAMESPACE", other_namespace)
    assert _devices_node(cluster, node) == 0
    out = capsys.readouterr().out
    prefix = f"note: node view: pod {other_namespace}/{pod['metadata']['name']} is not trusted: "
    (line,) = [line for line in out.splitlines() if line.startswith(prefix)]
    assert reason in line
    assert REFUSED_BY_APISERVER not in out  # never asked for


def test_plugin_daemonset_names_the_only_daemonset_whose_pods_are_read(
    cluster: LocalCluster,
    api: RateLimitedApiClient,
    other_namespace: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    node = _node()
    ds = create_daemonset(api, other_namespace)
    pod = create_pod(api, other_namespace, node, owner=owner_of(ds))
    args = ["--plugin-namespace", other_namespace, "--plugin-daemonset", "other-plugin"]
    assert _devices_node(cluster, node, *args) == 0
    out = capsys.readouterr().out
    assert (
        f"pod {other_namespace}/{pod['metadata']['name']} is not trusted: its DaemonSet is "
        "'drakit-node-plugin', not 'other-plugin' (--plugin-daemonset)"
    ) in out


def test_a_bad_plugin_namespace_flag_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["devices", "--node", "n", "--plugin-namespace", "../x"]) == 2
    assert "--plugin-namespace: '../x' is not a namespace name" in capsys.readouterr().err


@pytest.fixture
def proxied_address() -> str:
    address = local_global_ipv4()
    if address is None:
        pytest.skip("no global unicast IPv4 address on this machine for the pod proxy to dial")
    return address


def test_through_the_proxy_the_plugins_view_is_printed_and_a_forged_one_is_not(
    *,
    cluster: LocalCluster,
    api: RateLimitedApiClient,
    namespace: str,
    other_namespace: str,
    proxied_address: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """End to end: the plugin pod's real view reaches the screen through the apiserver; a
    user's pod serving a made-up view (with an escape sequence for the terminal) does not."""
    node = _node()
    forged_view = view(node, "forged-claim", detail="all good \x1b]0;owned\x07")
    with (
        serving_view(proxied_address, view(node, "real-claim")) as real_port,
        serving_view(proxied_address, forged_view) as forged_port,
    ):
        ds = create_daemonset(api, other_namespace, port=real_port)
        create_pod(
            api, other_namespace, node, owner=owner_of(ds), port=real_port, ip=proxied_address
        )
        create_pod(api, namespace, node, port=forged_port, ip=proxied_address)
        monkeypatch.setenv("DRAKIT_PLUGIN_NAMESPACE", other_namespace)
        assert _devices_node(cluster, node) == 0
    out = capsys.readouterr().out
    assert f"Node view of {node} from driver gpu.example.com" in out
    assert "team/real-claim" in out
    assert "forged-claim" not in out
    assert "\x1b" not in out
