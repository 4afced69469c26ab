"""Which Kubernetes drakit is talking to, and what that minor supports.

drakit supports several Kubernetes minors (``SUPPORTED_MINORS``). Components read the
apiserver's version, its served ``resource.k8s.io`` versions and, where the caller may read
``/metrics``, its enabled feature gates once at start (``detect``), and then decide from that:

- which allocation features the controller's allocator uses (``allocator_features``);
- which optional ResourceSlice fields the publisher writes (``slice_fields``), so that a
  field the apiserver would drop is never sent rather than noticed afterwards;
- which DRAResourceHealth gRPC service versions a kubelet of that minor calls
  (``kubelet_health_services``).

The per-minor facts come from each release's ``pkg/features/kube_features.go`` (gate
defaults) and ``pkg/kubelet/cm/dra/plugin`` (gRPC services the kubelet knows).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from drakit.allocator.features import Features
from drakit.kubeapi.errors import ApiError
from drakit.telemetry.logs import get_logger

__all__ = [
    "NODE_ALLOCATABLE_MAPPINGS",
    "NODE_ALLOCATABLE_RESOURCES",
    "SUPPORTED_MINORS",
    "ClusterInfo",
    "MinorFacts",
    "SliceFields",
    "UnsupportedVersionError",
    "allocator_features",
    "detect",
    "facts_for",
    "features_for_cluster",
    "kubelet_health_services",
    "kubelet_health_services_for_node",
    "parse_feature_metrics",
    "parse_minor",
    "served_version",
    "slice_fields",
]

logger = get_logger(__name__)


class UnsupportedVersionError(ValueError):
    """The apiserver's version is outside what drakit supports."""


@dataclass(frozen=True)
class MinorFacts:
    """What one Kubernetes minor offers drakit (defaults of an unmodified cluster)."""

    minor: int
    #: DRA feature gates this minor knows at all (a gate it does not know must never be
    #: passed to its components: they refuse to start).
    known_gates: frozenset[str]
    #: Gates that are on by default (GA or beta-on).
    default_on: frozenset[str]
    #: DRAResourceHealth services the kubelet of this minor can call, newest first.
    kubelet_health_services: tuple[str, ...]


_COMMON_GATES = frozenset(
    {
        "DRAAdminAccess",
        "DRAConsumableCapacity",
        "DRADeviceBindingConditions",
        "DRADeviceTaintRules",
        "DRADeviceTaints",
        "DRAExtendedResource",
        "DRAPartitionableDevices",
        "DRAPrioritizedList",
        "DRAResourceClaimDeviceStatus",
        "DRASchedulerFilterTimeout",
        "DynamicResourceAllocation",
        "ResourceHealthStatus",
    }
)
_GATES_136 = _COMMON_GATES | {
    "DRAListTypeAttributes",
    "DRANodeAllocatableResources",
    "DRAResourceClaimGranularStatusAuthorization",
    "DRAResourcePoolStatus",
    "DRAWorkloadResourceClaims",
}
_ON_135 = frozenset(
    {
        "DRAAdminAccess",
        "DRAPrioritizedList",
        "DRAResourceClaimDeviceStatus",
        "DRASchedulerFilterTimeout",
        "DynamicResourceAllocation",
    }
)
_ON_136 = _ON_135 | {
    "DRAConsumableCapacity",
    "DRADeviceBindingConditions",
    "DRADeviceTaints",
    "DRAExtendedResource",
    "DRAPartitionableDevices",
    "DRAResourceClaimGranularStatusAuthorization",
    "ResourceHealthStatus",
}

#: Facts per supported minor (checked against k8s.io/kubernetes v1.35.4, v1.36.3, v1.37.2).
SUPPORTED_MINORS: Mapping[int, MinorFacts] = {
    35: MinorFacts(35, _COMMON_GATES, _ON_135, ("v1alpha1.DRAResourceHealth",)),
    36: MinorFacts(36, _GATES_136, _ON_136, ("v1alpha1.DRAResourceHealth",)),
    37: MinorFacts(
        37,
        _GATES_136
        | {
            "DRADerivedAttributes",
            "DRADeviceCompatibilityGroups",
            "DRAFractionalCapacityRange",
            "DRAOptionalNodeOperations",
            "DRAPartitionableDevicesType",
        },
        _ON_136 | {"DRADeviceTaintRules", "DRAFractionalCapacityRange"},
        ("v1.DRAResourceHealth", "v1alpha1.DRAResourceHealth"),
    ),
}


def facts_for(minor: int) -> MinorFacts:
    """The facts of ``minor``; UnsupportedVersionError names the supported range."""
    try:
        return SUPPORTED_MINORS[minor]
    except KeyError:
        known = ", ".join(f"1.{m}" for m in sorted(SUPPORTED_MINORS))
        raise UnsupportedVersionError(
            f"Kubernetes 1.{minor} is not supported by this drakit (supported: {known})"
        ) from None


