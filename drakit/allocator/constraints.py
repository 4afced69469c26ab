"""matchAttribute and distinctAttribute constraints with undo stacks.

A constraint applies to a device picked for a request when its ``requests`` list is empty
or names the request (or ``request/subrequest``). Attribute lookup: the exact name first,
then, when the name's domain is the device's driver, the bare id. A device without the
attribute never satisfies a constraint.

With list-type attributes (the default), values are sets (a scalar is a one-element set):
matchAttribute keeps the running intersection on a stack and requires it non-empty;
distinctAttribute requires the new set to be disjoint from every earlier device's. Without
the feature, scalars are compared by type and value.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from drakit.allocator.model import DeviceAttribute, DeviceID

__all__ = ["Constraint", "DistinctAttribute", "MatchAttribute", "lookup_attribute"]


def lookup_attribute(device_id: DeviceID, attributes: Any, name: str) -> DeviceAttribute | None:
    attr: DeviceAttribute | None = attributes.get(name)
    if attr is not None:
        return attr
    domain, sep, ident = name.partition("/")
    if sep and domain == device_id.driver:
        return attributes.get(ident)  # type: ignore[no-any-return]
    return None


def _as_set(attr: DeviceAttribute) -> tuple[str, frozenset[Any]] | None:
    kind = attr.scalar_kind
    values = attr.values()
    if not values:
        return None
    if kind == "bool":
        # keep True/1 apart from ints: the kind already separates them
        return kind, frozenset(values)
    return kind, frozenset(values)


class Constraint:
    """Base: which requests a constraint covers."""

    __slots__ = ("attribute", "request_names")

    def __init__(self, request_names: Collection[str], attribute: str) -> None:
        self.request_names = frozenset(request_names)
        self.attribute = attribute

    def applies(self, request_name: str, parent_name: str | None) -> bool:
        names = self.request_names
        if not names:
            return True
        if parent_name is not None:
            return parent_name in names or f"{parent_name}/{request_name}" in names
        return request_name in names

    def add(self, device_id: DeviceID, attributes: Any) -> bool:  # pragma: no cover
        raise NotImplementedError

    def remove(self) -> None:  # pragma: no cover
        raise NotImplementedError


class MatchAttribute(Constraint):
    __slots__ = ("_first", "_list_mode", "_stack")

    def __init__(self, request_names: Collection[str], attribute: str, list_mode: bool) -> None:
        super().__init__(request_names, attribute)
        self._list_mode = list_mode
        self._stack: list[tuple[str, frozenset[Any]]] = []
        self._first: DeviceAttribute | None = None

    def add(self, device_id: DeviceID, attributes: Any) -> bool:
        attr = lookup_attribute(device_id, attributes, self.attribute)
        if attr is None:
            return False
        stack = self._stack
        if self._list_mode:
            new = _as_set(attr)
            if new is None:
                return False
            if stack:
                kind, current = stack[-1]
                if kind != new[0]:
                    return False
                narrowed = current & new[1]
                if not narrowed:
                    return False
                new = (kind, narrowed)
            stack.append(new)
            return True
        if not stack:
            self._first = attr
        else:
            first = self._first
            if (
                attr.kind not in DeviceAttribute.SCALAR_KINDS
                or first is None
                or first.kind != attr.kind
                or first.value != attr.value
            ):
                return False
        stack.append(("", frozenset()))
        return True

    def remove(self) -> None:
        self._stack.pop()


class DistinctAttribute(Constraint):
    __slots__ = ("_list_mode", "_stack")

    def __init__(self, request_names: Collection[str], attribute: str, list_mode: bool) -> None:
        super().__init__(request_names, attribute)
        self._list_mode = list_mode
        self._stack: list[DeviceAttribute] = []

    def add(self, device_id: DeviceID, attributes: Any) -> bool:
        attr = lookup_attribute(device_id, attributes, self.attribute)
        if attr is None:
            return False
        if self._list_mode:
            new = _as_set(attr)
            if new is None:
                return False
            for old in self._stack:
                existing = _as_set(old)
                if existing is not None and existing[0] == new[0] and existing[1] & new[1]:
                    return False
        else:
            if attr.kind not in DeviceAttribute.SCALAR_KINDS:
                return False
            for old in self._stack:
                if old.kind == attr.kind and old.value == attr.value:
                    return False
        self._stack.append(attr)
        return True

    def remove(self) -> None:
        self._stack.pop()
