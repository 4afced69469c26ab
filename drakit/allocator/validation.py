"""The resource.k8s.io/v1 validation limits, as the API server enforces them.

``validate_*`` return a list of :class:`FieldError` (empty = valid); ``check_*`` raise
:class:`ValidationError` carrying all of them. Each error names the object
(``ResourceSlice node-1-gpu``), the field path in the API's JSON spelling
(``spec.devices[3].attributes``) and the reason, so a driver author can fix the source.
The publisher validates slices with :func:`check_resource_slice` before writing them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence, Sized
from dataclasses import dataclass
from typing import Final

from drakit.allocator._codec import thaw
from drakit.allocator.model import (
    ALLOCATION_MODE_ALL,
    ALLOCATION_MODE_EXACT_COUNT,
    Device,
    DeviceAttribute,
    DeviceCapacity,
    DeviceClaim,
    DeviceClass,
    DeviceRequest,
    DeviceSelector,
    DeviceSubRequest,
    ExactDeviceRequest,
    NodeSelector,
    OpaqueDeviceConfiguration,
    ResourceClaim,
    ResourceSlice,
)
from drakit.allocator.quantity import Quantity
from drakit.allocator.semver import is_semver

__all__ = [
    "FieldError",
    "ValidationError",
    "check_device_class",
    "check_resource_claim",
    "check_resource_slice",
    "dns_label_problem",
    "dns_subdomain_problem",
    "is_semver",
    "validate_device",
    "validate_device_class",
    "validate_qualified_name",
    "validate_resource_claim",
    "validate_resource_slice",
]

MAX_DEVICES: Final = 128
MAX_DEVICES_WITH_ADVANCED_FEATURES: Final = 64
MAX_COUNTER_SETS: Final = 8
MAX_COUNTERS_PER_SET: Final = 32
MAX_COUNTER_CONSUMPTIONS_PER_DEVICE: Final = 2
MAX_COUNTERS_PER_CONSUMPTION: Final = 32
MAX_ATTRIBUTES_AND_CAPACITIES: Final = 32
MAX_ATTRIBUTE_VALUES: Final = 48
MAX_ATTRIBUTE_VALUE_LENGTH: Final = 64
MAX_DOMAIN_LENGTH: Final = 63
MAX_ID_LENGTH: Final = 32
MAX_DRIVER_NAME_LENGTH: Final = 63
MAX_POOL_NAME_LENGTH: Final = 253
MAX_TAINTS: Final = 16
MAX_TOLERATIONS: Final = 16
MAX_REQUESTS: Final = 32
MAX_RESULTS: Final = 32
MAX_CONSTRAINTS: Final = 32
MAX_CONFIGS: Final = 32
MAX_SELECTORS: Final = 32
MAX_SUBREQUESTS: Final = 8
MAX_CEL_LENGTH: Final = 10 * 1024
MAX_OPAQUE_PARAMETERS_LENGTH: Final = 10 * 1024
MAX_BINDING_CONDITIONS: Final = 4
MAX_VALID_VALUES: Final = 10
MAX_RESERVED_FOR: Final = 256

_DNS_LABEL: Final = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN: Final = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)
_C_IDENTIFIER: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_TAINT_EFFECTS: Final = ("None", "NoSchedule", "NoExecute")
_TOLERATION_OPERATORS: Final = ("", "Equal", "Exists")
_NODE_SELECTOR_OPERATORS: Final = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")


@dataclass(frozen=True, slots=True)
class FieldError:
    """One problem: which object, which field (JSON path), and why."""

    object: str
    field: str
    reason: str

    def __str__(self) -> str:
        return f"{self.object}: {self.field}: {self.reason}"


class ValidationError(ValueError):
    """An object violates the API's rules; ``errors`` lists every problem found."""

    def __init__(self, errors: Sequence[FieldError]) -> None:
        self.errors = tuple(errors)
        head = str(self.errors[0]) if self.errors else "invalid object"
        more = f" (and {len(self.errors) - 1} more)" if len(self.errors) > 1 else ""
        super().__init__(head + more)

    @property
    def fields(self) -> tuple[str, ...]:
        return tuple(e.field for e in self.errors)