@dataclass(frozen=True)
class ClusterInfo:
    """What ``detect`` learned about one apiserver."""

    git_version: str
    minor: int
    #: resource.k8s.io versions the apiserver serves (``v1``, ``v1beta2``, ...).
    resource_versions: tuple[str, ...] = ()
    #: Feature gates as the apiserver reports them (``kubernetes_feature_enabled``);
    #: None when /metrics could not be read (then the minor's defaults apply).
    gates: Mapping[str, bool] | None = None
    facts: MinorFacts = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "facts", facts_for(self.minor))

    def gate(self, name: str) -> bool:
        """Whether ``name`` is on: the apiserver's report, else the minor's default."""
        if self.gates is not None and name in self.gates:
            return self.gates[name]
        if name not in self.facts.known_gates:
            return False
        return name in self.facts.default_on


_MINOR = re.compile(r"^(\d+)")


def parse_minor(version_info: Mapping[str, Any]) -> int:
    """The minor from a /version answer (``minor`` may carry a ``+`` suffix on vendor builds)."""
    raw = str(version_info.get("minor", ""))
    match = _MINOR.match(raw)
    if match is None or str(version_info.get("major", "")) != "1":
        raise UnsupportedVersionError(
            f"apiserver reports version major={version_info.get('major')!r} "
            f"minor={raw!r}; drakit needs Kubernetes 1.x"
        )
    return int(match.group(1))


_FEATURE_LINE = re.compile(r"^kubernetes_feature_enabled\{([^}]*)\}\s+([01])(?:\.0)?\s*$")
_NAME_LABEL = re.compile(r'name="([A-Za-z0-9]{1,100})"')


def parse_feature_metrics(text: str) -> dict[str, bool]:
    """Gates from the Prometheus text of /metrics (``kubernetes_feature_enabled``)."""
    gates: dict[str, bool] = {}
    for line in text.splitlines():
        match = _FEATURE_LINE.match(line)
        if match is None:
            continue
        name = _NAME_LABEL.search(match.group(1))
        if name is not None:
            gates[name.group(1)] = match.group(2) == "1"
    return gates


def detect(api: Any) -> ClusterInfo:
    """Ask the apiserver behind ``api`` (a kubernetes ApiClient) what it is.

    /version and the resource.k8s.io discovery document must be readable (every
    authenticated user may); /metrics is optional (it needs the ``/metrics`` nonResourceURL
    permission) and its absence only means the minor's default gates are assumed.
    """
    version = _get_json(api, "/version")
    minor = parse_minor(version)
    group = _get_json(api, "/apis/resource.k8s.io")
    served = tuple(str(v.get("version", "")) for v in group.get("versions", []))
    gates: dict[str, bool] | None
    try:
        gates = parse_feature_metrics(_get_text(api, "/metrics")) or None
    except Exception as err:
        logger.info(f"apiserver feature gates not readable ({err}); using 1.{minor} defaults")
        gates = None
    info = ClusterInfo(str(version.get("gitVersion", "")), minor, served, gates)
    gates_from = "read from /metrics" if gates is not None else "assumed from the version"
    logger.info(
        f"apiserver {info.git_version} (Kubernetes 1.{minor}), "
        f"resource.k8s.io {','.join(served)}, gates {gates_from}"
    )
    return info


def served_version(api: Any, group: str, plural: str, versions: Sequence[str]) -> str | None:
    """The first of ``versions`` of API ``group`` whose discovery document lists the resource
    ``plural``; None when none does (a version that is not served answers 404; a resource
    behind an off feature gate is left out of its version's document)."""
    for version in versions:
        try:
            document = _get_json(api, f"/apis/{group}/{version}")
        except (ValueError, ApiError):
            continue
        resources = document.get("resources") or ()
        if any(isinstance(r, dict) and r.get("name") == plural for r in resources):
            return version
    return None


def _get_text(api: Any, path: str) -> str:
    method, url, headers, _, _ = api.param_serialize(
        method="GET", resource_path=path, header_params={}, auth_settings=["BearerToken"]
    )
    response = api.call_api(method, url, header_params=headers, _request_timeout=(10.0, 30.0))
    raw = response.response
    try:
        if not 200 <= raw.status < 300:
            raise ValueError(f"GET {path}: HTTP {raw.status}")
        data = raw.data
    finally:
        raw.release_conn()
    # /metrics of a large apiserver is a few MB; refuse anything absurd.
    if len(data) > 64 * 1024 * 1024:
        raise ValueError(f"GET {path}: answer of {len(data)} bytes is too large")
    return bytes(data).decode("utf-8", errors="replace")


def _get_json(api: Any, path: str) -> dict[str, Any]:
    from drakit.kubeapi import deepjson  # noqa: PLC0415 - only here

    value = deepjson.loads(_get_text(api, path))
    if not isinstance(value, dict):
        raise UnsupportedVersionError(f"{path}: expected a JSON object")
    return value


#: The feature gate behind each allocator feature (the scheduler's gates, same meaning).
_ALLOCATOR_FEATURE_GATES: dict[str, str] = {
    "admin_access": "DRAAdminAccess",
    "prioritized_list": "DRAPrioritizedList",
    "partitionable_devices": "DRAPartitionableDevices",
    "device_taints": "DRADeviceTaints",
    "device_binding_conditions": "DRADeviceBindingConditions",
    "consumable_capacity": "DRAConsumableCapacity",
    "list_type_attributes": "DRAListTypeAttributes",
    "compatibility_groups": "DRADeviceCompatibilityGroups",
    "derived_attributes": "DRADerivedAttributes",
    "fractional_capacity_range": "DRAFractionalCapacityRange",
    "optional_node_operations": "DRAOptionalNodeOperations",
}


