"""Helpers for the deployment tests: run the pinned helm, load what it renders,
and talk to the API server as a service account.

helm runs with private config and cache folders, so the tests never read or
change the user's own helm set-up.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

ROOT = Path(__file__).resolve().parents[3]
CHART = ROOT / "deploy" / "helm" / "drakit"
KUBE_VERSION = "v1.37.2"


@dataclass(frozen=True)
class Helm:
    """The pinned helm binary with an isolated home."""

    binary: Path
    home: Path

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            HELM_CONFIG_HOME=str(self.home / "config"),
            HELM_CACHE_HOME=str(self.home / "cache"),
            HELM_DATA_HOME=str(self.home / "data"),
        )
        return env

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run helm; with ``check`` a non-zero exit fails with helm's own output."""
        proc = subprocess.run(
            [str(self.binary), *args],
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if check and proc.returncode != 0:
            raise AssertionError(
                f"helm {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
            )
        return proc

    def template(
        self,
        release: str = "drakit",
        namespace: str = "drakit-system",
        values: Mapping[str, str] | None = None,
        check: bool = True,
        kube_version: str = KUBE_VERSION,
    ) -> subprocess.CompletedProcess[str]:
        """``helm template`` of the chart for ``kube_version``; ``values`` are ``--set`` pairs."""
        return self.run(
            "template",
            release,
            str(CHART),
            "--namespace",
            namespace,
            "--kube-version",
            kube_version,
            *set_args(values),
            check=check,
        )

    def render(
        self,
        release: str = "drakit",
        namespace: str = "drakit-system",
        values: Mapping[str, str] | None = None,
    ) -> list[dict[str, Any]]:
        """The chart's objects for these values, in helm's install order."""
        return load_objects(self.template(release, namespace, values).stdout)


def set_args(values: Mapping[str, str] | None) -> list[str]:
    args: list[str] = []
    for key, value in (values or {}).items():
        args += ["--set", f"{key}={value}"]
    return args


def load_objects(text: str) -> list[dict[str, Any]]:
    """Every non-empty document of a multi-document YAML stream."""
    return [doc for doc in yaml.safe_load_all(text) if doc]


def by_kind(objects: Iterable[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


def one(objects: Iterable[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = by_kind(objects, kind)
    assert len(found) == 1, f"expected one {kind}, found {len(found)}"
    return found[0]


def token_client(admin: client.ApiClient, token: str) -> client.ApiClient:
    """An ApiClient for the same server that authenticates with a bearer token only."""
    base = admin.configuration
    cfg = client.Configuration()
    cfg.host = base.host
    cfg.ssl_ca_cert = base.ssl_ca_cert
    cfg.verify_ssl = base.verify_ssl
    cfg.api_key = {"authorization": f"Bearer {token}"}
    return client.ApiClient(cfg)


def request_token(
    admin: client.ApiClient,
    namespace: str,
    service_account: str,
    bound_pod: Mapping[str, Any] | None = None,
) -> str:
    """A TokenRequest for ``service_account``, bound to ``bound_pod`` when given."""
    spec: dict[str, Any] = {"audiences": [], "expirationSeconds": 3600}
    if bound_pod is not None:
        spec["boundObjectRef"] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": bound_pod["metadata"]["name"],
            "uid": bound_pod["metadata"]["uid"],
        }
    response = client.CoreV1Api(admin).create_namespaced_service_account_token(
        service_account, namespace, {"spec": spec}
    )
    token: str = response.status.token
    return token


def can_i(
    api: client.ApiClient,
    verb: str,
    resource: str,
    *,
    group: str = "",
    subresource: str = "",
    namespace: str = "",
    name: str = "",
) -> bool:
    """SelfSubjectAccessReview: may the caller of ``api`` do this?"""
    review = client.AuthorizationV1Api(api).create_self_subject_access_review(
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {
                "resourceAttributes": {
                    "verb": verb,
                    "group": group,
                    "resource": resource,
                    "subresource": subresource,
                    "namespace": namespace,
                    "name": name,
                }
            },
        }
    )
    allowed: bool = review.status.allowed
    return allowed


def resource_slice(name: str, driver: str, node: str | None) -> dict[str, Any]:
    """A one-device ResourceSlice of ``node`` (None: a slice for all nodes)."""
    spec: dict[str, Any] = {
        "driver": driver,
        "pool": {"name": node or "shared", "generation": 1, "resourceSliceCount": 1},
        "devices": [{"name": "gpu-0"}],
    }
    if node is None:
        spec["allNodes"] = True
    else:
        spec["nodeName"] = node
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": spec,
    }


PER_DEVICE_NODE_LABEL = "resource.drakit.dev/node"


def per_device_slice(
    name: str, driver: str, label_node: str, device_nodes: Mapping[str, Any]
) -> dict[str, Any]:
    """A slice with per-device node selection, labelled as drakit's publisher labels it.

    ``device_nodes`` maps device name to its node field: a node name (str)
    for ``nodeName``, or True for ``allNodes``.
    """
    devices = [
        {"name": device, "allNodes": True} if node is True else {"name": device, "nodeName": node}
        for device, node in device_nodes.items()
    ]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name, "labels": {PER_DEVICE_NODE_LABEL: label_node}},
        "spec": {
            "driver": driver,
            "pool": {"name": f"{label_node}-pool", "generation": 1, "resourceSliceCount": 1},
            "perDeviceNodeSelection": True,
            "devices": devices,
        },
    }


def token_kubeconfig(admin_kubeconfig: str, token: str, dest: Path) -> Path:
    """A kubeconfig for the same cluster whose only credential is ``token``."""
    config = yaml.safe_load(Path(admin_kubeconfig).read_text())
    config["users"] = [{"name": "service-account", "user": {"token": token}}]
    for context in config["contexts"]:
        context["context"]["user"] = "service-account"
    dest.write_text(yaml.safe_dump(config))
    dest.chmod(0o600)
    return dest


def container_environment(
    container: Mapping[str, Any], downward: Mapping[str, str], base: Mapping[str, str]
) -> dict[str, str]:
    """A rendered container's environment, downward-API fields filled in from ``downward``."""
    env = dict(base)
    for var in container.get("env", []):
        if "value" in var:
            env[var["name"]] = var["value"]
        else:
            env[var["name"]] = downward[var["valueFrom"]["fieldRef"]["fieldPath"]]
    return env