class _Collector:
    def __init__(self, obj: str, *, compile_cel: bool = False) -> None:
        self.obj = obj
        self.compile_cel = compile_cel
        self.errors: list[FieldError] = []

    def add(self, field: str, reason: str) -> None:
        self.errors.append(FieldError(self.obj, field, reason))

    def too_many(self, field: str, items: Sized, limit: int) -> None:
        if len(items) > limit:
            self.add(field, f"must have at most {limit} items, has {len(items)}")

    def unique(self, field: str, what: str, name: str, seen: set[str]) -> None:
        """Report ``name`` (a ``what``) if it is already in ``seen``, then add it there."""
        if name in seen:
            self.add(field, f"duplicate {what} {name!r}")
        seen.add(name)

    def counters(self, field: str, counters: Sized, limit: int) -> None:
        """A map of counters: not empty and at most ``limit`` of them."""
        if not counters:
            self.add(field, "must not be empty")
        if len(counters) > limit:
            self.add(field, f"must have at most {limit} items")


def _dns_subdomain_problem(value: str, limit: int = 253) -> str | None:
    if not value:
        return "must not be empty"
    if len(value) > limit:
        return f"must be no more than {limit} characters"
    if not _DNS_SUBDOMAIN.match(value):
        return "must be a lowercase RFC 1123 subdomain (a-z, 0-9, '-', '.')"
    return None


def dns_subdomain_problem(value: str) -> str | None:
    """Why ``value`` is not an RFC 1123 subdomain (a Kubernetes object name), or None."""
    return _dns_subdomain_problem(value)


def _dns_label_problem(value: str) -> str | None:
    if not value:
        return "must not be empty"
    if len(value) > 63:
        return "must be no more than 63 characters"
    if not _DNS_LABEL.match(value):
        return "must be a lowercase RFC 1123 label (a-z, 0-9, '-')"
    return None


def dns_label_problem(value: str) -> str | None:
    """Why ``value`` is not an RFC 1123 label (a device, counter set or counter name), or None."""
    return _dns_label_problem(value)


def validate_qualified_name(name: str, *, fully_qualified: bool = False) -> str | None:
    """Problem with an attribute/capacity name (``id`` or ``domain/id``), or None."""
    domain, sep, ident = name.rpartition("/")
    if fully_qualified and not sep:
        return "a fully qualified name must be a domain and a name separated by a slash"
    if sep:
        if not domain:
            return "the domain must not be empty"
        problem = _dns_subdomain_problem(domain, MAX_DOMAIN_LENGTH)
        if problem:
            return f"domain {domain!r} {problem}"
    if not ident:
        return "the name must not be empty"
    if len(ident) > MAX_ID_LENGTH:
        return f"name {ident!r} must be no more than {MAX_ID_LENGTH} characters"
    if not _C_IDENTIFIER.match(ident):
        return (
            f"name {ident!r} must be a C identifier "
            "(letters, digits, '_', not starting with a digit)"
        )
    return None


# --------------------------------------------------------------------------- slices


def validate_resource_slice(s: ResourceSlice) -> list[FieldError]:
    """Every API rule a ResourceSlice violates (empty list = valid)."""
    c = _Collector(f"ResourceSlice {s.metadata.name or '(unnamed)'}")
    spec = s.spec
    problem = _dns_subdomain_problem(spec.driver, MAX_DRIVER_NAME_LENGTH)
    if problem:
        c.add("spec.driver", problem)
    _validate_pool(c, s)
    _validate_slice_node_selection(c, s)
    if spec.devices and spec.shared_counters:
        c.add("spec", "only one of `sharedCounters` or `devices` is allowed")
    advanced = any(d.uses_advanced_features() for d in spec.devices)
    limit = MAX_DEVICES_WITH_ADVANCED_FEATURES if advanced else MAX_DEVICES
    if len(spec.devices) > limit:
        why = " (devices use taints, counters or list attributes)" if advanced else ""
        c.add("spec.devices", f"must have at most {limit} devices{why}, has {len(spec.devices)}")
    seen: set[str] = set()
    for i, d in enumerate(spec.devices):
        c.unique(f"spec.devices[{i}].name", "device name", d.name, seen)
        _validate_device(c, d, f"spec.devices[{i}]", bool(spec.per_device_node_selection))
    _validate_counter_sets(c, s)
    for i, op in enumerate(spec.skip_node_operations):
        if op not in ("NodePrepareResources", "NodeUnprepareResources", "*"):
            c.add(f"spec.skipNodeOperations[{i}]", f"unknown operation {op!r}")
    return c.errors


