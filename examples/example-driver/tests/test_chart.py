"""The chart renders, with every value set upstream's e2e suite installs it with; its
webhook is available (matchConditions, replicas, a Service, every claim version), its
RBAC is least privilege, and its values schema refuses bad values. (The same objects
against the real apiserver: test_chart_admission.py.)"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from example_paths import CHART

# buildHelmValues in upstream's test/e2e/driver_test.go: the base values every spec sets,
# then each spec's ExtraValues (--set syntax, so "true" and "4" are typed as helm types them).
BASE = [
    "driverName=dra-abc123.example.com",
    "namespaceOverride=dra-xyz789",
    "gpuDeviceStatus=false",
    "gpuAllowMultipleAllocations=false",
    "kubeletPlugin.numDevices=2",
    "webhook.enabled=false",
]
SUITE_VALUE_SETS = {
    "default": [],
    "device-status": ["gpuDeviceStatus=true"],
    "extended-resource": ["deviceClass.extendedResourceName=example.com/gpu-ext-resource"],
    "net": ["deviceProfile=net", "kubeletPlugin.numDevices=4"],
    "multiple-allocations": ["gpuAllowMultipleAllocations=true"],
    "partitions-shared": ["gpuAllowMultipleAllocations=true", "kubeletPlugin.gpuPartitions=4"],
    "partitions": ["kubeletPlugin.gpuPartitions=4"],
    "cpu": [
        "deviceProfile=cpu",
        "kubeletPlugin.cpu.numaNodes=1",
        "kubeletPlugin.cpu.cpusPerNUMANode=2",
    ],
    "webhook": ["driverName=gpu.example.com", "webhook.enabled=true"],
    "binding-conditions": [
        "kubeletPlugin.bindingConditions=true",
        "controller.plugins={BindingConditions}",
    ],
}


def helm(drakit_helm: Path, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    for name in ("CONFIG", "CACHE", "DATA"):
        env[f"HELM_{name}_HOME"] = str(tmp_path / name.lower())
    return subprocess.run(
        [str(drakit_helm), *args], capture_output=True, text=True, env=env, timeout=120, check=False
    )


#: The Kubernetes version `helm template` renders for (helm's own default is older than
#: any version drakit supports).
KUBE_VERSION = "1.37.2"


def template(
    drakit_helm: Path, tmp_path: Path, values: list[str], kube_version: str = KUBE_VERSION
) -> subprocess.CompletedProcess[str]:
    args = ["template", "dra-abc123", str(CHART), "--namespace", "dra-xyz789"]
    args += ["--kube-version", kube_version]
    for value in [*BASE, *values]:
        args += ["--set", value]
    return helm(drakit_helm, tmp_path, *args)


def render(
    drakit_helm: Path, tmp_path: Path, values: list[str], kube_version: str = KUBE_VERSION
) -> list[dict[str, Any]]:
    proc = template(drakit_helm, tmp_path, values, kube_version)
    assert proc.returncode == 0, proc.stderr
    return [doc for doc in yaml.safe_load_all(proc.stdout) if doc]


def one(docs: list[dict[str, Any]], kind: str, component: str | None = None) -> dict[str, Any]:
    found = [
        d
        for d in docs
        if d["kind"] == kind
        and (
            component is None or d["metadata"]["labels"]["app.kubernetes.io/component"] == component
        )
    ]
    assert len(found) == 1, f"{len(found)} {kind} objects ({component})"
    return found[0]


def backend_config(docs: list[dict[str, Any]]) -> dict[str, Any]:
    config = one(docs, "ConfigMap", "kubeletplugin")["data"]["config.yaml"]
    return dict(yaml.safe_load(config))


def test_chart_passes_helm_lint(drakit_helm: Path, tmp_path: Path) -> None:
    proc = helm(drakit_helm, tmp_path, "lint", str(CHART), "--strict")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_chart_refuses_a_kubernetes_without_resource_k8s_io_v1(
    drakit_helm: Path, tmp_path: Path
) -> None:
    proc = template(drakit_helm, tmp_path, [], "1.33.5")
    assert proc.returncode != 0
    assert "chart requires kubeVersion: >=1.34.0-0" in proc.stderr


@pytest.mark.parametrize("name", sorted(SUITE_VALUE_SETS))
def test_every_suite_value_set_renders_a_labelled_plugin_on_the_host_network(
    drakit_helm: Path, tmp_path: Path, name: str
) -> None:
    docs = render(drakit_helm, tmp_path, SUITE_VALUE_SETS[name])
    daemonset = one(docs, "DaemonSet")
    pod = daemonset["spec"]["template"]
    assert daemonset["metadata"]["labels"]["app.kubernetes.io/component"] == "kubeletplugin"
    assert pod["metadata"]["labels"]["app.kubernetes.io/component"] == "kubeletplugin"
    for doc in docs:
        component = doc["metadata"]["labels"].get("app.kubernetes.io/component")
        if doc["kind"] in ("DaemonSet", "Deployment") and component != "webhook":
            spec = doc["spec"]["template"]["spec"]
            assert spec["hostNetwork"] is True, doc["metadata"]["name"]
            # No fixed host port: releases run side by side on one node.
            assert all("ports" not in c for c in spec["containers"]), doc["metadata"]["name"]
        if "namespace" in doc["metadata"]:
            assert doc["metadata"]["namespace"] == "dra-xyz789"


def test_device_class_is_named_after_the_driver_and_selects_its_devices(
    drakit_helm: Path, tmp_path: Path
) -> None:
    docs = render(drakit_helm, tmp_path, SUITE_VALUE_SETS["extended-resource"])
    device_class = one(docs, "DeviceClass")
    assert device_class["metadata"]["name"] == "dra-abc123.example.com"
    assert device_class["spec"]["selectors"] == [
        {"cel": {"expression": "device.driver == 'dra-abc123.example.com'"}}
    ]
    assert device_class["spec"]["extendedResourceName"] == "example.com/gpu-ext-resource"
    plain = one(render(drakit_helm, tmp_path, []), "DeviceClass")
    assert "extendedResourceName" not in plain["spec"]


def test_values_reach_the_backend_config(drakit_helm: Path, tmp_path: Path) -> None:
    assert backend_config(render(drakit_helm, tmp_path, SUITE_VALUE_SETS["partitions-shared"])) == {
        "profile": "gpu",
        "numDevices": 2,
        "gpuPartitions": 4,
        "deviceStatus": False,
        "allowMultipleAllocations": True,
        "bindingConditions": False,
        "numaNodes": 8,
        "cpusPerNUMANode": 4,
    }
    cpu = backend_config(render(drakit_helm, tmp_path, SUITE_VALUE_SETS["cpu"]))
    assert (cpu["profile"], cpu["numaNodes"], cpu["cpusPerNUMANode"]) == ("cpu", 1, 2)
    assert backend_config(render(drakit_helm, tmp_path, SUITE_VALUE_SETS["device-status"]))[
        "deviceStatus"
    ]


def test_device_status_grants_status_writes_for_this_driver_only(
    drakit_helm: Path, tmp_path: Path
) -> None:
    def rules(values: list[str]) -> list[dict[str, Any]]:
        role = one(render(drakit_helm, tmp_path, values), "ClusterRole", "kubeletplugin")
        return list(role["rules"])

    assert not [r for r in rules([]) if "resourceclaims/status" in r["resources"]]
    granted = rules(SUITE_VALUE_SETS["device-status"])
    driver_rule = next(r for r in granted if r["resources"] == ["resourceclaims/driver"])
    assert driver_rule["resourceNames"] == ["dra-abc123.example.com"]
    # drakit writes status.devices with a JSON patch, never a PUT.
    assert driver_rule["verbs"] == ["associated-node:patch"]
    status_rule = next(r for r in granted if r["resources"] == ["resourceclaims/status"])
    assert status_rule["verbs"] == ["patch"]


@pytest.mark.parametrize("kube_version", ["1.34.0", "1.35.4"])
@pytest.mark.parametrize(
    ("values", "named"),
    [
        (SUITE_VALUE_SETS["device-status"], "gpuDeviceStatus=true"),
        (SUITE_VALUE_SETS["binding-conditions"], "controller.plugins=BindingConditions"),
    ],
)
def test_status_writes_are_refused_before_granular_status_authorization(
    drakit_helm: Path, tmp_path: Path, kube_version: str, values: list[str], named: str
) -> None:
    """Before 1.36 resourceclaims/status is every claim's whole status: a node's token (or
    the controller's) could rewrite any claim's allocation. drakit's chart refuses it too."""
    proc = template(drakit_helm, tmp_path, values, kube_version)
    assert proc.returncode != 0
    assert f"{named} needs Kubernetes 1.36 or newer" in proc.stderr
    assert f"on v{kube_version}" in proc.stderr
    assert render(drakit_helm, tmp_path, values, "1.36.0")


@pytest.mark.parametrize("name", sorted(SUITE_VALUE_SETS))
def test_no_value_set_grants_claim_status_writes_before_1_36(
    drakit_helm: Path, tmp_path: Path, name: str
) -> None:
    """The class: whatever the values, a chart that renders for 1.35 grants no
    resourceclaims/status to anyone."""
    proc = template(drakit_helm, tmp_path, SUITE_VALUE_SETS[name], "1.35.4")
    if proc.returncode != 0:
        assert "needs Kubernetes 1.36 or newer" in proc.stderr
        return
    for doc in yaml.safe_load_all(proc.stdout):
        for rule in (
            (doc or {}).get("rules", [])
            if (doc or {}).get("kind") in ("ClusterRole", "Role")
            else []
        ):
            assert "resourceclaims/status" not in rule["resources"], doc["metadata"]["name"]


def test_controller_runs_only_with_plugins_and_gets_the_binding_check(
    drakit_helm: Path, tmp_path: Path
) -> None:
    assert not [d for d in render(drakit_helm, tmp_path, []) if d["kind"] == "Deployment"]
    docs = render(drakit_helm, tmp_path, SUITE_VALUE_SETS["binding-conditions"])
    container = one(docs, "Deployment", "controller")["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["drakit", "driver-controller"]
    assert container["args"] == [
        "--driver-name=dra-abc123.example.com",
        "--binding-check=example_driver.controller:BindingConditions",
    ]
    assert backend_config(docs)["bindingConditions"] is True


def webhook_docs(drakit_helm: Path, tmp_path: Path, *values: str) -> list[dict[str, Any]]:
    return render(drakit_helm, tmp_path, [*SUITE_VALUE_SETS["webhook"], *values])


def test_webhook_is_reached_through_a_service_with_its_dns_name_in_the_certificate(
    drakit_helm: Path, tmp_path: Path
) -> None:
    assert not [d for d in render(drakit_helm, tmp_path, []) if "Webhook" in d["kind"]]
    docs = webhook_docs(drakit_helm, tmp_path, "webhook.port=18443")
    config = one(docs, "ValidatingWebhookConfiguration")
    (hook,) = config["webhooks"]
    name = config["metadata"]["name"]
    assert hook["clientConfig"] == {"service": {
        "namespace": "dra-xyz789", "name": name, "port": 443,
        "path": "/validate-resource-claim-parameters",
    }}  # fmt: skip
    service = one(docs, "Service", "webhook")
    assert service["spec"]["ports"] == [
        {"name": "https", "port": 443, "targetPort": "https", "protocol": "TCP"}
    ]
    pod = one(docs, "Deployment", "webhook")["spec"]["template"]["spec"]
    assert "hostNetwork" not in pod
    (container,) = pod["containers"]
    assert container["ports"] == [{"name": "https", "containerPort": 18443, "protocol": "TCP"}]
    assert container["command"] == ["drakit", "webhook"]
    assert f"--dns-name={name}.dra-xyz789.svc" in container["args"]
    assert f"--webhook-configuration={name}" in container["args"]
    assert "--driver-name=gpu.example.com" in container["args"]
    env = {e["name"]: e for e in container["env"]}
    assert env["BIND_ADDRESS"]["valueFrom"] == {"fieldRef": {"fieldPath": "status.podIP"}}


def test_webhook_on_the_host_network_is_called_on_loopback_one_replica_per_node(
    drakit_helm: Path, tmp_path: Path
) -> None:
    docs = webhook_docs(drakit_helm, tmp_path, "webhook.endpoint=hostNetwork", "webhook.port=18443")
    (hook,) = one(docs, "ValidatingWebhookConfiguration")["webhooks"]
    assert hook["clientConfig"] == {
        "url": "https://127.0.0.1:18443/validate-resource-claim-parameters"
    }
    assert not [d for d in docs if d["kind"] == "Service"]
    deployment = one(docs, "Deployment", "webhook")
    pod = deployment["spec"]["template"]["spec"]
    assert pod["hostNetwork"] is True
    anti = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert anti[0]["topologyKey"] == "kubernetes.io/hostname"
    # A node's port is free only once its old pod has gone: one node at a time.
    assert deployment["spec"]["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1},
    }
    # One replica can only be replaced so; Recreate makes `helm install --wait` wait for
    # it (upstream's suite relies on that: with matchConditions its readiness probe, a
    # claim without config, no longer reaches the webhook).
    single = webhook_docs(drakit_helm, tmp_path, "webhook.endpoint=hostNetwork",
                          "webhook.replicas=1")  # fmt: skip
    assert one(single, "Deployment", "webhook")["spec"]["strategy"] == {"type": "Recreate"}
    (container,) = pod["containers"]
    assert {"name": "BIND_ADDRESS", "value": "127.0.0.1"} in container["env"]
    for probe in ("readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"]["host"] == "127.0.0.1"


def test_webhook_waits_only_for_writes_of_this_drivers_config(
    drakit_helm: Path, tmp_path: Path
) -> None:
    """Without matchConditions every claim and template write in the cluster, every
    finalizer update included, failed while the webhook was down."""
    (hook,) = one(webhook_docs(drakit_helm, tmp_path), "ValidatingWebhookConfiguration")["webhooks"]
    conditions = {c["name"]: c["expression"] for c in hook["matchConditions"]}
    assert set(conditions) == {"carries-this-drivers-config", "writes-the-config"}
    assert (
        "c.?opaque.?driver.orValue('') == 'gpu.example.com'"
        in conditions["carries-this-drivers-config"]
    )
    assert "oldObject" in conditions["writes-the-config"]
    assert hook["failurePolicy"] == "Fail"


def test_webhook_rules_cover_every_served_claim_version(drakit_helm: Path, tmp_path: Path) -> None:
    (hook,) = one(webhook_docs(drakit_helm, tmp_path), "ValidatingWebhookConfiguration")["webhooks"]
    (rule,) = hook["rules"]
    assert set(rule["apiVersions"]) == {"v1", "v1beta2", "v1beta1"}
    assert set(rule["resources"]) == {"resourceclaims", "resourceclaimtemplates"}
    assert set(rule["operations"]) == {"CREATE", "UPDATE"}
    # A version served later is converted to a listed one instead of bypassing the check.
    assert hook["matchPolicy"] == "Equivalent"


def test_webhook_runs_replicas_that_roll_and_survive_a_drain(
    drakit_helm: Path, tmp_path: Path
) -> None:
    docs = webhook_docs(drakit_helm, tmp_path)
    deployment = one(docs, "Deployment", "webhook")
    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
    }
    pod = deployment["spec"]["template"]["spec"]
    preferred = pod["affinity"]["podAntiAffinity"][
        "preferredDuringSchedulingIgnoredDuringExecution"
    ]
    assert preferred[0]["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert pod["topologySpreadConstraints"][0]["whenUnsatisfiable"] == "ScheduleAnyway"
    budget = one(docs, "PodDisruptionBudget", "webhook")
    assert budget["spec"]["maxUnavailable"] == 1
    assert budget["spec"]["selector"] == deployment["spec"]["selector"]
    single = webhook_docs(drakit_helm, tmp_path, "webhook.replicas=1")
    assert not [d for d in single if d["kind"] == "PodDisruptionBudget"]  # would block drains


def test_webhook_liveness_checks_nothing_readiness_depends_on(
    drakit_helm: Path, tmp_path: Path
) -> None:
    """Liveness on /readyz restarted every replica when the apiserver was unreachable (and
    each restart made a new CA)."""
    (container,) = one(webhook_docs(drakit_helm, tmp_path), "Deployment", "webhook")["spec"][
        "template"
    ]["spec"]["containers"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/livez"


def test_webhook_replicas_share_one_ca_secret_they_alone_may_touch(
    drakit_helm: Path, tmp_path: Path
) -> None:
    docs = webhook_docs(drakit_helm, tmp_path)
    name = one(docs, "ValidatingWebhookConfiguration")["metadata"]["name"]
    (container,) = one(docs, "Deployment", "webhook")["spec"]["template"]["spec"]["containers"]
    assert f"--ca-secret=dra-xyz789/{name}-ca" in container["args"]
    role = one(docs, "Role", "webhook")
    assert role["metadata"]["namespace"] == "dra-xyz789"
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["secrets"], "resourceNames": [f"{name}-ca"],
         "verbs": ["get", "update"]},
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]},
    ]  # fmt: skip
    policies = {p["metadata"]["name"]: p for p in docs if p["kind"] == "ValidatingAdmissionPolicy"}
    bindings = {b["spec"]["policyName"] for b in docs if b["kind"].endswith("PolicyBinding")}
    assert {f"{name}-ca-secret", f"{name}-configuration"} <= set(policies) & bindings
    user = f"system:serviceaccount:dra-xyz789:{name}"
    for policy in (policies[f"{name}-ca-secret"], policies[f"{name}-configuration"]):
        assert (
            policy["spec"]["matchConditions"][0]["expression"]
            == f'request.userInfo.username == "{user}"'
        )