def allocator_features(info: ClusterInfo) -> Features:
    """The allocator features this cluster's scheduler uses (same gates, same meaning)."""
    return Features(**{field: info.gate(gate) for field, gate in _ALLOCATOR_FEATURE_GATES.items()})


@dataclass(frozen=True)
class SliceFields:
    """Optional ResourceSlice fields the apiserver keeps (it silently drops the others)."""

    #: sharedCounters (own slices) and consumesCounters: DRAPartitionableDevices.
    counters: bool
    #: allowMultipleAllocations and capacity requestPolicy: DRAConsumableCapacity.
    consumable_capacity: bool
    #: bindingConditions, bindingFailureConditions, bindsToNode: DRADeviceBindingConditions.
    binding_conditions: bool
    #: device taints: DRADeviceTaints.
    taints: bool
    #: The device field node-allocatable mappings go to (DRANodeAllocatableResources):
    #: NODE_ALLOCATABLE_RESOURCES (1.37 on), NODE_ALLOCATABLE_MAPPINGS (1.36), "" (gate off).
    node_allocatable: str = ""
    #: spec.skipNodeOperations: DRAOptionalNodeOperations (alpha in 1.37), published only
    #: where the gate is known to be on: a slice with the field is unusable for a scheduler
    #: without it, and an apiserver without it drops the field.
    skip_node_operations: bool = False


#: 1.37's device field: ``{resource: {mapping: {capacityKey, capacityMultiplier} or
#: {deviceMultiplier}, overhead}}``.
NODE_ALLOCATABLE_RESOURCES = "nodeAllocatableResources"
#: 1.36's device field (gone in 1.37): ``{resource: {capacityKey, allocationMultiplier}}``.
NODE_ALLOCATABLE_MAPPINGS = "nodeAllocatableResourceMappings"


def slice_fields(info: ClusterInfo) -> SliceFields:
    """Which optional slice fields to publish on this cluster."""
    # Each optional field is kept by the apiserver under the gate of the allocator feature
    # that reads it.
    features = allocator_features(info)
    node_allocatable = ""
    # An alpha gate is off by default, but a plugin that may not read /metrics cannot know:
    # then the mappings are sent in the minor's field, and an apiserver with the gate off
    # drops them (the publisher reports that once per write as dropped fields). Leaving them
    # out would make a cluster with the gate on charge nothing against the node.
    unknown = info.gates is None and "DRANodeAllocatableResources" in info.facts.known_gates
    if unknown or info.gate("DRANodeAllocatableResources"):
        node_allocatable = (
            NODE_ALLOCATABLE_MAPPINGS if info.minor <= 36 else NODE_ALLOCATABLE_RESOURCES
        )
    return SliceFields(
        counters=features.partitionable_devices,
        consumable_capacity=features.consumable_capacity,
        binding_conditions=features.device_binding_conditions,
        taints=features.device_taints,
        node_allocatable=node_allocatable,
        skip_node_operations=features.optional_node_operations,
    )


def kubelet_health_services(minor: int) -> tuple[str, ...]:
    """DRAResourceHealth services (``v1.DRAResourceHealth``, ...) a kubelet of ``minor`` calls."""
    return facts_for(minor).kubelet_health_services


_KUBELET_VERSION = re.compile(r"^v?1\.(\d{1,3})\.")


def kubelet_health_services_for_node(api: Any, node_name: str) -> tuple[str, ...] | None:
    """The DRAResourceHealth services the kubelet of ``node_name`` calls.

    From the Node's ``status.nodeInfo.kubeletVersion``; when the Node does not say (or
    cannot be read) from the apiserver's version, which a kubelet may trail but not lead.
    None when neither is known or the minor is unsupported: then advertise every version.
    """
    from drakit.kubeapi.resources import NODES, Resource  # noqa: PLC0415 - avoids an import cycle

    try:
        node = Resource(api, NODES).get(node_name)
        raw = str(node.get("status", {}).get("nodeInfo", {}).get("kubeletVersion", ""))
        match = _KUBELET_VERSION.match(raw)
        minor = int(match.group(1)) if match else parse_minor(_get_json(api, "/version"))
        return kubelet_health_services(minor)
    except Exception as err:
        logger.info(f"kubelet version of node {node_name} unknown ({err})")
        return None


def features_for_cluster(api: Any) -> Features | None:
    """The allocator features of the cluster behind ``api``; None when it cannot be asked
    (then the allocator's own defaults, those of the newest supported minor, apply)."""
    try:
        info = detect(api)
    except Exception as err:
        logger.warning(f"cannot tell the cluster's Kubernetes version ({err}); default features")
        return None
    features = allocator_features(info)
    logger.info(f"allocator features for Kubernetes 1.{info.minor}: {features.to_dict()}")
    return features