def _validate_pool(c: _Collector, s: ResourceSlice) -> None:
    pool = s.spec.pool
    if not pool.name:
        c.add("spec.pool.name", "must not be empty")
    elif len(pool.name) > MAX_POOL_NAME_LENGTH:
        c.add("spec.pool.name", f"must be no more than {MAX_POOL_NAME_LENGTH} characters")
    else:
        for part in pool.name.split("/"):
            problem = _dns_subdomain_problem(part)
            if problem:
                c.add("spec.pool.name", f"each part between '/' {problem}: {part!r}")
                break
    if pool.generation < 0:
        c.add("spec.pool.generation", "must be greater than or equal to zero")
    if pool.resource_slice_count <= 0:
        c.add("spec.pool.resourceSliceCount", "must be greater than zero")


def _validate_slice_node_selection(c: _Collector, s: ResourceSlice) -> None:
    spec = s.spec
    chosen = []
    if spec.node_name is not None:
        chosen.append("nodeName")
        problem = _dns_subdomain_problem(spec.node_name)
        if problem:
            c.add("spec.nodeName", problem)
    if spec.node_selector is not None:
        chosen.append("nodeSelector")
        _validate_node_selector(c, spec.node_selector, "spec.nodeSelector")
    if spec.all_nodes is not None:
        chosen.append("allNodes")
        if not spec.all_nodes:
            c.add("spec.allNodes", "must be either unset or set to true")
    if spec.per_device_node_selection is not None:
        chosen.append("perDeviceNodeSelection")
        if not spec.per_device_node_selection:
            c.add("spec.perDeviceNodeSelection", "must be either unset or set to true")
    if not chosen:
        c.add(
            "spec",
            "exactly one of `nodeName`, `nodeSelector`, `allNodes`, "
            "`perDeviceNodeSelection` is required",
        )
    elif len(chosen) > 1:
        c.add(
            "spec",
            f"exactly one of `nodeName`, `nodeSelector`, `allNodes`, "
            f"`perDeviceNodeSelection` is required, but {', '.join(chosen)} are set",
        )


def _validate_node_selector(c: _Collector, ns: NodeSelector, path: str) -> None:
    if len(ns.node_selector_terms) != 1:
        c.add(f"{path}.nodeSelectorTerms", "must have exactly one node selector term")
    for t, term in enumerate(ns.node_selector_terms):
        for kind, reqs in (
            ("matchExpressions", term.match_expressions),
            ("matchFields", term.match_fields),
        ):
            for r, req in enumerate(reqs):
                where = f"{path}.nodeSelectorTerms[{t}].{kind}[{r}]"
                if req.operator not in _NODE_SELECTOR_OPERATORS:
                    c.add(f"{where}.operator", f"unknown operator {req.operator!r}")
                elif req.operator in ("In", "NotIn") and not req.values:
                    c.add(f"{where}.values", "must not be empty for In and NotIn")
                elif req.operator in ("Exists", "DoesNotExist") and req.values:
                    c.add(f"{where}.values", "must be empty for Exists and DoesNotExist")
                elif req.operator in ("Gt", "Lt") and (
                    len(req.values) != 1 or not req.values[0].lstrip("-").isdigit()
                ):
                    c.add(f"{where}.values", "must be a single integer for Gt and Lt")


def validate_device(
    device: Device, *, per_device_node_selection: bool = False, path: str = "device"
) -> list[FieldError]:
    """Every API rule one device violates (as it would inside a slice)."""
    c = _Collector(f"Device {device.name or '(unnamed)'}")
    _validate_device(c, device, path, per_device_node_selection)
    return c.errors


