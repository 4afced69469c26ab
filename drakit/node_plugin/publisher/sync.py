"""One pool's sync: compare the desired pool with its published slices and write the difference.

The rules are the Go resourceslice controller's (k8s.io/dynamic-resource-allocation v0.37.2,
``syncPool``):

* the pool's generation is the highest ``spec.pool.generation`` among its slices; slices with
  a lower generation, or whose name carries no index of the desired slice count (or an index
  already taken), are obsolete;
* the generation is bumped by one unless nothing must be created and at most one slice must be
  updated (a single update replaces a slice atomically; anything more must not be mixed with
  the old generation by the scheduler);
* writes go in this order: obsolete slices are deleted (preconditions: UID and
  resourceVersion; NotFound is fine), changed slices are updated (PUT, so a concurrent change
  is a Conflict and the pool is synced again), missing slices are created with
  ``generateName``;
* every desired slice is validated with the API's limits *before* the first write.

drakit differs in three ways: it splits devices into slices itself (:mod:`.layout`), it also
repairs slices whose owner reference was removed, and a slice is compared as a whole spec, so
any outside change (a field added, a device edited) is undone.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from drakit.allocator.model import (
    CounterSet,
    Device,
    DeviceTaint,
    ModelError,
    ResourcePool,
    ResourceSlice,
    ResourceSliceSpec,
)
from drakit.allocator.validation import validate_resource_slice
from drakit.kubeapi.errors import NotFound
from drakit.kubeapi.objects import KubeObject
from drakit.kubeapi.resources import Resource
from drakit.node_plugin.publisher.layout import (
    InvalidPoolError,
    SliceContent,
    check_pool,
    plan_layout,
)
from drakit.node_plugin.publisher.naming import decode_index, generate_name, index_digits
from drakit.node_plugin.publisher.node import NodeIdentity

__all__ = [
    "PER_DEVICE_NODE_LABEL",
    "DroppedFields",
    "PoolState",
    "PoolSyncer",
    "SyncResult",
]

_DEVICE_PATH = re.compile(r"^spec\.devices\[(\d+)\]")

#: Label on slices of pools with per-device node selection (they have no ``spec.nodeName`` for
#: a field selector to find them by). Its value is the node name.
PER_DEVICE_NODE_LABEL = "resource.drakit.dev/node"


@dataclass(frozen=True)
class PoolState:
    """The desired content of one pool, as the backend describes it."""

    name: str
    devices: tuple[Device, ...] = ()
    shared_counters: tuple[CounterSet, ...] = ()
    #: ``spec.skipNodeOperations`` of every slice of the pool (KEP-5945).
    skip_node_operations: tuple[str, ...] = ()

    @property
    def per_device_node_selection(self) -> bool:
        """True when any device names its own nodes (then every slice of the pool does)."""
        return any(
            d.node_name is not None or d.node_selector is not None or d.all_nodes is not None
            for d in self.devices
        )


@dataclass(frozen=True)
class DroppedFields:
    """The apiserver stored less than drakit sent (a disabled feature gate drops fields)."""

    pool: str
    index: int
    sent: Mapping[str, Any]
    stored: Mapping[str, Any]

    def __str__(self) -> str:
        missing = _dropped_paths(self.sent, self.stored)
        shown = ", ".join(missing[:5]) + (
            f" (and {len(missing) - 5} more)" if len(missing) > 5 else ""
        )
        return (
            f"pool {self.pool!r} slice {self.index}: the apiserver dropped {shown or 'fields'}; "
            "is the feature gate for them disabled? Publishing what it accepts."
        )


@dataclass
class SyncResult:
    """What one sync wrote."""

    pool: str
    generation: int = 0
    slice_count: int = 0
    created: int = 0
    updated: int = 0
    deleted: int = 0
    dropped: list[DroppedFields] = field(default_factory=list)

    @property
    def writes(self) -> int:
        return self.created + self.updated + self.deleted


@dataclass
class _Existing:
    obj: KubeObject
    model: ResourceSlice | None  # None: not decodable, always obsolete

    @property
    def generation(self) -> int:
        return self.model.spec.pool.generation if self.model else -1

    @property
    def name(self) -> str:
        return str((self.obj.get("metadata") or {}).get("name", ""))


class PoolSyncer:
    """Syncs pools of one driver on one node. Not thread-safe: one worker calls ``sync``.

    ``refresh_node`` (if given) reads the Node again before slices are created, so that they
    are owned by the Node's current UID; it raises ApiError (NotFound) when the Node is gone.

    ``on_written`` / ``on_deleted`` are told about every successful write (the publisher's
    view uses them to avoid duplicates before the informer catches up).
    """

    def __init__(
        self,
        slices: Resource,
        driver: str,
        node: NodeIdentity,
        *,
        on_written: Callable[[KubeObject], None] = lambda _obj: None,
        on_deleted: Callable[[KubeObject], None] = lambda _obj: None,
        field_manager: str = "drakit-node-plugin",
        refresh_node: Callable[[], NodeIdentity] | None = None,
    ) -> None:
        self._slices = slices
        self._refresh_node = refresh_node
        self._driver = driver
        self._node = node
        self._on_written = on_written
        self._on_deleted = on_deleted
        self._field_manager = field_manager
        # (pool, index) -> (content drakit laid out, content the apiserver stored instead).
        self._accepted: dict[tuple[str, int], tuple[SliceContent, SliceContent]] = {}
        self._decoded: dict[str, dict[tuple[str, str], _Existing]] = {}
        # Pools whose spec.skipNodeOperations the apiserver dropped: not sent again.
        self._skip_dropped: set[str] = set()

    def sync(
        self, pool: str, desired: PoolState | None, existing: Sequence[KubeObject]
    ) -> SyncResult:
        """Make the published slices of ``pool`` match ``desired`` (None: the pool is gone).

        Idempotent; makes no write when they already match. Raises InvalidPoolError (before any
        write) when the desired slices break the API's rules, and ApiError when a write fails
        (the caller retries; what was written is picked up from the apiserver next time).
        """
        result = SyncResult(pool=pool)
        current = self._decode_all(pool, existing)
        if desired is None:
            self._delete(current, result)
            return result
        check_pool(pool, desired.devices, desired.shared_counters)

        generation = max((s.generation for s in current), default=0)
        published = _published_contents(current, generation)
        layout = plan_layout(desired.devices, desired.shared_counters, published)
        matched, obsolete = _classify(current, generation, len(layout))
        contents = [self._effective_content(pool, i, c) for i, c in enumerate(layout)]
        old_devices = _devices_by_name(current)
        contents = [_with_taint_times(c, old_devices) for c in contents]

        specs = [self._spec(pool, generation, len(layout), desired, c) for c in contents]
        missing = [i for i in range(len(layout)) if i not in matched]
        if missing and self._refresh_node is not None:
            # Slices go missing when the garbage collector removed them with their Node; a
            # re-registered Node has a new UID, and slices owned by the old one would be
            # collected again at once.
            self._node = self._refresh_node()
        changed = {
            i
            for i, ex in matched.items()
            if ex.model is None or ex.model.spec != specs[i] or not self._owned(ex.obj)
        }
        bump = bool(missing) or len(changed) > 1
        if bump:
            generation += 1
            specs = [replace(s, pool=replace(s.pool, generation=generation)) for s in specs]
        result.generation, result.slice_count = generation, len(layout)
        to_write = [i for i in range(len(layout)) if bump or i in changed or i in missing]
        self._validate(pool, specs, to_write)

        self._delete(obsolete, result)
        for i, ex in sorted(matched.items()):
            if i in changed or bump:
                stored = self._update(ex.obj, specs[i], desired)
                result.updated += 1
                self._check_dropped(i, layout[i], specs[i], stored, result)
        for i in missing:
            stored = self._create(i, len(layout), specs[i], desired)
            result.created += 1
            self._check_dropped(i, layout[i], specs[i], stored, result)
        return result

    def _decode_all(self, pool: str, existing: Sequence[KubeObject]) -> list[_Existing]:
        """Decoded slices; a slice whose resourceVersion did not change is not decoded again
        (decoding 4,096 devices costs more than the rest of a sync)."""
        cache = self._decoded.get(pool, {})
        fresh: dict[tuple[str, str], _Existing] = {}
        for obj in existing:
            meta = obj.get("metadata") or {}
            key = (str(meta.get("name", "")), str(meta.get("resourceVersion", "")))
            hit = cache.get(key)
            fresh[key] = hit if hit is not None else _decode(obj)
        self._decoded[pool] = fresh
        return list(fresh.values())

    def forget_pool(self, pool: str) -> None:
        """Drop what was learnt about dropped fields of ``pool`` (its description changed)."""
        for key in [k for k in self._accepted if k[0] == pool]:
            del self._accepted[key]
        self._skip_dropped.discard(pool)

    # -- desired state -------------------------------------------------------------------------

    def _effective_content(self, pool: str, index: int, content: SliceContent) -> SliceContent:
        accepted = self._accepted.get((pool, index))
        if accepted is not None and accepted[0] == content:
            return accepted[1]
        return content

    def _spec(
        self, pool: str, generation: int, count: int, desired: PoolState, content: SliceContent
    ) -> ResourceSliceSpec:
        per_device = desired.per_device_node_selection
        devices = content.devices
        if per_device:
            # Devices that name no nodes of their own are this node's.
            devices = tuple(
                d
                if d.node_name is not None or d.node_selector is not None or d.all_nodes is not None
                else replace(d, node_name=self._node.name)
                for d in devices
            )
        return ResourceSliceSpec(
            driver=self._driver,
            pool=ResourcePool(name=pool, generation=generation, resource_slice_count=count),
            node_name=None if per_device else self._node.name,
            per_device_node_selection=True if per_device else None,
            devices=devices,
            shared_counters=content.shared_counters,
            skip_node_operations=(
                () if pool in self._skip_dropped else desired.skip_node_operations
            ),
        )

    def _validate(
        self, pool: str, specs: Sequence[ResourceSliceSpec], indexes: Sequence[int]
    ) -> None:
        """Check the slices about to be written (the others equal what the apiserver holds)."""
        reasons: list[str] = []
        for i in indexes:
            spec = specs[i]
            for e in validate_resource_slice(ResourceSlice(spec=spec)):
                reasons.append(f"slice {i}: {e.field}{_device_named(spec, e.field)}: {e.reason}")
        if reasons:
            raise InvalidPoolError(pool, reasons)

    def _owned(self, obj: KubeObject) -> bool:
        refs = (obj.get("metadata") or {}).get("ownerReferences") or []
        want = self._node.owner_reference
        return any(
            r.get("uid") == want["uid"] and r.get("kind") == "Node" and r.get("controller")
            for r in refs
        )

    # -- writes --------------------------------------------------------------------------------

    def _delete(self, slices: Sequence[_Existing], result: SyncResult) -> None:
        for ex in slices:
            meta = ex.obj.get("metadata") or {}
            try:
                self._slices.delete(
                    ex.name, uid=meta.get("uid"), resource_version=meta.get("resourceVersion")
                )
            except NotFound:
                pass  # already gone: nothing changed on the server
            else:
                result.deleted += 1
            self._on_deleted(ex.obj)

    def _update(self, obj: KubeObject, spec: ResourceSliceSpec, desired: PoolState) -> KubeObject:
        body = copy.deepcopy(obj)
        body["spec"] = spec.to_dict()
        meta = body.setdefault("metadata", {})
        meta["ownerReferences"] = self._owner_references(meta.get("ownerReferences") or [])
        if desired.per_device_node_selection:
            meta.setdefault("labels", {})[PER_DEVICE_NODE_LABEL] = self._node.name
        try:
            stored = self._slices.update(body, field_manager=self._field_manager)
        except NotFound:
            self._on_deleted(obj)
            raise
        self._on_written(stored)
        return stored

    def _create(
        self, index: int, count: int, spec: ResourceSliceSpec, desired: PoolState
    ) -> KubeObject:
        meta: dict[str, Any] = {
            "generateName": generate_name(index, count, self._driver, self._node.name),
            "ownerReferences": [self._node.owner_reference],
        }
        if desired.per_device_node_selection:
            meta["labels"] = {PER_DEVICE_NODE_LABEL: self._node.name}
        stored = self._slices.create(
            {"metadata": meta, "spec": spec.to_dict()}, field_manager=self._field_manager
        )
        self._on_written(stored)
        return stored

    def _owner_references(self, refs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        want = self._node.owner_reference
        others = [r for r in refs if not (r.get("kind") == "Node" and r.get("uid") == want["uid"])]
        # Only one owner may be the controller; ours wins.
        others = [{**r, "controller": False} if r.get("controller") else r for r in others]
        return [want, *others]

    def _check_dropped(
        self,
        index: int,
        laid_out: SliceContent,
        sent: ResourceSliceSpec,
        stored_obj: KubeObject,
        result: SyncResult,
    ) -> None:
        """Learn (and report once in ``result``) what the apiserver kept of slice ``index``
        of ``result.pool`` when it is less than was sent."""
        pool = result.pool
        try:
            stored = ResourceSlice.from_dict(stored_obj).spec
        except ModelError:
            return
        if sent.skip_node_operations and not stored.skip_node_operations:
            # Not sent again (each write would be dropped and undone by the next sync).
            self._skip_dropped.add(pool)
            result.dropped.append(DroppedFields(pool, index, sent.to_dict(), stored.to_dict()))
        # Server defaults (a taint's timeAdded) are not losses: take them over first.
        sent_content = _with_taint_times(
            SliceContent(sent.devices, sent.shared_counters), _devices_by_name_of(stored.devices)
        )
        stored_content = SliceContent(stored.devices, stored.shared_counters)
        if stored_content == sent_content:
            self._accepted.pop((pool, index), None)
            return
        if self._accepted.get((pool, index)) == (laid_out, stored_content):
            return
        self._accepted[(pool, index)] = (laid_out, stored_content)
        result.dropped.append(
            DroppedFields(
                pool,
                index,
                replace(sent, devices=sent_content.devices).to_dict(),
                stored.to_dict(),
            )
        )


# -- helpers -----------------------------------------------------------------------------------


def _decode(obj: KubeObject) -> _Existing:
    try:
        return _Existing(obj, ResourceSlice.from_dict(obj))
    except ModelError:
        return _Existing(obj, None)


def _published_contents(current: Sequence[_Existing], generation: int) -> list[SliceContent | None]:
    """What each index of the current generation carries now (for a sticky layout)."""
    contents: dict[int, SliceContent] = {}
    for ex in current:
        if ex.model is None or ex.generation != generation:
            continue
        index = decode_index(ex.name)
        if index is None or index in contents or index > 1 << 20:
            continue
        contents[index] = SliceContent(ex.model.spec.devices, ex.model.spec.shared_counters)
    size = max(contents, default=-1) + 1
    return [contents.get(i) for i in range(size)]


def _classify(
    current: Sequence[_Existing], generation: int, count: int
) -> tuple[dict[int, _Existing], list[_Existing]]:
    digits = index_digits(count)
    matched: dict[int, _Existing] = {}
    obsolete: list[_Existing] = []
    for ex in sorted(current, key=lambda e: e.name):
        index = decode_index(ex.name, digits)
        if (
            ex.model is None
            or ex.generation < generation
            or index is None
            or index >= count
            or index in matched
        ):
            obsolete.append(ex)
        else:
            matched[index] = ex
    return matched, obsolete


def _devices_by_name(current: Sequence[_Existing]) -> dict[str, Device]:
    found: dict[str, Device] = {}
    for ex in current:
        if ex.model is not None:
            found.update(_devices_by_name_of(ex.model.spec.devices))
    return found


def _devices_by_name_of(devices: Sequence[Device]) -> dict[str, Device]:
    return {d.name: d for d in devices}


def _with_taint_times(content: SliceContent, old: Mapping[str, Device]) -> SliceContent:
    """Give taints without ``timeAdded`` the time of the same taint (key, value, effect) that
    is already published, so that the apiserver's default is not undone on every sync."""
    if not any(t.time_added is None for d in content.devices for t in d.taints):
        return content
    devices = tuple(_device_taint_times(d, old.get(d.name)) for d in content.devices)
    return replace(content, devices=devices)


