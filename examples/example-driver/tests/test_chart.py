"""The chart renders, with every value set upstream's e2e suite installs it with."""

from __future__ import annotations

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


def helm(helm_binary: Path, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    for name in ("CONFIG", "CACHE", "DATA"):
        env[f"HELM_{name}_HOME"] = str(tmp_path / name.lower())
    return subprocess.run(
        [str(helm_binary), *args], capture_output=True, text=True, env=env, timeout=120, check=False
    )


def render(helm_binary: Path, tmp_path: Path, values: list[str]) -> list[dict[str, Any]]:
    args = ["template", "dra-abc123", str(CHART), "--namespace", "dra-xyz789"]
    for value in [*BASE, *values]:
        args += ["--set", value]
    proc = helm(helm_binary, tmp_path, *args)
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


def test_chart_passes_helm_lint(helm_binary: Path, tmp_path: Path) -> None:
    proc = helm(helm_binary, tmp_path, "lint", str(CHART), "--strict")
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("name", sorted(SUITE_VALUE_SETS))
def test_every_suite_value_set_renders_a_labelled_plugin_on_the_host_network(
    helm_binary: Path, tmp_path: Path, name: str
) -> None:
    docs = render(helm_binary, tmp_path, SUITE_VALUE_SETS[name])
    daemonset = one(docs, "DaemonSet")
    pod = daemonset["spec"]["template"]
    assert daemonset["metadata"]["labels"]["app.kubernetes.io/component"] == "kubeletplugin"
    assert pod["metadata"]["labels"]["app.kubernetes.io/component"] == "kubeletplugin"
    for doc in docs:
        if doc["kind"] in ("DaemonSet", "Deployment"):
            spec = doc["spec"]["template"]["spec"]
            assert spec["hostNetwork"] is True, doc["metadata"]["name"]
            # No fixed host port: releases run side by side on one node.
            assert all("ports" not in c for c in spec["containers"]), doc["metadata"]["name"]
        if "namespace" in doc["metadata"]:
            assert doc["metadata"]["namespace"] == "dra-xyz789"


def test_device_class_is_named_after_the_driver_and_selects_its_devices(
    helm_binary: Path, tmp_path: Path
) -> None:
    docs = render(helm_binary, tmp_path, SUITE_VALUE_SETS["extended-resource"])
    device_class = one(docs, "DeviceClass")
    assert device_class["metadata"]["name"] == "dra-abc123.example.com"
    assert device_class["spec"]["selectors"] == [
        {"cel": {"expression": "device.driver == 'dra-abc123.example.com'"}}
    ]
    assert device_class["spec"]["extendedResourceName"] == "example.com/gpu-ext-resource"
    plain = one(render(helm_binary, tmp_path, []), "DeviceClass")
    assert "extendedResourceName" not in plain["spec"]


def test_values_reach_the_backend_config(helm_binary: Path, tmp_path: Path) -> None:
    assert backend_config(render(helm_binary, tmp_path, SUITE_VALUE_SETS["partitions-shared"])) == {
        "profile": "gpu",
        "numDevices": 2,
        "gpuPartitions": 4,
        "deviceStatus": False,
        "allowMultipleAllocations": True,
        "bindingConditions": False,
        "numaNodes": 8,
        "cpusPerNUMANode": 4,
    }
    cpu = backend_config(render(helm_binary, tmp_path, SUITE_VALUE_SETS["cpu"]))
    assert (cpu["profile"], cpu["numaNodes"], cpu["cpusPerNUMANode"]) == ("cpu", 1, 2)
    assert backend_config(render(helm_binary, tmp_path, SUITE_VALUE_SETS["device-status"]))[
        "deviceStatus"
    ]


def test_device_status_grants_status_writes_for_this_driver_only(
    helm_binary: Path, tmp_path: Path
) -> None:
    def rules(values: list[str]) -> list[dict[str, Any]]:
        role = one(render(helm_binary, tmp_path, values), "ClusterRole", "kubeletplugin")
        return list(role["rules"])

    assert not [r for r in rules([]) if "resourceclaims/status" in r["resources"]]
    granted = rules(SUITE_VALUE_SETS["device-status"])
    driver_rule = next(r for r in granted if r["resources"] == ["resourceclaims/driver"])
    assert driver_rule["resourceNames"] == ["dra-abc123.example.com"]
    assert set(driver_rule["verbs"]) == {"associated-node:update", "associated-node:patch"}


def test_controller_runs_only_with_plugins_and_gets_the_binding_check(
    helm_binary: Path, tmp_path: Path
) -> None:
    assert not [d for d in render(helm_binary, tmp_path, []) if d["kind"] == "Deployment"]
    docs = render(helm_binary, tmp_path, SUITE_VALUE_SETS["binding-conditions"])
    container = one(docs, "Deployment", "controller")["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["drakit", "driver-controller"]
    assert container["args"] == [
        "--driver-name=dra-abc123.example.com",
        "--binding-check=example_driver.controller:BindingConditions",
    ]
    assert backend_config(docs)["bindingConditions"] is True


def test_webhook_is_called_on_loopback_for_claims_and_templates(
    helm_binary: Path, tmp_path: Path
) -> None:
    assert not [d for d in render(helm_binary, tmp_path, []) if d["kind"].startswith("Validating")]
    docs = render(helm_binary, tmp_path, [*SUITE_VALUE_SETS["webhook"], "webhook.port=18443"])
    config = one(docs, "ValidatingWebhookConfiguration")
    (hook,) = config["webhooks"]
    assert hook["clientConfig"] == {
        "url": "https://127.0.0.1:18443/validate-resource-claim-parameters"
    }
    assert hook["failurePolicy"] == "Fail"
    (rule,) = hook["rules"]
    assert set(rule["apiVersions"]) == {"v1", "v1beta1"}
    assert set(rule["resources"]) == {"resourceclaims", "resourceclaimtemplates"}
    assert set(rule["operations"]) == {"CREATE", "UPDATE"}
    container = one(docs, "Deployment", "webhook")["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["drakit", "webhook"]
    assert f"--webhook-configuration={config['metadata']['name']}" in container["args"]
    assert "--port=18443" in container["args"]
    assert "--driver-name=gpu.example.com" in container["args"]
    role = one(docs, "ClusterRole", "webhook")
    assert role["rules"][0]["resourceNames"] == [config["metadata"]["name"]]


def test_api_server_values_point_every_component_at_the_host(
    helm_binary: Path, tmp_path: Path
) -> None:
    docs = render(
        helm_binary,
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
        (["deviceProfile=tpu"], 'deviceProfile: "tpu" is not a device profile'),
        (["controller.plugins={Foo}"], 'controller.plugins: unknown plugin "Foo"'),
        (["apiServer.host=127.0.0.1"], "apiServer.host and apiServer.port must be set together"),
    ],
)
def test_bad_values_are_refused_with_the_value_named(
    helm_binary: Path, tmp_path: Path, values: list[str], message: str
) -> None:
    args = ["template", "r", str(CHART)]
    for value in values:
        args += ["--set", value]
    proc = helm(helm_binary, tmp_path, *args)
    assert proc.returncode != 0
    assert message in proc.stderr


def test_pods_with_a_read_only_root_have_a_writable_memory_tmp_when_they_need_one(
    helm_binary: Path, tmp_path: Path
) -> None:
    """drakit webhook loads its in-memory keys through a private temporary folder: with a
    read-only root filesystem it needs /tmp, kept in memory (it crash-looped without)."""
    docs = render(helm_binary, tmp_path, SUITE_VALUE_SETS["webhook"])
    pod = one(docs, "Deployment", "webhook")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes[mounts["/tmp"]]["emptyDir"]["medium"] == "Memory"
