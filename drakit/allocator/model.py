# ruff: noqa: RUF009  (_f returns a dataclasses.field carrying the JSON spec)
"""Immutable resource.k8s.io/v1 model: the objects the allocator reads and writes.

The classes mirror the API's JSON (``kubectl get -o json``) one to one, with snake_case
attribute names and camelCase JSON keys:

* :class:`ResourceSlice` ``{metadata, spec: ResourceSliceSpec}``: a driver publishes the
  devices of one *pool* (``spec.pool`` = name, generation, resourceSliceCount) in one or more
  slices; a slice says which nodes can reach its devices (exactly one of ``nodeName``,
  ``nodeSelector``, ``allNodes`` or ``perDeviceNodeSelection``) and carries either
  ``devices`` or ``sharedCounters`` (:class:`CounterSet`).
* :class:`Device`: a name, typed ``attributes`` (:class:`DeviceAttribute`), ``capacity``
  (:class:`DeviceCapacity`, quantities with an optional request policy), counters it consumes
  from shared counter sets, taints, binding conditions, ``allowMultipleAllocations`` and its
  own node selection when the slice uses ``perDeviceNodeSelection``.
* :class:`DeviceClass` ``{spec: {selectors, config}}``: a named set of CEL selectors.
* :class:`ResourceClaim` ``{spec.devices: {requests, constraints, config}, status}``: each
  request is either ``exactly`` one :class:`ExactDeviceRequest` or a prioritized list of
  ``firstAvailable`` :class:`DeviceSubRequest` alternatives.
* :class:`AllocationResult`: what a claim got (``devices.results``, ``devices.config``,
  ``nodeSelector``).

Every class is a frozen dataclass with slots; collections are tuples and read-only maps.
``X.from_dict(d)`` builds an object from the API's plain dicts and raises
:class:`ModelError` naming the field path on malformed input; ``x.to_dict()`` gives the
dict back. Keys the model does not know are preserved, so the round trip is lossless.
Quantities are exact (:class:`drakit.allocator.quantity.Quantity`). Objects are taken as written:
API defaults (``allocationMode: ExactCount``, ``count: 1``) are applied by
:func:`with_api_defaults`, not by ``from_dict``. Limits are checked by
:mod:`drakit.allocator.validation`; older API versions are converted by
:mod:`drakit.allocator.convert`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, NamedTuple, TypeVar

from drakit.allocator._codec import (
    BOOL,
    EMPTY,
    INT,
    QUANTITY,
    RAW,
    STR,
    Codec,
    FrozenDict,
    ModelError,
    decode_object,
    encode_object,
    extra_field,
    list_of,
    map_of,
    obj,
)
from drakit.allocator._codec import (
    spec as _f,
)
from drakit.allocator.quantity import Quantity

__all__ = [
    "API_VERSION",
    "AllocationResult",
    "AttributeValue",
    "CELDeviceSelector",
    "CapacityRequestPolicy",
    "CapacityRequestPolicyRange",
    "CapacityRequirements",
    "Counter",
    "CounterSet",
    "Device",
    "DeviceAllocationConfiguration",
    "DeviceAllocationResult",
    "DeviceAttribute",
    "DeviceCapacity",
    "DeviceClaim",
    "DeviceClaimConfiguration",
    "DeviceClass",
    "DeviceClassConfiguration",
    "DeviceClassSpec",
    "DeviceConstraint",
    "DeviceCounterConsumption",
    "DeviceDerivedAttribute",
    "DeviceID",
    "DeviceRequest",
    "DeviceRequestAllocationResult",
    "DeviceSelector",
    "DeviceSubRequest",
    "DeviceTaint",
    "DeviceToleration",
    "ExactDeviceRequest",
    "FrozenDict",
    "ModelError",
    "Node",
    "NodeAllocatableResourceMapping",
    "NodeSelector",
    "NodeSelectorRequirement",
    "NodeSelectorTerm",
    "ObjectMeta",
    "OpaqueDeviceConfiguration",
    "ResourceClaim",
    "ResourceClaimConsumerReference",
    "ResourceClaimSpec",
    "ResourceClaimStatus",
    "ResourcePool",
    "ResourceSlice",
    "ResourceSliceSpec",
    "with_api_defaults",
]

API_VERSION = "resource.k8s.io/v1"

ALLOCATION_MODE_EXACT_COUNT = "ExactCount"
ALLOCATION_MODE_ALL = "All"
TAINT_EFFECT_NONE = "None"
TAINT_EFFECT_NO_SCHEDULE = "NoSchedule"
TAINT_EFFECT_NO_EXECUTE = "NoExecute"
TOLERATION_OP_EQUAL = "Equal"
TOLERATION_OP_EXISTS = "Exists"
CONFIG_SOURCE_CLASS = "FromClass"
CONFIG_SOURCE_CLAIM = "FromClaim"

A = TypeVar("A", bound="_ApiType")


class DeviceID(NamedTuple):
    """The identity of a device: (driver, pool, device). Hashable, cheap."""

    driver: str
    pool: str
    device: str

    def __str__(self) -> str:
        return f"{self.driver}/{self.pool}/{self.device}"


class _ApiType:
    """Mixin: ``from_dict`` / ``to_dict`` through the field specs of the dataclass."""

    __slots__ = ()

    @classmethod
    def from_dict(cls: type[A], data: Mapping[str, Any], path: str = "") -> A:
        """Build from the API's JSON dict; raises ModelError naming the bad field."""
        return decode_object(cls, data, path)

    def to_dict(self) -> dict[str, Any]:
        """The API's JSON dict (optional fields only when set)."""
        return encode_object(self)