def _validate_device(c: _Collector, d: Device, path: str, per_device: bool) -> None:
    problem = _dns_label_problem(d.name)
    if problem:
        c.add(f"{path}.name", problem)
    if len(d.attributes) + len(d.capacity) > MAX_ATTRIBUTES_AND_CAPACITIES:
        c.add(
            path,
            "the total number of attributes and capacities must not exceed "
            f"{MAX_ATTRIBUTES_AND_CAPACITIES}",
        )
    n_values = sum(len(a.values()) for a in d.attributes.values())
    if n_values > MAX_ATTRIBUTE_VALUES:
        c.add(path, f"the total number of attribute values must not exceed {MAX_ATTRIBUTE_VALUES}")
    for name, attr in d.attributes.items():
        _validate_attribute(c, name, attr, f"{path}.attributes[{name!r}]")
    for name, cap in d.capacity.items():
        _validate_capacity(c, name, cap, f"{path}.capacity[{name!r}]", d.multi_allocatable)
    _validate_consumption(c, d, path)
    c.too_many(f"{path}.taints", d.taints, MAX_TAINTS)
    for i, taint in enumerate(d.taints):
        if not taint.key:
            c.add(f"{path}.taints[{i}].key", "must not be empty")
        if taint.effect not in _TAINT_EFFECTS:
            c.add(f"{path}.taints[{i}].effect", f"must be one of {', '.join(_TAINT_EFFECTS)}")
    c.too_many(f"{path}.bindingConditions", d.binding_conditions, MAX_BINDING_CONDITIONS)
    c.too_many(
        f"{path}.bindingFailureConditions", d.binding_failure_conditions, MAX_BINDING_CONDITIONS
    )
    if d.binding_failure_conditions and not d.binding_conditions:
        c.add(f"{path}.bindingFailureConditions", "requires bindingConditions")
    chosen = [
        n
        for n, v in (
            ("nodeName", d.node_name),
            ("nodeSelector", d.node_selector),
            ("allNodes", d.all_nodes),
        )
        if v is not None
    ]
    if per_device:
        if len(chosen) != 1:
            c.add(
                path,
                "exactly one of `nodeName`, `nodeSelector`, or `allNodes` is required "
                "when `perDeviceNodeSelection` is set to true in the ResourceSlice spec",
            )
        if d.all_nodes is False:
            c.add(f"{path}.allNodes", "must be either unset or set to true")
        if d.node_selector is not None:
            _validate_node_selector(c, d.node_selector, f"{path}.nodeSelector")
    elif chosen:
        c.add(
            path,
            "`nodeName`, `nodeSelector` and `allNodes` can only be set if "
            "`perDeviceNodeSelection` is set to true in the ResourceSlice spec",
        )


def _validate_attribute(c: _Collector, name: str, attr: DeviceAttribute, path: str) -> None:
    problem = validate_qualified_name(name)
    if problem:
        c.add(path, problem)
    if attr.is_list and not attr.value:
        c.add(f"{path}.{attr.kind}", "must not be empty if specified")
    for v in attr.values():
        if attr.scalar_kind in ("string", "version") and len(v) > MAX_ATTRIBUTE_VALUE_LENGTH:
            c.add(
                f"{path}.{attr.kind}",
                f"must be no more than {MAX_ATTRIBUTE_VALUE_LENGTH} characters",
            )
        if attr.scalar_kind == "version" and not is_semver(v):
            c.add(
                f"{path}.{attr.kind}",
                f"{v!r} must be a string compatible with semver.org spec 2.0.0",
            )


def _validate_capacity(
    c: _Collector, name: str, cap: DeviceCapacity, path: str, multi: bool
) -> None:
    problem = validate_qualified_name(name)
    if problem:
        c.add(path, problem)
    if cap.value.sign() < 0:
        c.add(f"{path}.value", "must be non-negative")
    policy = cap.request_policy
    if policy is None:
        return
    if not multi:
        c.add(f"{path}.requestPolicy", "can only be set when allowMultipleAllocations is true")
        return
    ppath = f"{path}.requestPolicy"
    if policy.valid_values and policy.valid_range is not None:
        c.add(ppath, "only one of validValues or validRange may be set")
    if (policy.valid_values or policy.valid_range is not None) and policy.default is None:
        c.add(f"{ppath}.default", "required when validValues or validRange is defined")
    if policy.default is not None and policy.default > cap.value:
        c.add(f"{ppath}.default", f"is larger than capacity value: {cap.value}")
    if policy.valid_values:
        _validate_valid_values(c, policy.valid_values, policy.default, cap.value, ppath)
    rng = policy.valid_range
    if rng is not None:
        if rng.min is None:
            c.add(f"{ppath}.validRange.min", "required when validRange is defined")
        else:
            if rng.min > cap.value:
                c.add(f"{ppath}.validRange.min", f"min is larger than capacity value: {cap.value}")
            if policy.default is not None and policy.default < rng.min:
                c.add(f"{ppath}.default", f"default is less than min: {rng.min}")
        if rng.max is not None:
            if rng.min is not None and rng.min > rng.max:
                c.add(f"{ppath}.validRange.max", f"min is larger than max: {rng.max}")
            if rng.max > cap.value:
                c.add(f"{ppath}.validRange.max", f"max is larger than capacity value: {cap.value}")
        if rng.step is not None and rng.step.sign() <= 0:
            c.add(f"{ppath}.validRange.step", "must be greater than zero")


