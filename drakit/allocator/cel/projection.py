"""Which parts of the ``device`` variable a selector can read, decided from its text.

Binding a device's variables to the engine converts every value into the engine's own
(about 10-20 µs per attribute or capacity, nested maps included), and the first
evaluation of every selector on every device pays it: it dominates the allocator's first
pass after the ResourceSlices changed. Most selectors read a handful of fields
(``device.driver == "..."``, ``device.attributes["dom"].model``), so a selector binds
only those (:meth:`Projection.apply`).

The analysis is conservative. Every reference to the ``device`` variable (a ``device``
identifier not preceded by ``.``) must be one of

* ``device.driver`` / ``device.allowMultipleAllocations``;
* ``device.attributes["dom"].id`` / ``device.attributes["dom"].?id`` (and ``capacity``),
  the domain a plain string literal and ``id`` not followed by ``(``: only that entry
  of that domain is needed;
* ``device.attributes["dom"]`` followed by anything else: that whole domain;
* ``device.attributes`` followed by anything else: every domain.

Anything else (``device`` on its own, an unknown field, a comprehension variable named
``device``) binds the whole device. A projection never changes an answer: every value an
expression can reach through the references above is bound exactly as in the whole device,
a domain the device has is present (possibly emptied of the ids nobody reads), and a
domain or id the device lacks stays missing, so "no such key" errors are the same.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from drakit.allocator.cel.rewrite import PLAIN_STRING, CELSyntaxError, Token, tokenize
from drakit.allocator.cel.variables import MISSING, DeviceVariables
from drakit.allocator.semver import is_semver

__all__ = ["ALL", "Projection", "projection_of"]

#: "Every entry": a whole domain, or every domain of ``attributes``/``capacity``.
ALL: Final = None

_SCALARS: Final = ("driver", "allowMultipleAllocations")
_MAPS: Final = ("attributes", "capacity")

# domain -> ids read (ALL: the whole domain); ALL for the whole map.
Domains = dict[str, frozenset[str] | None] | None
# map name, domain, ((id, "domain/id"), ...) sorted by id: what a raw key reads
_RawPlan = tuple[tuple[str, str, tuple[tuple[str, str], ...]], ...]
_RAW_TAG: Final = ("raw",)


@dataclass(frozen=True)
class Projection:
    """The parts of ``device`` one selector reads (see the module docstring)."""

    scalars: frozenset[str]
    attributes: Domains
    capacity: Domains
    _scalar_order: tuple[str, ...] = field(init=False, repr=False, compare=False)
    _raw_plan: _RawPlan | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_scalar_order", tuple(sorted(self.scalars)))
        object.__setattr__(self, "_raw_plan", _raw_plan(self.attributes, self.capacity))

    def raw_key(self, device: DeviceVariables) -> tuple[Any, ...] | None:
        """Like :meth:`key`, from the model's values of what the selector reads, without
        converting them; None when that cannot decide (then use :meth:`key`).

        The view of a domain is its presence and the converted values of the ids read;
        a converted value is a function of the model's value, and presence holds when
        one of those values converts. So devices with equal raw keys have equal views.
        None when the selector reads whole domains or maps, when no id read converts
        (presence then depends on the domain's other entries) and when a device has an
        id spelled both bare and qualified (which one counts depends on their order).
        Raw keys never equal keys of :meth:`key`: they start with a tag of their own."""
        plan = self._raw_plan
        if plan is None:
            return None
        driver = device.driver
        parts: list[Any] = [_RAW_TAG]
        for name in self._scalar_order:  # a loop, not a generator: once per fresh device
            parts.append(device.scalar(name))
        for map_name, domain, ids in plan:
            items = device.raw_items(map_name)
            bare = domain == driver
            present = False
            values: list[Any] = []
            for ident, qualified in ids:
                item = items.get(qualified)
                if bare:
                    plain = items.get(ident)
                    if plain is not None:
                        if item is not None:
                            return None
                        item = plain
                if item is None:
                    values.append(None)
                    continue
                tagged, converts = _raw_value(map_name, item)
                present = present or converts
                values.append(tagged)
            if not present:
                return None
            parts.append(tuple(values))
        return tuple(parts)

    def apply(self, variables: Mapping[str, Any]) -> dict[str, Any]:
        """``variables`` (:class:`~drakit.allocator.cel.variables.DeviceVariables` or a
        :func:`~drakit.allocator.cel.variables.device_context`) reduced to what the selector
        reads; only that is converted."""
        device = _access(variables)
        out = {name: device.scalar(name) for name in self.scalars}
        for name, domains in (("attributes", self.attributes), ("capacity", self.capacity)):
            if domains is None:
                out[name] = device.whole_map(name)
            elif domains:
                out[name] = _pick(device, name, domains)
        return {"device": out}

    def key(self, variables: Mapping[str, Any]) -> tuple[Any, ...]:
        """A hashable value equal for two devices exactly when :meth:`apply` gives them
        equal views (every leaf tagged with its type: ``1``, ``1.0`` and ``True`` differ).
        An evaluation depends on the view alone, so devices with equal keys get equal
        answers."""
        device = _access(variables)
        parts: list[Any] = [(name, _frozen(device.scalar(name))) for name in sorted(self.scalars)]
        for name, domains in (("attributes", self.attributes), ("capacity", self.capacity)):
            if domains is None:
                parts.append(_frozen(device.whole_map(name)))
                continue
            for domain in sorted(domains):
                ids = domains[domain]
                if not device.has_domain(name, domain):
                    parts.append((domain, MISSING))
                elif ids is None:
                    parts.append((domain, _frozen(device.domain(name, domain))))
                else:
                    values = tuple((i, _frozen(device.value(name, domain, i))) for i in sorted(ids))
                    parts.append((domain, values))
        return tuple(parts)


class _Device(Protocol):
    def scalar(self, name: str) -> Any: ...

    def domain(self, map_name: str, domain: str) -> dict[str, Any] | None: ...

    def has_domain(self, map_name: str, domain: str) -> bool: ...

    def value(self, map_name: str, domain: str, ident: str) -> Any: ...

    def whole_map(self, map_name: str) -> dict[str, dict[str, Any]]: ...


class _Plain:
    """The accessors of :class:`DeviceVariables` over a whole ``device_context`` dict."""

    __slots__ = ("_device",)

    def __init__(self, variables: Mapping[str, Any]) -> None:
        self._device: dict[str, Any] = variables["device"]

    def scalar(self, name: str) -> Any:
        return self._device[name]

    def domain(self, map_name: str, domain: str) -> dict[str, Any] | None:
        found: dict[str, Any] | None = self._device[map_name].get(domain)
        return found

    def has_domain(self, map_name: str, domain: str) -> bool:
        return domain in self._device[map_name]

    def value(self, map_name: str, domain: str, ident: str) -> Any:
        return self._device[map_name].get(domain, {}).get(ident, MISSING)

    def whole_map(self, map_name: str) -> dict[str, dict[str, Any]]:
        found: dict[str, dict[str, Any]] = self._device[map_name]
        return found


def _access(variables: Mapping[str, Any]) -> _Device:
    return variables if isinstance(variables, DeviceVariables) else _Plain(variables)


def _pick(device: _Device, name: str, wanted: dict[str, frozenset[str] | None]) -> Any:
    picked: dict[str, dict[str, Any]] = {}
    for domain, ids in wanted.items():
        if not device.has_domain(name, domain):
            continue  # a missing domain stays missing
        if ids is None:
            picked[domain] = device.domain(name, domain) or {}
            continue
        entries = {}
        for ident in ids:
            value = device.value(name, domain, ident)
            if value is not MISSING:
                entries[ident] = value
        picked[domain] = entries
    return picked


def _raw_plan(attributes: Domains, capacity: Domains) -> _RawPlan | None:
    """What :meth:`Projection.raw_key` reads, or None when a whole map or domain is read."""
    plan: list[tuple[str, str, tuple[tuple[str, str], ...]]] = []
    for map_name, domains in (("attributes", attributes), ("capacity", capacity)):
        if domains is None:
            return None
        for domain in sorted(domains):
            ids = domains[domain]
            if ids is None:
                return None
            plan.append((map_name, domain, tuple((i, f"{domain}/{i}") for i in sorted(ids))))
    return tuple(plan)


def _raw_value(map_name: str, item: Any) -> tuple[Any, bool]:
    """A hashable stand-in for the model's attribute or capacity ``item`` (equal
    stand-ins convert to equal values), and whether it converts at all."""
    if map_name == "capacity":
        v = item.value.value
        return ("quantity", v.numerator, v.denominator), True
    kind, value = item.kind, item.value
    if kind == "version":
        return (kind, value), is_semver(value)
    if kind == "versions":
        return (kind, value), all(is_semver(v) for v in value)
    if isinstance(value, tuple):
        return (kind, tuple((type(v), v) for v in value)), True
    return (kind, type(value), value), True


def _frozen(value: Any) -> Any:
    if isinstance(value, dict):
        return (dict, tuple(sorted((k, _frozen(v)) for k, v in value.items())))
    if isinstance(value, list):
        return (list, tuple(_frozen(v) for v in value))
    if value is MISSING:
        return value
    return (type(value), value)


class _NeedsWholeDeviceError(Exception):
    """The expression needs the whole device."""


def projection_of(expression: str) -> Projection | None:
    """The projection of ``expression``, or None when it needs the whole device (or
    does not tokenize: then it does not compile either)."""
    try:
        tokens = tokenize(expression)
        return _analyse(tokens)
    except (_NeedsWholeDeviceError, CELSyntaxError):
        return None


def _analyse(tokens: list[Token]) -> Projection:
    scalars: set[str] = set()
    maps: dict[str, dict[str, set[str] | None] | None] = {"attributes": {}, "capacity": {}}
    for i, token in enumerate(tokens):
        if token.kind != "ident" or token.text != "device":
            continue
        if (
            i > 0
            and tokens[i - 1].kind in ("punct", "optsel")
            and tokens[i - 1].text in (".", ".?")
        ):
            continue  # a field named "device" of something else
        field = _at(tokens, i + 2)
        if _at(tokens, i + 1).text != "." or field.kind != "ident":
            raise _NeedsWholeDeviceError
        if field.text in _SCALARS:
            scalars.add(field.text)
        elif field.text in _MAPS:
            _map_reference(tokens, i + 3, maps, field.text)
        else:
            raise _NeedsWholeDeviceError
    return Projection(
        frozenset(scalars),
        _freeze(maps["attributes"]),
        _freeze(maps["capacity"]),
    )


def _map_reference(
    tokens: list[Token],
    j: int,
    maps: dict[str, dict[str, set[str] | None] | None],
    name: str,
) -> None:
    """Record what ``device.<name>`` followed by ``tokens[j:]`` reads."""
    domains = maps[name]
    if domains is None:
        return  # already the whole map
    key = _at(tokens, j + 1)
    if not (
        _at(tokens, j).text == "["
        and key.kind == "str"
        and PLAIN_STRING.match(key.text)
        and _at(tokens, j + 2).text == "]"
    ):
        maps[name] = None
        return
    domain = key.text[1:-1]
    selector, ident, after = _at(tokens, j + 3), _at(tokens, j + 4), _at(tokens, j + 5)
    reads_one_id = selector.text in (".", ".?") and ident.kind == "ident" and after.text != "("
    ids = domains.get(domain, set())
    if not reads_one_id or ids is None:
        domains[domain] = None
    else:
        ids.add(ident.text)
        domains[domain] = ids


def _freeze(domains: dict[str, set[str] | None] | None) -> Domains:
    if domains is None:
        return None
    return {d: (None if ids is None else frozenset(ids)) for d, ids in domains.items()}


_END: Final = Token("end", "", -1)


def _at(tokens: list[Token], i: int) -> Token:
    return tokens[i] if i < len(tokens) else _END