# --------------------------------------------------------------------------- metadata

_STR_EMPTY = Codec(STR.decode, STR.encode, lambda v: not v)


@dataclass(frozen=True, slots=True)
class ObjectMeta(_ApiType):
    name: str = _f("name", _STR_EMPTY, default="")
    namespace: str = _f("namespace", _STR_EMPTY, default="")
    uid: str = _f("uid", _STR_EMPTY, default="")
    generation: int | None = _f("generation", INT)
    resource_version: str = _f("resourceVersion", _STR_EMPTY, default="")
    labels: Mapping[str, str] = _f("labels", map_of(STR), default=EMPTY)
    annotations: Mapping[str, str] = _f("annotations", map_of(STR), default=EMPTY)
    extra: Mapping[str, Any] = extra_field()


_META = obj(lambda: ObjectMeta)


def _meta_empty(m: ObjectMeta) -> bool:
    return m == ObjectMeta() and not m.extra


_META_OPT = Codec(_META.decode, _META.encode, _meta_empty)


def _metadata_field() -> Any:
    """``metadata``: left out of the JSON while it is empty."""
    return _f("metadata", _META_OPT, default=ObjectMeta())


def _spec_field(spec_type: type[_ApiType]) -> Any:
    """``spec`` (required) of type ``spec_type``, defined before the object that holds it."""
    return _f("spec", obj(lambda: spec_type), required=True, default=spec_type())


def _api_version_field() -> Any:
    """``apiVersion`` of a resource.k8s.io object (defaults to the version this model speaks)."""
    return _f("apiVersion", _STR_EMPTY, default=API_VERSION)


def _kind_field(kind: str) -> Any:
    """``kind`` of a resource.k8s.io object, defaulting to ``kind``."""
    return _f("kind", _STR_EMPTY, default=kind)


class _NamedObject(_ApiType):
    """Mixin for top-level API objects: their name, read from ``metadata``."""

    __slots__ = ()
    metadata: ObjectMeta

    @property
    def name(self) -> str:
        return self.metadata.name


@dataclass(frozen=True, slots=True)
class NodeSelectorRequirement(_ApiType):
    key: str = _f("key", STR, required=True, default="")
    operator: str = _f("operator", STR, required=True, default="")
    values: tuple[str, ...] = _f("values", list_of(STR), default=())
    extra: Mapping[str, Any] = extra_field()


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm(_ApiType):
    match_expressions: tuple[NodeSelectorRequirement, ...] = _f(
        "matchExpressions", list_of(obj(lambda: NodeSelectorRequirement)), default=()
    )
    match_fields: tuple[NodeSelectorRequirement, ...] = _f(
        "matchFields", list_of(obj(lambda: NodeSelectorRequirement)), default=()
    )
    extra: Mapping[str, Any] = extra_field()


@dataclass(frozen=True, slots=True)
class NodeSelector(_ApiType):
    """core/v1 NodeSelector: the node must match any one of the terms."""

    node_selector_terms: tuple[NodeSelectorTerm, ...] = _f(
        "nodeSelectorTerms", list_of(obj(lambda: NodeSelectorTerm)), required=True, default=()
    )
    extra: Mapping[str, Any] = extra_field()


_NODE_SELECTOR = obj(lambda: NodeSelector)


@dataclass(frozen=True, slots=True)
class Node(_NamedObject):
    """The part of a core/v1 Node the allocator needs: its name and labels."""

    metadata: ObjectMeta = _metadata_field()
    api_version: str = _f("apiVersion", STR, default="")
    kind: str = _f("kind", STR, default="")
    extra: Mapping[str, Any] = extra_field()

    @property
    def labels(self) -> Mapping[str, str]:
        return self.metadata.labels

    @staticmethod
    def named(name: str, labels: Mapping[str, str] | None = None) -> Node:
        """A Node with just a name and labels (for callers that have no Node object)."""
        return Node(metadata=ObjectMeta(name=name, labels=FrozenDict(labels or {})))