def test_webhook_may_read_and_patch_only_its_own_configuration(
    drakit_helm: Path, tmp_path: Path
) -> None:
    docs = webhook_docs(drakit_helm, tmp_path)
    name = one(docs, "ValidatingWebhookConfiguration")["metadata"]["name"]
    role = one(docs, "ClusterRole", "webhook")
    assert role["rules"] == [{
        "apiGroups": ["admissionregistration.k8s.io"],
        "resources": ["validatingwebhookconfigurations"],
        "resourceNames": [name], "verbs": ["get", "patch"],
    }]  # fmt: skip


def test_kubelet_plugin_slice_writes_are_confined_to_its_own_node(
    drakit_helm: Path, tmp_path: Path
) -> None:
    """The plugin's RBAC comment promised this policy, and there was none."""
    docs = render(drakit_helm, tmp_path, [])
    policy = one(docs, "ValidatingAdmissionPolicy", "kubeletplugin")
    binding = one(docs, "ValidatingAdmissionPolicyBinding", "kubeletplugin")
    assert binding["spec"] == {
        "policyName": policy["metadata"]["name"],
        "validationActions": ["Deny"],
    }
    account = one(docs, "ServiceAccount", "kubeletplugin")["metadata"]["name"]
    assert policy["spec"]["matchConditions"][0]["expression"] == (
        f'request.userInfo.username == "system:serviceaccount:dra-xyz789:{account}"'
    )
    (rule,) = policy["spec"]["matchConstraints"]["resourceRules"]
    assert rule["resources"] == ["resourceslices"]
    assert set(rule["operations"]) == {"CREATE", "UPDATE", "DELETE"}
    off = render(drakit_helm, tmp_path, ["kubeletPlugin.admissionPolicy=false"])
    assert not [d for d in off if d["kind"].startswith("ValidatingAdmissionPolicy")]