def _validate_valid_values(
    c: _Collector,
    values: Sequence[Quantity],
    default: Quantity | None,
    maximum: Quantity,
    path: str,
) -> None:
    if len(values) > MAX_VALID_VALUES:
        c.add(f"{path}.validValues", f"must have at most {MAX_VALID_VALUES} items")
    for i in range(1, len(values)):
        if values[i] <= values[i - 1]:
            c.add(f"{path}.validValues[{i}]", "values must be unique and sorted in ascending order")
    for i, v in enumerate(values):
        if v > maximum:
            c.add(f"{path}.validValues[{i}]", f"option is larger than capacity value: {maximum}")
    if default is not None and default not in values:
        c.add(f"{path}.default", "default value is not valid according to the requestPolicy")


def _validate_consumption(c: _Collector, d: Device, path: str) -> None:
    if len(d.consumes_counters) > MAX_COUNTER_CONSUMPTIONS_PER_DEVICE:
        c.add(
            f"{path}.consumesCounters",
            f"must have at most {MAX_COUNTER_CONSUMPTIONS_PER_DEVICE} items",
        )
    seen: set[str] = set()
    for i, cc in enumerate(d.consumes_counters):
        where = f"{path}.consumesCounters[{i}]"
        if not cc.counter_set:
            c.add(f"{where}.counterSet", "must not be empty")
        c.unique(f"{where}.counterSet", "counter set", cc.counter_set, seen)
        c.counters(f"{where}.counters", cc.counters, MAX_COUNTERS_PER_CONSUMPTION)


def _validate_counter_sets(c: _Collector, s: ResourceSlice) -> None:
    sets = s.spec.shared_counters
    if len(sets) > MAX_COUNTER_SETS:
        c.add("spec.sharedCounters", f"must have at most {MAX_COUNTER_SETS} items")
    seen: set[str] = set()
    for i, cs in enumerate(sets):
        problem = _dns_label_problem(cs.name)
        if problem:
            c.add(f"spec.sharedCounters[{i}].name", problem)
        c.unique(f"spec.sharedCounters[{i}].name", "counter set", cs.name, seen)
        c.counters(f"spec.sharedCounters[{i}].counters", cs.counters, MAX_COUNTERS_PER_SET)
        for name in cs.counters:
            problem = _dns_label_problem(name)
            if problem:
                c.add(f"spec.sharedCounters[{i}].counters[{name!r}]", problem)


def check_resource_slice(s: ResourceSlice) -> None:
    """Raise ValidationError if the slice violates any API rule."""
    errors = validate_resource_slice(s)
    if errors:
        raise ValidationError(errors)


# --------------------------------------------------------------------------- classes


def _validate_selectors(c: _Collector, selectors: Sequence[DeviceSelector], path: str) -> None:
    if len(selectors) > MAX_SELECTORS:
        c.add(path, f"must have at most {MAX_SELECTORS} items")
    for i, sel in enumerate(selectors):
        if sel.cel is None:
            c.add(f"{path}[{i}].cel", "required")
            continue
        expr = sel.cel.expression
        if not expr.strip():
            c.add(f"{path}[{i}].cel.expression", "required")
        elif len(expr) > MAX_CEL_LENGTH:
            c.add(
                f"{path}[{i}].cel.expression", f"must be no more than {MAX_CEL_LENGTH} bytes long"
            )
        elif c.compile_cel:
            # Imported here: validating slices (the node plugin's publisher) needs no CEL
            # engine, and loading it costs the plugin tens of MiB of memory.
            from drakit.allocator.cel import CELCompileError, compile_selector  # noqa: PLC0415

            try:
                compile_selector(expr)
            except CELCompileError as exc:
                # first line only: it carries the reason and the position
                c.add(f"{path}[{i}].cel.expression", str(exc).splitlines()[0].rstrip(":"))