# --------------------------------------------------------------------------- devices


class DeviceAttribute:
    """One typed attribute value: exactly one of int, bool, string, version or a list of them.

    ``kind`` is the JSON key (``int``, ``bool``, ``string``, ``version``, ``ints``, ``bools``,
    ``strings``, ``versions``); ``value`` the Python value (tuples for list kinds). Immutable;
    two attributes are equal when kind and value are (what matchAttribute compares).
    """

    __slots__ = ("kind", "value")

    SCALAR_KINDS = ("int", "bool", "string", "version")
    LIST_KINDS = ("ints", "bools", "strings", "versions")

    kind: str
    value: Any

    def __init__(self, kind: str, value: Any) -> None:
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "value", tuple(value) if kind in self.LIST_KINDS else value)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("DeviceAttribute is immutable")

    @classmethod
    def of(cls, value: Any) -> DeviceAttribute:
        """Infer the kind from a Python value (bool, int, str; lists of them)."""
        if isinstance(value, bool):
            return cls("bool", value)
        if isinstance(value, int):
            return cls("int", value)
        if isinstance(value, str):
            return cls("string", value)
        if isinstance(value, list | tuple) and value:
            item = cls.of(value[0]).kind
            return cls(item + "s", tuple(value))
        raise ValueError(f"cannot infer a device attribute type for {value!r}")

    @classmethod
    def version(cls, value: str) -> DeviceAttribute:
        return cls("version", value)

    @property
    def is_list(self) -> bool:
        return self.kind in self.LIST_KINDS

    @property
    def scalar_kind(self) -> str:
        """``int`` for both ``int`` and ``ints`` and so on."""
        return self.kind[:-1] if self.kind in self.LIST_KINDS else self.kind

    def values(self) -> tuple[Any, ...]:
        """The value as a tuple (a scalar is a one-element tuple)."""
        return self.value if self.kind in self.LIST_KINDS else (self.value,)

    def to_dict(self) -> dict[str, Any]:
        return {self.kind: list(self.value) if self.kind in self.LIST_KINDS else self.value}

    def __eq__(self, other: object) -> bool:
        if isinstance(other, DeviceAttribute):
            return self.kind == other.kind and self.value == other.value
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self.kind, self.value))

    def __repr__(self) -> str:
        return f"DeviceAttribute({self.kind}={self.value!r})"


AttributeValue = DeviceAttribute

_ATTR_TYPES: dict[str, type] = {
    "int": int,
    "bool": bool,
    "string": str,
    "version": str,
    "ints": int,
    "bools": bool,
    "strings": str,
    "versions": str,
}


_ATTRIBUTE_CACHE: dict[tuple[str, Any], DeviceAttribute] = {}
_SCALAR_TYPES: dict[str, type] = {"int": int, "bool": bool, "string": str, "version": str}


def _decode_attribute(value: Any, path: str) -> DeviceAttribute:
    # Fast path: one scalar of the right type. Attributes are immutable, so equal values
    # share one object (slices repeat the same values across many devices).
    if type(value) is dict and len(value) == 1:
        ((kind, raw),) = value.items()
        if type(raw) is _SCALAR_TYPES.get(kind):
            key = (kind, raw)
            hit = _ATTRIBUTE_CACHE.get(key)
            if hit is None:
                hit = DeviceAttribute(kind, raw)
                if len(_ATTRIBUTE_CACHE) < 100_000:
                    _ATTRIBUTE_CACHE[key] = hit
            return hit
    if not isinstance(value, Mapping):
        raise ModelError(path, "must be an object with one of int, bool, string, version")
    present = [k for k, v in value.items() if v is not None]
    unknown = [k for k in present if k not in _ATTR_TYPES]
    if unknown:
        raise ModelError(path, f"unknown attribute type {unknown[0]!r}")
    if len(present) != 1:
        raise ModelError(
            path,
            "must have exactly one of int, bool, string, version, ints, bools, strings, versions",
        )
    kind = present[0]
    raw = value[kind]
    want = _ATTR_TYPES[kind]
    items = raw if kind in DeviceAttribute.LIST_KINDS else [raw]
    if kind in DeviceAttribute.LIST_KINDS and not isinstance(raw, list | tuple):
        raise ModelError(f"{path}.{kind}" if path else kind, "must be a list")
    for item in items:
        if not isinstance(item, want) or (want is int and isinstance(item, bool)):
            raise ModelError(f"{path}.{kind}" if path else kind, f"must be of type {kind}")
    return DeviceAttribute(kind, raw)