def _device_taint_times(device: Device, old: Device | None) -> Device:
    if old is None or not device.taints:
        return device
    taints: list[DeviceTaint] = []
    for taint in device.taints:
        kept = taint
        if taint.time_added is None:
            for prior in old.taints:
                if (prior.key, prior.value, prior.effect) == (taint.key, taint.value, taint.effect):
                    kept = replace(taint, time_added=prior.time_added)
                    break
        taints.append(kept)
    return replace(device, taints=tuple(taints))


def _device_named(spec: ResourceSliceSpec, path: str) -> str:
    """`` (device 'gpu-3')`` when ``path`` points into a device, so the author finds it."""
    match = _DEVICE_PATH.match(path)
    if match is None or int(match[1]) >= len(spec.devices):
        return ""
    return f" (device {spec.devices[int(match[1])].name!r})"


def _dropped_paths(sent: Any, stored: Any, path: str = "spec") -> list[str]:
    """Field paths present in ``sent`` but missing or different in ``stored``."""
    if isinstance(sent, Mapping) and isinstance(stored, Mapping):
        out: list[str] = []
        for key, value in sent.items():
            if key not in stored:
                out.append(f"{path}.{key}")
            else:
                out.extend(_dropped_paths(value, stored[key], f"{path}.{key}"))
        return out
    if isinstance(sent, list) and isinstance(stored, list):
        out = []
        for i, value in enumerate(sent):
            if i < len(stored):
                out.extend(_dropped_paths(value, stored[i], f"{path}[{i}]"))
        return out
    return []
