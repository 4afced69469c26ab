"""The chart as helm sees it: lint, render, values schema, rendered manifests."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest
from conftest import Installed
from deploy_support import CHART, KUBE_VERSION, ROOT, Helm, by_kind, load_objects, one

pytestmark = pytest.mark.integration


def _env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


def test_helm_lint_passes_in_strict_mode(helm: Helm) -> None:
    proc = helm.run("lint", "--strict", "--kube-version", KUBE_VERSION, str(CHART))
    assert "1 chart(s) linted, 0 chart(s) failed" in proc.stdout


def test_default_render_holds_every_component(helm: Helm) -> None:
    objects = helm.render()
    kinds = sorted(o["kind"] for o in objects)
    assert kinds == sorted(
        [
            "ServiceAccount",
            "ServiceAccount",
            "ClusterRole",
            "ClusterRole",
            "ClusterRoleBinding",
            "ClusterRoleBinding",
            "Role",
            "Role",
            "RoleBinding",
            "RoleBinding",
            "DaemonSet",
            "Deployment",
            "DeviceClass",
            "ValidatingAdmissionPolicy",
            "ValidatingAdmissionPolicyBinding",
            "NetworkPolicy",
            "NetworkPolicy",
        ]
    )
    namespaces = {
        (o["kind"], o["metadata"].get("namespace")) for o in objects if o["kind"] != "DeviceClass"
    }
    assert {namespace for _, namespace in namespaces} <= {"drakit-system", "kube-system", None}
    # Only the read of kube-controller-manager's Lease lives outside the release namespace.
    assert {kind for kind, namespace in namespaces if namespace == "kube-system"} == {
        "Role",
        "RoleBinding",
    }


def test_scoped_generation_may_read_exactly_the_controller_managers_lease(helm: Helm) -> None:
    objects = helm.render()
    (role,) = [r for r in by_kind(objects, "Role") if r["metadata"]["namespace"] == "kube-system"]
    assert role["rules"] == [
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": ["kube-controller-manager"],
            "verbs": ["get"],
        }
    ]
    (binding,) = [
        b for b in by_kind(objects, "RoleBinding") if b["metadata"]["namespace"] == "kube-system"
    ]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "drakit-controller", "namespace": "drakit-system"}
    ]
    args = one(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--controller-manager-lease=kube-system/kube-controller-manager" in args


@pytest.mark.parametrize(
    "values",
    [
        {"controller.claimGeneration": "all"},
        {"controller.controllerManagerLease": ""},
    ],
)
def test_no_lease_read_is_granted_where_it_is_not_used(helm: Helm, values: dict[str, str]) -> None:
    objects = helm.render(values=values)
    assert all(o["metadata"].get("namespace") != "kube-system" for o in objects)


def test_node_plugin_daemonset_follows_the_kubelet_plugin_contract(helm: Helm) -> None:
    ds = one(helm.render(), "DaemonSet")
    assert ds["spec"]["updateStrategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
    }
    pod = ds["spec"]["template"]["spec"]
    assert pod["priorityClassName"] == "system-node-critical"
    container = pod["containers"][0]
    env = _env(container)
    assert env["NODE_NAME"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
    assert env["POD_UID"] == {"fieldRef": {"fieldPath": "metadata.uid"}}
    assert env["DRIVER_NAME"] == "gpu.drakit.dev"
    host_paths = {v["name"]: v["hostPath"]["path"] for v in pod["volumes"] if "hostPath" in v}
    assert host_paths == {
        "plugins-registry": "/var/lib/kubelet/plugins_registry",
        "plugin-data": "/var/lib/kubelet/plugins/gpu.drakit.dev",
        "cdi": "/var/run/cdi",
    }
    # Mounted at the host paths: the DRA socket path reported to the kubelet is a host path.
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert all(mounts[name] == path for name, path in host_paths.items())
    assert container["livenessProbe"]["exec"]["command"] == [
        "python",
        "-m",
        "drakit.node_plugin.probe",
    ]
    assert container["securityContext"].get("privileged") is not True


def test_kubelet_dir_moves_every_kubelet_folder(helm: Helm) -> None:
    ds = one(helm.render(values={"kubeletDir": "/data/kubelet/"}), "DaemonSet")
    pod = ds["spec"]["template"]["spec"]
    host_paths = {v["hostPath"]["path"] for v in pod["volumes"] if "hostPath" in v}
    assert host_paths == {
        "/data/kubelet/plugins_registry",
        "/data/kubelet/plugins/gpu.drakit.dev",
        "/var/run/cdi",
    }
    env = _env(pod["containers"][0])
    assert env["KUBELET_REGISTRAR_DIRECTORY_PATH"] == "/data/kubelet/plugins_registry"
    assert env["KUBELET_PLUGINS_DIRECTORY_PATH"] == "/data/kubelet/plugins"


def test_node_plugin_mounts_only_its_own_drivers_folder_of_the_kubelet_plugins_dir(
    helm: Helm,
) -> None:
    ds = one(helm.render(values={"driverName": "net.example.com"}), "DaemonSet")
    pod = ds["spec"]["template"]["spec"]
    container = pod["containers"][0]
    host_paths = sorted(v["hostPath"]["path"] for v in pod["volumes"] if "hostPath" in v)
    # Not /var/lib/kubelet/plugins itself: other drivers' sockets and state live there.
    assert [p for p in host_paths if p.startswith("/var/lib/kubelet/plugins/")] == [
        "/var/lib/kubelet/plugins/net.example.com"
    ]
    assert "/var/lib/kubelet/plugins" not in host_paths
    mounts = sorted(m["mountPath"] for m in container["volumeMounts"])
    assert "/var/lib/kubelet/plugins/net.example.com" in mounts
    assert "/var/lib/kubelet/plugins" not in mounts
    # The plugin still derives its folder from the parent and its driver name.
    assert _env(container)["KUBELET_PLUGINS_DIRECTORY_PATH"] == "/var/lib/kubelet/plugins"


UNPRIVILEGED = {
    "runAsUser": 0,
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}


@pytest.mark.parametrize("backend", ["example", "hostdev"])
def test_node_plugin_runs_unprivileged_for_every_backend_by_default(
    helm: Helm, backend: str
) -> None:
    ds = one(helm.render(values={"nodePlugin.backend": backend}), "DaemonSet")
    pod = ds["spec"]["template"]["spec"]
    assert pod["containers"][0]["securityContext"] == UNPRIVILEGED
    assert pod["automountServiceAccountToken"] is True


def test_hostdev_backend_sees_the_host_dev_read_only_with_its_config_and_device_class(
    helm: Helm,
) -> None:
    objects = helm.render(
        values={
            "driverName": "hostdev.drakit.dev",
            "nodePlugin.backend": "hostdev",
            "nodePlugin.backendConfig.devices[0].glob": "/dev/fuse",
        }
    )
    pod = one(objects, "DaemonSet")["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["securityContext"] == UNPRIVILEGED
    (dev,) = [m for m in container["volumeMounts"] if m["mountPath"] == "/host/dev"]
    assert dev["readOnly"] is True
    volume = next(v for v in pod["volumes"] if v["name"] == dev["name"])
    assert volume["hostPath"] == {"path": "/dev", "type": "Directory"}
    assert _env(container)["BACKEND_CONFIG"] == "/etc/drakit/backend/config.yaml"
    config = one(objects, "ConfigMap")
    # JSON, which the plugin reads without PyYAML (kubeapi.documents)
    assert json.loads(config["data"]["config.yaml"]) == {
        "devices": [{"glob": "/dev/fuse"}],
        "hostRoot": "/host",
    }
    device_class = one(objects, "DeviceClass")
    assert device_class["metadata"]["name"] == "hostdev.drakit.dev"
    assert device_class["spec"]["selectors"] == [
        {"cel": {"expression": 'device.driver == "hostdev.drakit.dev"'}}
    ]


def test_privileged_node_plugin_only_when_explicitly_asked_for(helm: Helm) -> None:
    values = {"nodePlugin.backend": "hostdev", "nodePlugin.privileged": "true"}
    ds = one(helm.render(values=values), "DaemonSet")
    container = ds["spec"]["template"]["spec"]["containers"][0]
    assert container["securityContext"] == {
        "runAsUser": 0,
        "privileged": True,
        "readOnlyRootFilesystem": True,
    }
    ds = one(helm.render(values={"nodePlugin.privileged": "false"}), "DaemonSet")
    assert ds["spec"]["template"]["spec"]["containers"][0]["securityContext"] == UNPRIVILEGED


def test_service_accounts_mount_no_token_unless_the_pod_asks(helm: Helm) -> None:
    objects = helm.render()
    for account in by_kind(objects, "ServiceAccount"):
        assert account["automountServiceAccountToken"] is False
    for kind in ("DaemonSet", "Deployment"):
        pod = one(objects, kind)["spec"]["template"]["spec"]
        assert pod["automountServiceAccountToken"] is True
        assert set(pod["containers"][0]["resources"]) == {"requests", "limits"}


def test_controller_runs_two_replicas_with_leader_election_as_non_root(helm: Helm) -> None:
    deployment = one(helm.render(), "Deployment")
    assert deployment["spec"]["replicas"] == 2
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    container = pod["containers"][0]
    assert container["command"] == ["drakit", "controller"]
    assert "--leader-elect" in container["args"]
    assert "--claim-generation=scoped" in container["args"]


def test_device_status_grants_only_this_drivers_granular_verbs(helm: Helm) -> None:
    roles = by_kind(helm.render(values={"nodePlugin.deviceStatus": "true"}), "ClusterRole")
    plugin_role = next(r for r in roles if r["metadata"]["name"] == "drakit-node-plugin")
    driver_rules = [r for r in plugin_role["rules"] if "resourceclaims/driver" in r["resources"]]
    assert driver_rules == [
        {
            "apiGroups": ["resource.k8s.io"],
            "resources": ["resourceclaims/driver"],
            "resourceNames": ["gpu.drakit.dev"],
            "verbs": ["associated-node:patch"],
        }
    ]


def test_device_status_is_refused_before_granular_status_authorization(helm: Helm) -> None:
    values = {"nodePlugin.deviceStatus": "true"}
    proc = helm.template(values=values, kube_version="v1.35.4", check=False)
    assert proc.returncode != 0
    assert "nodePlugin.deviceStatus=true needs Kubernetes 1.36 or newer" in proc.stderr
    assert "DRAResourceClaimGranularStatusAuthorization" in proc.stderr
    assert "on v1.35.4 resourceclaims/status would let every node plugin" in proc.stderr
    # Without deviceStatus 1.35 is fine; from 1.36 on deviceStatus is granted.
    helm.template(kube_version="v1.35.4")
    roles = by_kind(
        load_objects(helm.template(values=values, kube_version="v1.36.0").stdout), "ClusterRole"
    )
    plugin_role = next(r for r in roles if r["metadata"]["name"] == "drakit-node-plugin")
    assert any("resourceclaims/status" in r["resources"] for r in plugin_role["rules"])


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        (
            "controller.claimGeneration",
            "sometimes",
            "at '/controller/claimGeneration': value must be one of 'all', 'scoped', 'off'",
        ),
        ("driverName", "Not_A_DNS_Name", "at '/driverName': 'Not_A_DNS_Name' does not match"),
        ("controller.replicas", "0", "at '/controller/replicas': minimum: got 0, want 1"),
        (
            "controller.controllerManagerLease",
            "kube-controller-manager",
            "at '/controller/controllerManagerLease': 'kube-controller-manager' does not match",
        ),
        ("kubeletDir", "relative/kubelet", "at '/kubeletDir': 'relative/kubelet' does not match"),
        ("nodePlugin.typo", "1", "at '/nodePlugin': additional properties 'typo' not allowed"),
    ],
)
def test_values_schema_rejects_a_bad_value_naming_it(
    helm: Helm, key: str, value: str, expected: str
) -> None:
    proc = helm.template(values={key: value}, check=False)
    assert proc.returncode != 0
    assert "values don't meet the specifications of the schema" in proc.stderr
    assert expected in proc.stderr


def _undocumented(schema: dict[str, Any], path: str, definitions: dict[str, Any]) -> list[str]:
    missing: list[str] = []
    for name, prop in schema.get("properties", {}).items():
        where = f"{path}.{name}" if path else name
        if "description" not in prop:
            missing.append(where)
        target = prop
        if "$ref" in prop:
            target = definitions[prop["$ref"].rsplit("/", 1)[-1]]
        missing += _undocumented(target, where, definitions)
    return missing


def test_every_value_in_the_schema_is_documented() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    assert _undocumented(schema, "", schema["definitions"]) == []


def test_rendered_manifests_match_the_chart() -> None:
    proc = subprocess.run(
        [str(ROOT / "hack" / "verify-manifests.sh")],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SKIPPED" not in proc.stderr


def test_install_onto_the_cluster_prints_where_to_look(installed: Installed) -> None:
    notes = installed.install_output
    assert "STATUS: deployed" in notes
    assert f"kubectl get resourceslices --field-selector spec.driver={installed.driver}" in notes
    assert f"deviceClassName: {installed.driver}" in notes


def test_api_server_values_point_both_components_past_the_service_network(helm: Helm) -> None:
    objects = helm.render(values={"apiServer.host": "127.0.0.1", "apiServer.port": "6443"})
    for kind in ("DaemonSet", "Deployment"):
        env = _env(one(objects, kind)["spec"]["template"]["spec"]["containers"][0])
        assert env["KUBERNETES_SERVICE_HOST"] == "127.0.0.1"
        assert env["KUBERNETES_SERVICE_PORT"] == "6443"
    default = helm.render()
    for kind in ("DaemonSet", "Deployment"):
        assert "KUBERNETES_SERVICE_HOST" not in _env(
            one(default, kind)["spec"]["template"]["spec"]["containers"][0]
        )


def test_api_server_host_without_port_is_refused_with_a_reason(helm: Helm) -> None:
    proc = helm.template(values={"apiServer.host": "10.0.0.1"}, check=False)
    assert proc.returncode != 0
    assert "apiServer.host and apiServer.port must be set together" in proc.stderr


def test_host_network_values_put_each_component_on_the_node_network(helm: Helm) -> None:
    objects = helm.render(
        values={"nodePlugin.hostNetwork": "true", "controller.hostNetwork": "true"}
    )
    for kind in ("DaemonSet", "Deployment"):
        pod = one(objects, kind)["spec"]["template"]["spec"]
        assert pod["hostNetwork"] is True
        assert pod["dnsPolicy"] == "ClusterFirstWithHostNet"
    for kind in ("DaemonSet", "Deployment"):
        assert "hostNetwork" not in one(helm.render(), kind)["spec"]["template"]["spec"]


def test_node_plugin_runs_as_root_with_every_backend(helm: Helm) -> None:
    """The image's default user cannot create sockets in the kubelet's root-owned folders;
    a real node showed the privileged hostdev plugin failing exactly there."""
    for backend in ("example", "hostdev"):
        ds = one(helm.render(values={"nodePlugin.backend": backend}), "DaemonSet")
        context = ds["spec"]["template"]["spec"]["containers"][0]["securityContext"]
        assert context["runAsUser"] == 0, backend


def test_host_network_declares_no_ports_so_a_rolling_update_can_surge(helm: Helm) -> None:
    """On the host network a declared port is a host port, and the scheduler refuses the
    surge pod of a rolling update (seen on a real node: the rollout never finished)."""
    objects = helm.render(
        values={"nodePlugin.hostNetwork": "true", "controller.hostNetwork": "true"}
    )
    for kind in ("DaemonSet", "Deployment"):
        assert "ports" not in one(objects, kind)["spec"]["template"]["spec"]["containers"][0]
    for kind in ("DaemonSet", "Deployment"):
        assert "ports" in one(helm.render(), kind)["spec"]["template"]["spec"]["containers"][0]