ATTRIBUTE = Codec(_decode_attribute, lambda a: a.to_dict())


@dataclass(frozen=True, slots=True)
class Counter(_ApiType):
    """One counter's amount: ``Counter(Quantity.parse("40Gi"))``.

    In a :class:`CounterSet` it is how much the set holds; in a
    :class:`DeviceCounterConsumption` how much allocating the device takes from it.
    """

    value: Quantity = _f("value", QUANTITY, required=True, default=Quantity(0))
    extra: Mapping[str, Any] = extra_field()


_COUNTERS = map_of(obj(lambda: Counter))


@dataclass(frozen=True, slots=True)
class CounterSet(_ApiType):
    """A named set of counters published with a pool; devices consume from it.

    Partitionable devices share one piece of hardware: a GPU with 40 GiB, offered whole,
    as two halves and as four quarters. The hardware is a counter set, each offer a
    :class:`Device` whose ``consumes_counters`` says what it takes; the scheduler
    allocates offers only while the counters last, so the whole GPU and a half never go
    out together::

        gpu = CounterSet(name="gpu-0", counters={"memory": Counter(Quantity.parse("40Gi"))})
        half = Device(
            name="gpu-0-half-0",
            consumes_counters=(
                DeviceCounterConsumption(
                    counter_set="gpu-0", counters={"memory": Counter(Quantity.parse("20Gi"))}
                ),
            ),
        )

    ``counters`` maps a counter name to its :class:`Counter`.
    """

    name: str = _f("name", STR, required=True, default="")
    counters: Mapping[str, Counter] = _f("counters", _COUNTERS, default=EMPTY)
    extra: Mapping[str, Any] = extra_field()


@dataclass(frozen=True, slots=True)
class CapacityRequestPolicyRange(_ApiType):
    min: Quantity | None = _f("min", QUANTITY)
    max: Quantity | None = _f("max", QUANTITY)
    step: Quantity | None = _f("step", QUANTITY)
    extra: Mapping[str, Any] = extra_field()


@dataclass(frozen=True, slots=True)
class CapacityRequestPolicy(_ApiType):
    default: Quantity | None = _f("default", QUANTITY)
    valid_values: tuple[Quantity, ...] = _f("validValues", list_of(QUANTITY), default=())
    valid_range: CapacityRequestPolicyRange | None = _f(
        "validRange", obj(lambda: CapacityRequestPolicyRange)
    )
    extra: Mapping[str, Any] = extra_field()


@dataclass(frozen=True, slots=True)
class DeviceCapacity(_ApiType):
    value: Quantity = _f("value", QUANTITY, required=True, default=Quantity(0))
    request_policy: CapacityRequestPolicy | None = _f(
        "requestPolicy", obj(lambda: CapacityRequestPolicy)
    )
    extra: Mapping[str, Any] = extra_field()


@dataclass(frozen=True, slots=True)
class DeviceCounterConsumption(_ApiType):
    """What allocating a device takes from one :class:`CounterSet` of its pool.

    ``counter_set`` names the set; ``counters`` maps some of its counter names to the
    :class:`Counter` amount the device uses. A device lists one per set it draws on in
    ``Device.consumes_counters``. ``compatibility_groups`` is the Kubernetes field of the
    same name (devices of different groups do not share a counter set); leave it empty
    unless the cluster needs it.
    """

    counter_set: str = _f("counterSet", STR, required=True, default="")
    counters: Mapping[str, Counter] = _f("counters", _COUNTERS, default=EMPTY)
    compatibility_groups: tuple[str, ...] = _f("compatibilityGroups", list_of(STR), default=())
    extra: Mapping[str, Any] = extra_field()


@dataclass(frozen=True, slots=True)
class DeviceTaint(_ApiType):
    key: str = _f("key", STR, required=True, default="")
    value: str = _f("value", STR, default="")
    effect: str = _f("effect", STR, required=True, default="")
    time_added: str | None = _f("timeAdded", STR)
    extra: Mapping[str, Any] = extra_field()


@dataclass(frozen=True, slots=True)
class NodeAllocatableResourceMapping(_ApiType):
    """How allocating a device uses a node-allocatable resource (``cpu``, ``memory``, ...).

    Without ``capacity_key``: each allocated device accounts for ``allocation_multiplier``
    (default 1) of the resource. With it: the claim's consumed amount of that capacity,
    times ``allocation_multiplier`` (default 1).
    """

    capacity_key: str | None = _f("capacityKey", STR)
    allocation_multiplier: Quantity | None = _f("allocationMultiplier", QUANTITY)
    extra: Mapping[str, Any] = extra_field()