def test_api_server_values_point_every_component_at_the_host(
    drakit_helm: Path, tmp_path: Path
) -> None:
    docs = render(
        drakit_helm,
        tmp_path,
        [
            *SUITE_VALUE_SETS["binding-conditions"],
            "webhook.enabled=true",
            "apiServer.host=127.0.0.1",
            "apiServer.port=6443",
        ],
    )
    workloads = [d for d in docs if d["kind"] in ("DaemonSet", "Deployment")]
    assert len(workloads) == 3
    for doc in workloads:
        env = {
            e["name"]: e.get("value")
            for e in doc["spec"]["template"]["spec"]["containers"][0]["env"]
        }
        assert (env["KUBERNETES_SERVICE_HOST"], env["KUBERNETES_SERVICE_PORT"]) == (
            "127.0.0.1",
            "6443",
        )


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (["deviceProfile=tpu"], "at '/deviceProfile': value must be one of 'gpu', 'cpu', 'net'"),
        (["controller.plugins={Foo}"], "at '/controller/plugins/0': value must be"),
        (["webhook.typo=1"], "at '/webhook': additional properties 'typo' not allowed"),
        (["kubeletPlugin.numDevices=many"], "at '/kubeletPlugin/numDevices': got string, want"),
        (["webhook.replicas=0"], "at '/webhook/replicas': minimum: got 0, want 1"),
        (["webhook.endpoint=nodePort"], "at '/webhook/endpoint': value must be one of"),
        (["webhook.failurePolicy=Allow"], "at '/webhook/failurePolicy': value must be one of"),
        (["cdiRoot=relative"], "at '/cdiRoot': 'relative' does not match"),
        (["driverName=Not_A_Name"], "at '/driverName': 'Not_A_Name' does not match"),
        (["apiServer.host=127.0.0.1"], "apiServer.host and apiServer.port must be set together"),
    ],
)
def test_bad_values_are_refused_with_the_value_named(
    drakit_helm: Path, tmp_path: Path, values: list[str], message: str
) -> None:
    """values.yaml promised a values.schema.json that did not exist: a typo or a wrongly
    typed value rendered silently. (helm lint reports a template's own `fail` as
    information only; the schema fails it.)"""
    schema = message.startswith("at '")
    for command in ("template", "lint") if schema else ("template",):
        args = [command, *(["r"] if command == "template" else []), str(CHART)]
        args += ["--kube-version", KUBE_VERSION]
        for value in values:
            args += ["--set", value]
        proc = helm(drakit_helm, tmp_path, *args)
        assert proc.returncode != 0, command
        assert message in proc.stdout + proc.stderr, (command, proc.stdout + proc.stderr)


def test_every_value_is_in_the_schema_with_a_description() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())

    def walk(node: dict[str, Any], props: dict[str, Any], path: str) -> list[str]:
        missing = []
        for key, value in node.items():
            prop = props.get(key)
            if prop is None or "description" not in prop:
                missing.append(f"{path}{key}")
            elif isinstance(value, dict) and "properties" in prop:
                missing += walk(value, prop["properties"], f"{path}{key}.")
        return missing

    assert walk(values, schema["properties"], "") == []


def test_pods_with_a_read_only_root_have_a_writable_memory_tmp_when_they_need_one(
    drakit_helm: Path, tmp_path: Path
) -> None:
    """drakit webhook loads its in-memory keys through a private temporary folder: with a
    read-only root filesystem it needs /tmp, kept in memory (it crash-looped without)."""
    docs = render(drakit_helm, tmp_path, SUITE_VALUE_SETS["webhook"])
    pod = one(docs, "Deployment", "webhook")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes[mounts["/tmp"]]["emptyDir"]["medium"] == "Memory"
