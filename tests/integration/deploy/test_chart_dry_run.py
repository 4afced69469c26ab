"""Every object the chart renders is accepted by the real apiserver (server-side dry run)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from deploy_support import ROOT, Helm, load_objects
from kubernetes import client
from kubernetes.client.rest import ApiException
from kubernetes.dynamic import DynamicClient

from drakit.localcluster import LocalCluster

pytestmark = pytest.mark.integration

# Default values, then every optional part switched on (backend config map,
# privileged hostdev plugin, granular device-status RBAC, extra classes).
VARIANTS: dict[str, Mapping[str, str]] = {
    "defaults": {},
    "everything-on": {
        "nodePlugin.backend": "hostdev",
        "nodePlugin.backendConfig.devices[0].glob": "/dev/fuse",
        "nodePlugin.deviceStatus": "true",
        "nodePlugin.podAnnotations.team": "infra",
        "controller.priorityClassName": "system-cluster-critical",
        "controller.claimGeneration": "all",
        "extraDeviceClasses[0].name": "big.gpu.drakit.dev",
        "extraDeviceClasses[0].selectors[0]": "device.driver == 'gpu.drakit.dev'",
        "extraDeviceClasses[0].extendedResourceName": "example.com/gpu",
        "imagePullSecrets[0].name": "registry",
        "commonLabels.owner": "platform",
    },
}


def _dry_run_apply(dyn: DynamicClient, obj: dict[str, Any]) -> None:
    resource = dyn.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
    dyn.server_side_apply(
        resource,
        body=obj,
        name=obj["metadata"]["name"],
        namespace=obj["metadata"].get("namespace"),
        field_manager="drakit-deploy-test",
        dry_run="All",
    )


def _dynamic(api: Any, folder: Path) -> DynamicClient:
    """A dynamic client whose discovery cache is a file in ``folder``: by default it is
    ``/tmp/osrcp-<hash of the server URL>.json``, left behind by every run and read by the
    next run that reuses the port, whichever Kubernetes version answers there then."""
    return DynamicClient(api, cache_file=str(folder / "discovery.json"))


@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.compat
def test_every_rendered_object_passes_server_side_dry_run(
    helm: Helm, cluster: LocalCluster, namespace: str, variant: str, tmp_path: Path
) -> None:
    objects = helm.render(namespace=namespace, values=VARIANTS[variant])
    api = cluster.api_client()
    dyn = _dynamic(api, tmp_path)
    rejected: list[str] = []
    for obj in objects:
        try:
            _dry_run_apply(dyn, obj)
        except ApiException as exc:
            rejected.append(f"{obj['kind']} {obj['metadata']['name']}: {exc.status} {exc.body}")
    assert rejected == []
    # Dry run means nothing was stored.
    with pytest.raises(ApiException) as missing:
        client.AppsV1Api(api).read_namespaced_daemon_set("drakit-node-plugin", namespace)
    assert missing.value.status == 404


def test_dry_run_reports_an_object_the_apiserver_rejects(
    helm: Helm, cluster: LocalCluster, namespace: str, tmp_path: Path
) -> None:
    # The check above would catch a broken object: a DaemonSet whose rolling
    # update allows surge and unavailability at once is invalid.
    ds = next(o for o in helm.render(namespace=namespace) if o["kind"] == "DaemonSet")
    ds["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"] = 1
    with pytest.raises(ApiException) as rejected:
        _dry_run_apply(_dynamic(cluster.api_client(), tmp_path), ds)
    assert rejected.value.status == 422
    assert "maxUnavailable" in rejected.value.body


EXAMPLES = sorted((ROOT / "deploy" / "examples").glob("*.yaml"))


def _class_names(obj: Any) -> set[str]:
    """Every deviceClassName anywhere in ``obj``."""
    if isinstance(obj, dict):
        found = {obj["deviceClassName"]} if "deviceClassName" in obj else set()
        return found.union(*(_class_names(v) for v in obj.values()))
    if isinstance(obj, list):
        return set().union(*(_class_names(v) for v in obj))
    return set()


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_example_is_accepted_and_uses_the_charts_default_class(
    helm: Helm, cluster: LocalCluster, namespace: str, example: Path, tmp_path: Path
) -> None:
    dyn = _dynamic(cluster.api_client(), tmp_path)
    objects = load_objects(example.read_text())
    for obj in objects:
        obj["metadata"]["namespace"] = namespace
        _dry_run_apply(dyn, obj)
    classes = {o["metadata"]["name"] for o in helm.render() if o["kind"] == "DeviceClass"}
    assert _class_names(objects)
    assert _class_names(objects) <= classes