@dataclass(frozen=True, slots=True)
class Device(_ApiType):
    """One device in a slice. Its identity is (driver, pool, name)."""

    name: str = _f("name", STR, required=True, default="")
    attributes: Mapping[str, DeviceAttribute] = _f("attributes", map_of(ATTRIBUTE), default=EMPTY)
    capacity: Mapping[str, DeviceCapacity] = _f(
        "capacity", map_of(obj(lambda: DeviceCapacity)), default=EMPTY
    )
    consumes_counters: tuple[DeviceCounterConsumption, ...] = _f(
        "consumesCounters", list_of(obj(lambda: DeviceCounterConsumption)), default=()
    )
    node_name: str | None = _f("nodeName", STR)
    node_selector: NodeSelector | None = _f("nodeSelector", _NODE_SELECTOR)
    all_nodes: bool | None = _f("allNodes", BOOL)
    taints: tuple[DeviceTaint, ...] = _f("taints", list_of(obj(lambda: DeviceTaint)), default=())
    binds_to_node: bool | None = _f("bindsToNode", BOOL)
    binding_conditions: tuple[str, ...] = _f("bindingConditions", list_of(STR), default=())
    binding_failure_conditions: tuple[str, ...] = _f(
        "bindingFailureConditions", list_of(STR), default=()
    )
    allow_multiple_allocations: bool | None = _f("allowMultipleAllocations", BOOL)
    # alpha (DRANodeAllocatableResources), not used by allocation. A driver states its
    # mappings in the 1.36 shape (node_allocatable_resource_mappings); the publisher writes
    # them as the cluster's field (1.37: nodeAllocatableResources, which is kept as given).
    node_allocatable_resource_mappings: Mapping[str, NodeAllocatableResourceMapping] = _f(
        "nodeAllocatableResourceMappings",
        map_of(obj(lambda: NodeAllocatableResourceMapping)),
        default=EMPTY,
    )
    node_allocatable_resources: Any = _f("nodeAllocatableResources", RAW)
    extra: Mapping[str, Any] = extra_field()

    @property
    def multi_allocatable(self) -> bool:
        return bool(self.allow_multiple_allocations)

    def uses_advanced_features(self) -> bool:
        """Taints, counters or list attributes: the slice limit drops to 64 devices."""
        return bool(
            self.taints
            or self.consumes_counters
            or any(a.is_list for a in self.attributes.values())
        )


@dataclass(frozen=True, slots=True)
class ResourcePool(_ApiType):
    name: str = _f("name", STR, required=True, default="")
    generation: int = _f("generation", INT, required=True, default=0)
    resource_slice_count: int = _f("resourceSliceCount", INT, required=True, default=1)
    extra: Mapping[str, Any] = extra_field()


@dataclass(frozen=True, slots=True)
class ResourceSliceSpec(_ApiType):
    driver: str = _f("driver", STR, required=True, default="")
    pool: ResourcePool = _f(
        "pool", obj(lambda: ResourcePool), required=True, default=ResourcePool()
    )
    node_name: str | None = _f("nodeName", STR)
    node_selector: NodeSelector | None = _f("nodeSelector", _NODE_SELECTOR)
    all_nodes: bool | None = _f("allNodes", BOOL)
    per_device_node_selection: bool | None = _f("perDeviceNodeSelection", BOOL)
    devices: tuple[Device, ...] = _f("devices", list_of(obj(lambda: Device)), default=())
    shared_counters: tuple[CounterSet, ...] = _f(
        "sharedCounters", list_of(obj(lambda: CounterSet)), default=()
    )
    skip_node_operations: tuple[str, ...] = _f("skipNodeOperations", list_of(STR), default=())
    # alpha (DRAPartitionableDevicesType), observability only
    partition_type_attribute: str | None = _f("partitionTypeAttribute", STR)
    extra: Mapping[str, Any] = extra_field()


@dataclass(frozen=True, slots=True)
class ResourceSlice(_NamedObject):
    metadata: ObjectMeta = _metadata_field()
    spec: ResourceSliceSpec = _spec_field(ResourceSliceSpec)
    api_version: str = _api_version_field()
    kind: str = _kind_field("ResourceSlice")
    extra: Mapping[str, Any] = extra_field()

    @property
    def driver(self) -> str:
        return self.spec.driver

    @property
    def pool(self) -> ResourcePool:
        return self.spec.pool

    @property
    def devices(self) -> tuple[Device, ...]:
        return self.spec.devices


# --------------------------------------------------------------------------- classes