def validate_device_class(dc: DeviceClass, *, compile_cel: bool = False) -> list[FieldError]:
    """Every API rule a DeviceClass violates (empty list = valid).

    ``compile_cel``: also compile the selectors, as the API server does for new objects
    (off by default: the allocator reports compile errors when it evaluates them).
    """
    c = _Collector(f"DeviceClass {dc.metadata.name or '(unnamed)'}", compile_cel=compile_cel)
    _validate_selectors(c, dc.spec.selectors, "spec.selectors")
    if len(dc.spec.config) > MAX_CONFIGS:
        c.add("spec.config", f"must have at most {MAX_CONFIGS} items")
    for i, cfg in enumerate(dc.spec.config):
        _validate_opaque(c, cfg.opaque, f"spec.config[{i}]")
    return c.errors


def _validate_opaque(c: _Collector, opaque: OpaqueDeviceConfiguration | None, path: str) -> None:
    if opaque is None:
        c.add(f"{path}.opaque", "required")
        return
    problem = _dns_subdomain_problem(opaque.driver, MAX_DRIVER_NAME_LENGTH)
    if problem:
        c.add(f"{path}.opaque.driver", problem)
    if opaque.parameters is None:
        c.add(f"{path}.opaque.parameters", "required")
    elif len(json.dumps(thaw(opaque.parameters))) > MAX_OPAQUE_PARAMETERS_LENGTH:
        c.add(
            f"{path}.opaque.parameters",
            f"must be no more than {MAX_OPAQUE_PARAMETERS_LENGTH} bytes of JSON",
        )


def check_device_class(dc: DeviceClass, *, compile_cel: bool = False) -> None:
    """Raise ValidationError if the class violates any API rule."""
    errors = validate_device_class(dc, compile_cel=compile_cel)
    if errors:
        raise ValidationError(errors)


# --------------------------------------------------------------------------- claims


def validate_resource_claim(claim: ResourceClaim, *, compile_cel: bool = False) -> list[FieldError]:
    """Every API rule a ResourceClaim's spec violates (empty list = valid); ``compile_cel``
    as for :func:`validate_device_class`."""
    name = (
        f"{claim.metadata.namespace}/{claim.metadata.name}"
        if claim.metadata.namespace
        else claim.metadata.name or "(unnamed)"
    )
    c = _Collector(f"ResourceClaim {name}", compile_cel=compile_cel)
    _validate_device_claim(c, claim.spec.devices, "spec.devices")
    alloc = claim.status.allocation
    if alloc is not None and len(alloc.devices.results) > MAX_RESULTS:
        c.add("status.allocation.devices.results", f"must have at most {MAX_RESULTS} items")
    if len(claim.status.reserved_for) > MAX_RESERVED_FOR:
        c.add("status.reservedFor", f"must have at most {MAX_RESERVED_FOR} items")
    return c.errors


