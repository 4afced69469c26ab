"""The ``device`` variable of a selector evaluation, as plain Python values.

:func:`device_context` builds the whole variable at once. :class:`DeviceVariables` is the
same variable built on demand: the allocator keeps one per device, and a selector that
reads only some fields (:mod:`drakit.allocator.cel.projection`) converts only those. Converting
every attribute and capacity (semver and quantity values included) of every device was
most of the allocator's first pass after the slices changed, for selectors that mostly
read ``device.driver``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Final

from drakit.allocator.cel.library import quantity_value, semver_value
from drakit.allocator.model import DeviceAttribute, DeviceCapacity

__all__ = ["MISSING", "DeviceVariables", "device_context", "qualify"]

#: What :meth:`DeviceVariables.value` returns for an id the device does not have.
MISSING: Final = ("missing",)


def qualify(name: str, driver: str) -> tuple[str, str]:
    """Split a (possibly unqualified) attribute name into (domain, id)."""
    domain, sep, ident = name.rpartition("/")
    return (domain, ident) if sep else (driver, name)


def _attribute_value(attr: DeviceAttribute) -> Any:
    kind = attr.kind
    if kind == "version":
        return semver_value(attr.value)
    if kind == "versions":
        return [semver_value(v) for v in attr.value]
    if kind in DeviceAttribute.LIST_KINDS:
        return list(attr.value)
    return attr.value


def _convert(map_name: str, item: Any) -> Any:
    """The CEL value of one attribute or capacity; ValueError for a version that is not
    valid semver (left out of the device: a selector reading it fails, as in Kubernetes)."""
    if map_name == "attributes":
        return _attribute_value(item)
    return quantity_value(item.value)


def device_context(
    driver: str,
    attributes: Mapping[str, DeviceAttribute],
    capacity: Mapping[str, DeviceCapacity],
    allow_multiple_allocations: bool = False,
) -> Any:
    """The evaluation variables (the ``device`` variable, plain Python values) of one device;
    :meth:`~drakit.allocator.cel.engine.Selector.matches` binds them to an engine context for the
    evaluation only.

    Build them once per device and reuse it. Version attributes that are not valid semver
    make every evaluation that touches them fail, as in Kubernetes.
    """
    return DeviceVariables(driver, attributes, capacity, allow_multiple_allocations).whole()


class DeviceVariables(Mapping[str, Any]):
    """:func:`device_context` of one device, converted on demand.

    As a mapping it is ``{"device": <the whole variable>}``, built on first access and
    kept. :meth:`scalar`, :meth:`domain` and :meth:`value` convert only what they are
    asked for (and keep it). Not thread-safe for the first conversion of a value; two
    threads converting the same value store equal results.
    """

    __slots__ = (
        "_attributes",
        "_by_domain",
        "_capacity",
        "_converted",
        "_whole",
        "allow_multiple",
        "driver",
    )

    def __init__(
        self,
        driver: str,
        attributes: Mapping[str, DeviceAttribute],
        capacity: Mapping[str, DeviceCapacity],
        allow_multiple_allocations: bool = False,
    ) -> None:
        self.driver = driver
        self.allow_multiple = allow_multiple_allocations
        self._attributes = attributes
        self._capacity = capacity
        # made on first use: a selector keyed by raw values may never convert anything
        self._by_domain: dict[str, dict[str, dict[str, Any]]] | None = None
        self._converted: dict[tuple[str, str, str], Any] | None = None
        self._whole: dict[str, Any] | None = None

    # -- the mapping: the whole variable ---------------------------------------------------
    def __getitem__(self, key: str) -> Any:
        if key != "device":
            raise KeyError(key)
        return self.whole()["device"]

    def __iter__(self) -> Iterator[str]:
        return iter(("device",))

    def __len__(self) -> int:
        return 1

    def whole(self) -> dict[str, Any]:
        """``{"device": {...}}`` with every field converted (built once)."""
        if self._whole is None:
            device = {
                "driver": self.driver,
                "attributes": self._whole_map("attributes"),
                "capacity": self._whole_map("capacity"),
                "allowMultipleAllocations": self.allow_multiple,
            }
            self._whole = {"device": device}
        return self._whole

    def _whole_map(self, map_name: str) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for domain in self._domains(map_name):
            converted = self.domain(map_name, domain)
            if converted is not None:
                out[domain] = converted
        return out

    # -- parts -----------------------------------------------------------------------------
    def raw_items(self, map_name: str) -> Mapping[str, Any]:
        """The model's ``attributes`` or ``capacity`` of the device, not converted."""
        return self._attributes if map_name == "attributes" else self._capacity

    def scalar(self, name: str) -> Any:
        """``device.driver`` or ``device.allowMultipleAllocations``."""
        return self.driver if name == "driver" else self.allow_multiple

    def domain(self, map_name: str, domain: str) -> dict[str, Any] | None:
        """One domain of ``attributes``/``capacity`` converted, or None when the device has
        no entry in it. A version that is not valid semver is left out."""
        ids = self._domains(map_name).get(domain)
        if ids is None:
            return None
        out: dict[str, Any] = {}
        for ident in ids:
            value = self.value(map_name, domain, ident)
            if value is not MISSING:
                out[ident] = value
        return out or None  # a domain of invalid versions only is not there at all

    def has_domain(self, map_name: str, domain: str) -> bool:
        """Whether the device has ``domain`` (at least one of its values converts)."""
        ids = self._domains(map_name).get(domain, {})
        return any(self.value(map_name, domain, i) is not MISSING for i in ids)

    def whole_map(self, map_name: str) -> dict[str, dict[str, Any]]:
        """``device.attributes`` or ``device.capacity``, whole."""
        value: dict[str, dict[str, Any]] = self.whole()["device"][map_name]
        return value

    def value(self, map_name: str, domain: str, ident: str) -> Any:
        """One attribute or capacity converted, or :data:`MISSING`."""
        key = (map_name, domain, ident)
        converted = self._converted
        if converted is None:
            converted = self._converted = {}
        elif key in converted:
            return converted[key]
        item = self._domains(map_name).get(domain, {}).get(ident, MISSING)
        if item is not MISSING:
            try:
                item = _convert(map_name, item)
            except ValueError:
                item = MISSING
        converted[key] = item
        return item

    def _domains(self, map_name: str) -> dict[str, dict[str, Any]]:
        """domain -> id -> the model's attribute or capacity (grouped once, not converted)."""
        by_domain = self._by_domain
        if by_domain is None:
            by_domain = self._by_domain = {}
        grouped = by_domain.get(map_name)
        if grouped is None:
            items = self.raw_items(map_name)
            grouped = {
                domain: {ident: items[name] for ident, name in names}
                for domain, names in _layout(self.driver, tuple(items)).items()
            }
            by_domain[map_name] = grouped
        return grouped


# Devices of one driver mostly share one set of attribute (and capacity) names: how the
# names group into domains is worked out once per set. Bounded: cleared when full.
_LAYOUTS: dict[tuple[str, tuple[str, ...]], dict[str, tuple[tuple[str, str], ...]]] = {}
_MAX_LAYOUTS: Final = 1024


def _layout(driver: str, names: tuple[str, ...]) -> dict[str, tuple[tuple[str, str], ...]]:
    """domain -> ((id, name), ...) for a device of ``driver`` with these attribute or
    capacity ``names``, in first-seen order of the ids; when two names qualify to the
    same id (``id`` and ``<driver>/id``), the later name wins."""
    key = (driver, names)
    layout = _LAYOUTS.get(key)
    if layout is None:
        grouped: dict[str, dict[str, str]] = {}
        for name in names:
            domain, ident = qualify(name, driver)
            grouped.setdefault(domain, {})[ident] = name
        layout = {domain: tuple(ids.items()) for domain, ids in grouped.items()}
        if len(_LAYOUTS) >= _MAX_LAYOUTS:
            _LAYOUTS.clear()
        _LAYOUTS[key] = layout
    return layout