@dataclass(frozen=True, slots=True)
class CELDeviceSelector(_ApiType):
    expression: str = _f("expression", STR, required=True, default="")
    extra: Mapping[str, Any] = extra_field()


@dataclass(frozen=True, slots=True)
class DeviceSelector(_ApiType):
    cel: CELDeviceSelector | None = _f("cel", obj(lambda: CELDeviceSelector))
    extra: Mapping[str, Any] = extra_field()

    @staticmethod
    def of(expression: str) -> DeviceSelector:
        return DeviceSelector(cel=CELDeviceSelector(expression=expression))


_SELECTORS = list_of(obj(lambda: DeviceSelector))


@dataclass(frozen=True, slots=True)
class OpaqueDeviceConfiguration(_ApiType):
    driver: str = _f("driver", STR, required=True, default="")
    parameters: Any = _f("parameters", RAW, required=True)
    extra: Mapping[str, Any] = extra_field()


_OPAQUE = obj(lambda: OpaqueDeviceConfiguration)


@dataclass(frozen=True, slots=True)
class DeviceClassConfiguration(_ApiType):
    opaque: OpaqueDeviceConfiguration | None = _f("opaque", _OPAQUE)
    extra: Mapping[str, Any] = extra_field()


@dataclass(frozen=True, slots=True)
class DeviceClassSpec(_ApiType):
    selectors: tuple[DeviceSelector, ...] = _f("selectors", _SELECTORS, default=())
    config: tuple[DeviceClassConfiguration, ...] = _f(
        "config", list_of(obj(lambda: DeviceClassConfiguration)), default=()
    )
    extended_resource_name: str | None = _f("extendedResourceName", STR)
    extra: Mapping[str, Any] = extra_field()


@dataclass(frozen=True, slots=True)
class DeviceClass(_NamedObject):
    metadata: ObjectMeta = _metadata_field()
    spec: DeviceClassSpec = _spec_field(DeviceClassSpec)
    api_version: str = _api_version_field()
    kind: str = _kind_field("DeviceClass")
    extra: Mapping[str, Any] = extra_field()


# --------------------------------------------------------------------------- claims


@dataclass(frozen=True, slots=True)
class DeviceToleration(_ApiType):
    key: str = _f("key", _STR_EMPTY, default="")
    operator: str = _f("operator", _STR_EMPTY, default="")
    value: str = _f("value", _STR_EMPTY, default="")
    effect: str = _f("effect", _STR_EMPTY, default="")
    toleration_seconds: int | None = _f("tolerationSeconds", INT)
    extra: Mapping[str, Any] = extra_field()


_TOLERATIONS = list_of(obj(lambda: DeviceToleration))


@dataclass(frozen=True, slots=True)
class CapacityRequirements(_ApiType):
    requests: Mapping[str, Quantity] = _f("requests", map_of(QUANTITY), default=EMPTY)
    extra: Mapping[str, Any] = extra_field()


@dataclass(frozen=True, slots=True)
class DeviceDerivedAttribute(_ApiType):
    name: str = _f("name", STR, required=True, default="")
    expression: str = _f("expression", STR, required=True, default="")
    extra: Mapping[str, Any] = extra_field()


@dataclass(frozen=True, slots=True)
class ExactDeviceRequest(_ApiType):
    device_class_name: str = _f("deviceClassName", STR, required=True, default="")
    selectors: tuple[DeviceSelector, ...] = _f("selectors", _SELECTORS, default=())
    allocation_mode: str = _f("allocationMode", _STR_EMPTY, default="")
    count: int | None = _f("count", INT)
    admin_access: bool | None = _f("adminAccess", BOOL)
    tolerations: tuple[DeviceToleration, ...] = _f("tolerations", _TOLERATIONS, default=())
    capacity: CapacityRequirements | None = _f("capacity", obj(lambda: CapacityRequirements))
    derived_attributes: tuple[DeviceDerivedAttribute, ...] = _f(
        "derivedAttributes", list_of(obj(lambda: DeviceDerivedAttribute)), default=()
    )
    extra: Mapping[str, Any] = extra_field()


@dataclass(frozen=True, slots=True)
class DeviceSubRequest(_ApiType):
    name: str = _f("name", STR, required=True, default="")
    device_class_name: str = _f("deviceClassName", STR, required=True, default="")
    selectors: tuple[DeviceSelector, ...] = _f("selectors", _SELECTORS, default=())
    allocation_mode: str = _f("allocationMode", _STR_EMPTY, default="")
    count: int | None = _f("count", INT)
    tolerations: tuple[DeviceToleration, ...] = _f("tolerations", _TOLERATIONS, default=())
    capacity: CapacityRequirements | None = _f("capacity", obj(lambda: CapacityRequirements))
    derived_attributes: tuple[DeviceDerivedAttribute, ...] = _f(
        "derivedAttributes", list_of(obj(lambda: DeviceDerivedAttribute)), default=()
    )
    extra: Mapping[str, Any] = extra_field()

    @property
    def admin_access(self) -> bool | None:
        """Subrequests can never ask for admin access."""
        return None


