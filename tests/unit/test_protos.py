"""The generated kubelet API code speaks exactly the kubelet's wire names.

The expected names and numbers below are transcribed from k8s.io/kubelet
v0.37.2 (pkg/apis/{dra,dra-health,pluginregistration,podresources}/...); a mismatch means
the kubelet would get UNIMPLEMENTED or misread a field.
"""

from __future__ import annotations

import importlib

import pytest
from google.protobuf.descriptor import FieldDescriptor, FileDescriptor

from drakit.kubeletapi.gen.dra.v1 import api_pb2 as dra_v1

GEN = "drakit.kubeletapi.gen"

# module -> (proto file path, proto package)
FILES = {
    "dra.v1": ("k8s.io/kubelet/pkg/apis/dra/v1/api.proto", "k8s.io.kubelet.pkg.apis.dra.v1"),
    "dra.v1beta1": (
        "k8s.io/kubelet/pkg/apis/dra/v1beta1/api.proto",
        "k8s.io.kubelet.pkg.apis.dra.v1beta1",
    ),
    "pluginregistration.v1": (
        "k8s.io/kubelet/pkg/apis/pluginregistration/v1/api.proto",
        "pluginregistration",
    ),
    "dra_health.v1": ("k8s.io/kubelet/pkg/apis/dra-health/v1/api.proto", "v1"),
    "dra_health.v1alpha1": ("k8s.io/kubelet/pkg/apis/dra-health/v1alpha1/api.proto", "v1alpha1"),
    "podresources.v1": ("k8s.io/kubelet/pkg/apis/podresources/v1/api.proto", "v1"),
}

# Every method the kubelet calls: full path -> server streaming?
METHOD_PATHS = {
    "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources": False,
    "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodeUnprepareResources": False,
    "/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/NodePrepareResources": False,
    "/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/NodeUnprepareResources": False,
    "/pluginregistration.Registration/GetInfo": False,
    "/pluginregistration.Registration/NotifyRegistrationStatus": False,
    "/v1.DRAResourceHealth/NodeWatchResources": True,
    "/v1alpha1.DRAResourceHealth/NodeWatchResources": True,
    # The node plugin is the client of these (the kubelet serves them).
    "/v1.PodResourcesLister/List": False,
    "/v1.PodResourcesLister/GetAllocatableResources": False,
    "/v1.PodResourcesLister/Get": False,
}

_S, _B, _I64, _MSG, _ENUM, _U64 = (
    FieldDescriptor.TYPE_STRING,
    FieldDescriptor.TYPE_BOOL,
    FieldDescriptor.TYPE_INT64,
    FieldDescriptor.TYPE_MESSAGE,
    FieldDescriptor.TYPE_ENUM,
    FieldDescriptor.TYPE_UINT64,
)

_DRA_FIELDS = {
    "NodePrepareResourcesRequest": {"claims": (1, _MSG)},
    "NodePrepareResourcesResponse": {"claims": (1, _MSG)},
    "NodePrepareResourceResponse": {"devices": (1, _MSG), "error": (2, _S)},
    "Device": {
        "request_names": (1, _S),
        "pool_name": (2, _S),
        "device_name": (3, _S),
        "cdi_device_ids": (4, _S),
    },
    "NodeUnprepareResourcesRequest": {"claims": (1, _MSG)},
    "NodeUnprepareResourcesResponse": {"claims": (1, _MSG)},
    "NodeUnprepareResourceResponse": {"error": (1, _S)},
    "Claim": {"namespace": (1, _S), "uid": (2, _S), "name": (3, _S)},
}
_HEALTH_FIELDS = {
    "NodeWatchResourcesRequest": {},
    "DeviceIdentifier": {"pool_name": (1, _S), "device_name": (2, _S)},
    "DeviceHealth": {
        "device": (1, _MSG),
        "health": (2, _ENUM),
        "last_updated_time": (3, _I64),
        "health_check_timeout_seconds": (4, _I64),
        "message": (5, _S),
    },
    "NodeWatchResourcesResponse": {"devices": (1, _MSG)},
}
_PODRESOURCES_FIELDS = {
    "AllocatableResourcesRequest": {},
    "AllocatableResourcesResponse": {
        "devices": (1, _MSG),
        "cpu_ids": (2, _I64),
        "memory": (3, _MSG),
    },
    "ListPodResourcesRequest": {},
    "ListPodResourcesResponse": {"pod_resources": (1, _MSG)},
    "PodResources": {
        "name": (1, _S),
        "namespace": (2, _S),
        "containers": (3, _MSG),
        "cpu_ids": (4, _I64),
        "memory": (5, _MSG),
    },
    "ContainerResources": {
        "name": (1, _S),
        "devices": (2, _MSG),
        "cpu_ids": (3, _I64),
        "memory": (4, _MSG),
        "dynamic_resources": (5, _MSG),
    },
    "ContainerMemory": {"memory_type": (1, _S), "size": (2, _U64), "topology": (3, _MSG)},
    "ContainerDevices": {"resource_name": (1, _S), "device_ids": (2, _S), "topology": (3, _MSG)},
    "TopologyInfo": {"nodes": (1, _MSG)},
    "NUMANode": {"ID": (1, _I64)},
    "DynamicResource": {
        "claim_name": (2, _S),
        "claim_namespace": (3, _S),
        "claim_resources": (4, _MSG),
    },
    "ClaimResource": {
        "cdi_devices": (1, _MSG),
        "driver_name": (2, _S),
        "pool_name": (3, _S),
        "device_name": (4, _S),
        "share_id": (5, _S),
    },
    "CDIDevice": {"name": (1, _S)},
    "GetPodResourcesRequest": {"pod_name": (1, _S), "pod_namespace": (2, _S)},
    "GetPodResourcesResponse": {"pod_resources": (1, _MSG)},
}
FIELDS = {
    "dra.v1": {**_DRA_FIELDS, "Device": {**_DRA_FIELDS["Device"], "share_id": (5, _S)}},
    "dra.v1beta1": _DRA_FIELDS,
    "pluginregistration.v1": {
        "PluginInfo": {
            "type": (1, _S),
            "name": (2, _S),
            "endpoint": (3, _S),
            "supported_versions": (4, _S),
        },
        "RegistrationStatus": {"plugin_registered": (1, _B), "error": (2, _S)},
        "RegistrationStatusResponse": {},
        "InfoRequest": {},
    },
    "dra_health.v1": _HEALTH_FIELDS,
    "dra_health.v1alpha1": _HEALTH_FIELDS,
    "podresources.v1": _PODRESOURCES_FIELDS,
}


