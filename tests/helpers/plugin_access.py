"""A ServiceAccount with a node plugin's permissions (the Helm chart's ClusterRole, device
status aside) and a kubeconfig that authenticates as it, for tests that take the permission
away from a running plugin and give it back."""

from __future__ import annotations

import contextlib
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

__all__ = ["NODE_PLUGIN_RULES", "PluginAccess", "plugin_access"]

#: deploy/helm/drakit/templates/node-plugin-rbac.yaml's rules (without device status).
NODE_PLUGIN_RULES = [
    {
        "apiGroups": ["resource.k8s.io"],
        "resources": ["resourceslices"],
        "verbs": ["get", "list", "watch", "create", "update", "delete"],
    },
    {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"], "verbs": ["get"]},
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]},
    {
        "apiGroups": ["", "events.k8s.io"],
        "resources": ["events"],
        "verbs": ["create", "patch", "update"],
    },
]


@dataclass
class PluginAccess:
    """The account's kubeconfig; :meth:`revoke` and :meth:`restore` its ClusterRoleBinding."""

    api: Any
    name: str
    namespace: str
    kubeconfig: Path

    def _binding(self) -> dict[str, Any]:
        subject = {"kind": "ServiceAccount", "name": self.name, "namespace": self.namespace}
        return {
            "metadata": {"name": self.name},
            "subjects": [subject],
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": self.name,
            },
        }

    def revoke(self) -> None:
        """Take every permission away (the binding goes)."""
        from kubernetes import client  # noqa: PLC0415

        client.RbacAuthorizationV1Api(self.api).delete_cluster_role_binding(self.name)

    def restore(self) -> None:
        from kubernetes import client  # noqa: PLC0415

        client.RbacAuthorizationV1Api(self.api).create_cluster_role_binding(self._binding())

    def delete(self) -> None:
        """Remove the binding and the role (the account goes with its namespace)."""
        from kubernetes import client  # noqa: PLC0415
        from kubernetes.client.exceptions import ApiException  # noqa: PLC0415

        rbac = client.RbacAuthorizationV1Api(self.api)
        for remove in (rbac.delete_cluster_role_binding, rbac.delete_cluster_role):
            with contextlib.suppress(ApiException):
                remove(self.name)


def plugin_access(
    api: Any,
    namespace: str,
    cluster_kubeconfig: str,
    folder: Path,
    rules: list[dict[str, Any]] | None = None,
) -> PluginAccess:
    """A fresh account in ``namespace`` bound to ``rules`` (default :data:`NODE_PLUGIN_RULES`),
    and a kubeconfig for it in ``folder`` (the cluster's, with the account's token as the
    only credential)."""
    from kubernetes import client  # noqa: PLC0415

    name = f"plugin-{uuid.uuid4().hex[:8]}"
    core, rbac = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api)
    core.create_namespaced_service_account(namespace, {"metadata": {"name": name}})
    granted = NODE_PLUGIN_RULES if rules is None else rules
    rbac.create_cluster_role({"metadata": {"name": name}, "rules": granted})
    token = core.create_namespaced_service_account_token(
        name, namespace, {"spec": {"expirationSeconds": 3600}}
    ).status.token
    config = yaml.safe_load(Path(cluster_kubeconfig).read_text())
    config["users"] = [{"name": name, "user": {"token": token}}]
    for context in config["contexts"]:
        context["context"]["user"] = name
    kubeconfig = folder / f"{name}.kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(config))
    kubeconfig.chmod(0o600)
    access = PluginAccess(api, name, namespace, kubeconfig)
    access.restore()
    return access