@dataclass(frozen=True, slots=True)
class DeviceRequest(_ApiType):
    name: str = _f("name", STR, required=True, default="")
    exactly: ExactDeviceRequest | None = _f("exactly", obj(lambda: ExactDeviceRequest))
    first_available: tuple[DeviceSubRequest, ...] = _f(
        "firstAvailable", list_of(obj(lambda: DeviceSubRequest)), default=()
    )
    extra: Mapping[str, Any] = extra_field()


@dataclass(frozen=True, slots=True)
class DeviceConstraint(_ApiType):
    requests: tuple[str, ...] = _f("requests", list_of(STR), default=())
    match_attribute: str | None = _f("matchAttribute", STR)
    distinct_attribute: str | None = _f("distinctAttribute", STR)
    extra: Mapping[str, Any] = extra_field()


@dataclass(frozen=True, slots=True)
class DeviceClaimConfiguration(_ApiType):
    requests: tuple[str, ...] = _f("requests", list_of(STR), default=())
    opaque: OpaqueDeviceConfiguration | None = _f("opaque", _OPAQUE)
    extra: Mapping[str, Any] = extra_field()


_REQUESTS_ALWAYS = Codec(
    list_of(obj(lambda: DeviceRequest)).decode,
    list_of(obj(lambda: DeviceRequest)).encode,
    lambda v: not v,
)


@dataclass(frozen=True, slots=True)
class DeviceClaim(_ApiType):
    requests: tuple[DeviceRequest, ...] = _f("requests", _REQUESTS_ALWAYS, default=())
    constraints: tuple[DeviceConstraint, ...] = _f(
        "constraints", list_of(obj(lambda: DeviceConstraint)), default=()
    )
    config: tuple[DeviceClaimConfiguration, ...] = _f(
        "config", list_of(obj(lambda: DeviceClaimConfiguration)), default=()
    )
    extra: Mapping[str, Any] = extra_field()


@dataclass(frozen=True, slots=True)
class ResourceClaimSpec(_ApiType):
    devices: DeviceClaim = _f(
        "devices", obj(lambda: DeviceClaim), required=True, default=DeviceClaim()
    )
    extra: Mapping[str, Any] = extra_field()


# --------------------------------------------------------------------------- results


@dataclass(frozen=True, slots=True)
class DeviceRequestAllocationResult(_ApiType):
    request: str = _f("request", STR, required=True, default="")
    driver: str = _f("driver", STR, required=True, default="")
    pool: str = _f("pool", STR, required=True, default="")
    device: str = _f("device", STR, required=True, default="")
    admin_access: bool | None = _f("adminAccess", BOOL)
    tolerations: tuple[DeviceToleration, ...] = _f("tolerations", _TOLERATIONS, default=())
    binding_conditions: tuple[str, ...] = _f("bindingConditions", list_of(STR), default=())
    binding_failure_conditions: tuple[str, ...] = _f(
        "bindingFailureConditions", list_of(STR), default=()
    )
    share_id: str | None = _f("shareID", STR)
    consumed_capacity: Mapping[str, Quantity] = _f(
        "consumedCapacity", map_of(QUANTITY), default=EMPTY
    )
    skip_node_operations: tuple[str, ...] = _f("skipNodeOperations", list_of(STR), default=())
    extra: Mapping[str, Any] = extra_field()

    @property
    def device_id(self) -> DeviceID:
        return DeviceID(self.driver, self.pool, self.device)


@dataclass(frozen=True, slots=True)
class DeviceAllocationConfiguration(_ApiType):
    source: str = _f("source", STR, required=True, default="")
    requests: tuple[str, ...] = _f("requests", list_of(STR), default=())
    opaque: OpaqueDeviceConfiguration | None = _f("opaque", _OPAQUE)
    extra: Mapping[str, Any] = extra_field()


@dataclass(frozen=True, slots=True)
class DeviceAllocationResult(_ApiType):
    results: tuple[DeviceRequestAllocationResult, ...] = _f(
        "results", list_of(obj(lambda: DeviceRequestAllocationResult)), default=()
    )
    config: tuple[DeviceAllocationConfiguration, ...] = _f(
        "config", list_of(obj(lambda: DeviceAllocationConfiguration)), default=()
    )
    extra: Mapping[str, Any] = extra_field()