def _validate_device_claim(c: _Collector, dc: DeviceClaim, path: str) -> None:
    if len(dc.requests) > MAX_REQUESTS:
        c.add(f"{path}.requests", f"must have at most {MAX_REQUESTS} items")
    names: dict[str, set[str]] = {}
    for i, req in enumerate(dc.requests):
        where = f"{path}.requests[{i}]"
        if req.name in names:
            c.add(f"{where}.name", f"duplicate request name {req.name!r}")
        names[req.name] = {s.name for s in req.first_available}
        _validate_request(c, req, where)
    if len(dc.constraints) > MAX_CONSTRAINTS:
        c.add(f"{path}.constraints", f"must have at most {MAX_CONSTRAINTS} items")
    for i, con in enumerate(dc.constraints):
        where = f"{path}.constraints[{i}]"
        _validate_request_refs(c, con.requests, names, f"{where}.requests")
        given = [a for a in (con.match_attribute, con.distinct_attribute) if a is not None]
        if len(given) != 1:
            c.add(where, "exactly one of `matchAttribute` or `distinctAttribute` is required")
        for key, attr in (
            ("matchAttribute", con.match_attribute),
            ("distinctAttribute", con.distinct_attribute),
        ):
            if attr is not None:
                problem = validate_qualified_name(attr, fully_qualified=True)
                if problem:
                    c.add(f"{where}.{key}", problem)
    if len(dc.config) > MAX_CONFIGS:
        c.add(f"{path}.config", f"must have at most {MAX_CONFIGS} items")
    for i, cfg in enumerate(dc.config):
        _validate_request_refs(c, cfg.requests, names, f"{path}.config[{i}].requests")
        _validate_opaque(c, cfg.opaque, f"{path}.config[{i}]")


def _validate_request_refs(
    c: _Collector, refs: Iterable[str], names: dict[str, set[str]], path: str
) -> None:
    for j, ref in enumerate(refs):
        parent, _, sub = ref.partition("/")
        if parent not in names or (sub and sub not in names[parent]):
            c.add(
                f"{path}[{j}]",
                f"{ref!r} must be the name of a request in the claim or the "
                "name of a request and a subrequest separated by '/'",
            )


def _validate_request(c: _Collector, req: DeviceRequest, path: str) -> None:
    problem = _dns_label_problem(req.name)
    if problem:
        c.add(f"{path}.name", problem)
    if (req.exactly is None) == (not req.first_available):
        c.add(path, "exactly one of `exactly` or `firstAvailable` is required")
    if req.exactly is not None:
        _validate_exact_like(c, req.exactly, f"{path}.exactly")
    if len(req.first_available) > MAX_SUBREQUESTS:
        c.add(f"{path}.firstAvailable", f"must have at most {MAX_SUBREQUESTS} items")
    seen: set[str] = set()
    for i, sub in enumerate(req.first_available):
        where = f"{path}.firstAvailable[{i}]"
        problem = _dns_label_problem(sub.name)
        if problem:
            c.add(f"{where}.name", problem)
        c.unique(f"{where}.name", "subrequest name", sub.name, seen)
        _validate_exact_like(c, sub, where)


def _validate_exact_like(
    c: _Collector, req: ExactDeviceRequest | DeviceSubRequest, path: str
) -> None:
    class_name, selectors, mode = req.device_class_name, req.selectors, req.allocation_mode
    count, tolerations = req.count, req.tolerations
    problem = _dns_subdomain_problem(class_name)
    if problem:
        c.add(f"{path}.deviceClassName", problem)
    _validate_selectors(c, selectors, f"{path}.selectors")
    if mode in ("", ALLOCATION_MODE_EXACT_COUNT):
        if count is not None and count <= 0:
            c.add(f"{path}.count", "must be greater than zero")
    elif mode == ALLOCATION_MODE_ALL:
        if count:
            c.add(f"{path}.count", "must not be specified when allocationMode is 'All'")
    else:
        c.add(f"{path}.allocationMode", f"must be 'All' or 'ExactCount', not {mode!r}")
    if len(tolerations) > MAX_TOLERATIONS:
        c.add(f"{path}.tolerations", f"must have at most {MAX_TOLERATIONS} items")
    for i, t in enumerate(tolerations):
        if t.operator not in _TOLERATION_OPERATORS:
            c.add(f"{path}.tolerations[{i}].operator", f"unknown operator {t.operator!r}")
        if t.operator == "Exists" and t.value:
            c.add(f"{path}.tolerations[{i}].value", "must be empty when operator is Exists")
        if t.effect and t.effect not in _TAINT_EFFECTS:
            c.add(f"{path}.tolerations[{i}].effect", f"must be one of {', '.join(_TAINT_EFFECTS)}")


def check_resource_claim(claim: ResourceClaim, *, compile_cel: bool = False) -> None:
    """Raise ValidationError if the claim violates any API rule."""
    errors = validate_resource_claim(claim, compile_cel=compile_cel)
    if errors:
        raise ValidationError(errors)