def _file(module: str) -> FileDescriptor:
    descriptor: FileDescriptor = importlib.import_module(f"{GEN}.{module}.api_pb2").DESCRIPTOR
    return descriptor


def test_all_apis_load_together_without_descriptor_pool_conflicts() -> None:
    names = [_file(module).name for module in FILES]
    assert names == [path for path, _ in FILES.values()]


@pytest.mark.parametrize("module", sorted(FILES))
def test_proto_file_has_the_kubelets_package(module: str) -> None:
    assert _file(module).package == FILES[module][1]


def test_method_paths_and_streaming_match_the_kubelets() -> None:
    found = {}
    for module in FILES:
        for service in _file(module).services_by_name.values():
            for method in service.methods:
                found[f"/{service.full_name}/{method.name}"] = method.server_streaming
    assert found == METHOD_PATHS


@pytest.mark.parametrize("module", sorted(FILES))
def test_message_fields_have_the_kubelets_names_numbers_and_types(module: str) -> None:
    file = _file(module)
    actual = {
        name: {f.name: (f.number, f.type) for f in message.fields}
        for name, message in file.message_types_by_name.items()
    }
    assert actual == FIELDS[module]


def test_v1_share_id_is_optional_with_explicit_presence() -> None:
    device = dra_v1.Device(pool_name="p", device_name="d")
    assert not device.HasField("share_id")
    device.share_id = ""
    assert device.HasField("share_id")


def test_podresources_share_id_is_optional_with_explicit_presence() -> None:
    from drakit.kubeletapi.gen.podresources.v1 import api_pb2 as podresources  # noqa: PLC0415

    resource = podresources.ClaimResource(driver_name="d", pool_name="p", device_name="x")
    assert not resource.HasField("share_id")


def test_health_enum_values_match_the_kubelets() -> None:
    for module in ("dra_health.v1", "dra_health.v1alpha1"):
        enum = _file(module).enum_types_by_name["HealthStatus"]
        assert {v.name: v.number for v in enum.values} == {
            "UNKNOWN": 0,
            "HEALTHY": 1,
            "UNHEALTHY": 2,
        }


class _RecordingChannel:
    """Stands in for a grpc.Channel and records which method paths a stub binds."""

    def __init__(self) -> None:
        self.paths: dict[str, bool] = {}

    def unary_unary(self, path: str, **_: object) -> None:
        self.paths[path] = False

    def unary_stream(self, path: str, **_: object) -> None:
        self.paths[path] = True


def test_generated_client_stubs_call_the_kubelets_method_paths() -> None:
    channel = _RecordingChannel()
    for module in FILES:
        grpc_module = importlib.import_module(f"{GEN}.{module}.api_pb2_grpc")
        for name in dir(grpc_module):
            if name.endswith("Stub"):
                getattr(grpc_module, name)(channel)
    assert channel.paths == METHOD_PATHS