def _empty_device_result(v: DeviceAllocationResult) -> bool:
    return not v.results and not v.config and not v.extra


@dataclass(frozen=True, slots=True)
class AllocationResult(_ApiType):
    devices: DeviceAllocationResult = _f(
        "devices",
        Codec(obj(lambda: DeviceAllocationResult).decode, encode_object, _empty_device_result),
        default=DeviceAllocationResult(),
    )
    node_selector: NodeSelector | None = _f("nodeSelector", _NODE_SELECTOR)
    allocation_timestamp: str | None = _f("allocationTimestamp", STR)
    extra: Mapping[str, Any] = extra_field()


@dataclass(frozen=True, slots=True)
class ResourceClaimConsumerReference(_ApiType):
    api_group: str = _f("apiGroup", _STR_EMPTY, default="")
    resource: str = _f("resource", STR, required=True, default="")
    name: str = _f("name", STR, required=True, default="")
    uid: str = _f("uid", STR, required=True, default="")
    extra: Mapping[str, Any] = extra_field()


@dataclass(frozen=True, slots=True)
class ResourceClaimStatus(_ApiType):
    allocation: AllocationResult | None = _f("allocation", obj(lambda: AllocationResult))
    reserved_for: tuple[ResourceClaimConsumerReference, ...] = _f(
        "reservedFor", list_of(obj(lambda: ResourceClaimConsumerReference)), default=()
    )
    devices: tuple[Any, ...] = _f("devices", list_of(RAW), default=())
    extra: Mapping[str, Any] = extra_field()


def _empty_status(s: ResourceClaimStatus) -> bool:
    return s == ResourceClaimStatus() and not s.extra


@dataclass(frozen=True, slots=True)
class ResourceClaim(_NamedObject):
    metadata: ObjectMeta = _metadata_field()
    spec: ResourceClaimSpec = _spec_field(ResourceClaimSpec)
    status: ResourceClaimStatus = _f(
        "status",
        Codec(obj(lambda: ResourceClaimStatus).decode, encode_object, _empty_status),
        default=ResourceClaimStatus(),
    )
    api_version: str = _api_version_field()
    kind: str = _kind_field("ResourceClaim")
    extra: Mapping[str, Any] = extra_field()

    @property
    def namespace(self) -> str:
        return self.metadata.namespace

    @property
    def uid(self) -> str:
        return self.metadata.uid

    @property
    def key(self) -> str:
        """``namespace/name`` (how claims are named in messages and scenario output)."""
        return f"{self.metadata.namespace}/{self.metadata.name}"

    @property
    def allocation(self) -> AllocationResult | None:
        return self.status.allocation

    @property
    def requests(self) -> tuple[DeviceRequest, ...]:
        return self.spec.devices.requests

    def with_allocation(self, allocation: AllocationResult | None) -> ResourceClaim:
        """A copy with ``status.allocation`` replaced (None clears it)."""
        return replace(self, status=replace(self.status, allocation=allocation))


# --------------------------------------------------------------------------- defaults


def _default_exact(r: ExactDeviceRequest) -> ExactDeviceRequest:
    mode = r.allocation_mode or ALLOCATION_MODE_EXACT_COUNT
    count = r.count
    if mode == ALLOCATION_MODE_EXACT_COUNT and not count:
        count = 1
    tolerations = tuple(_default_toleration(t) for t in r.tolerations)
    return replace(r, allocation_mode=mode, count=count, tolerations=tolerations)


def _default_sub(r: DeviceSubRequest) -> DeviceSubRequest:
    mode = r.allocation_mode or ALLOCATION_MODE_EXACT_COUNT
    count = r.count
    if mode == ALLOCATION_MODE_EXACT_COUNT and not count:
        count = 1
    tolerations = tuple(_default_toleration(t) for t in r.tolerations)
    return replace(r, allocation_mode=mode, count=count, tolerations=tolerations)


def _default_toleration(t: DeviceToleration) -> DeviceToleration:
    return t if t.operator else replace(t, operator=TOLERATION_OP_EQUAL)


def with_api_defaults(claim: ResourceClaim) -> ResourceClaim:
    """The claim as the API server would store it: allocationMode ExactCount, count 1,
    toleration operator Equal where unset. Idempotent."""
    requests = []
    for original in claim.spec.devices.requests:
        req = original
        if req.exactly is not None:
            req = replace(req, exactly=_default_exact(req.exactly))
        if req.first_available:
            req = replace(req, first_available=tuple(_default_sub(s) for s in req.first_available))
        requests.append(req)
    devices = replace(claim.spec.devices, requests=tuple(requests))
    return replace(claim, spec=replace(claim.spec, devices=devices))
