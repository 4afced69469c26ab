"""The driver's entries in ``ResourceClaim.status.devices`` (KEP-4817).

A backend reports per-device status by returning ``BackendPrepared.device_status`` (one
:class:`~drakit.plugin.DeviceStatus` or None per prepared device). The
contract the core keeps:

* **Checked at prepare, under the lock.** A wrong number of entries, ``data`` that is not a
  JSON object or is over 10 KiB as ``json.dumps`` writes it (the apiserver's limit on what
  it receives), ``data`` or conditions nested so deep that the claim would exceed
  :data:`drakit.kubeapi.deepjson.MAX_DEPTH` (checked before anything walks them), a
  malformed condition
  or network data fails the prepare like any backend error: the claim's error and Event
  name the claim, the device, the field and the reason (:class:`DeviceStatusError`).
* **Written after the prepare, outside the lock.** Once the claim is recorded as prepared,
  the plugin reads the claim and sets ``status.devices`` to the list with its entries
  merged in: on this driver's own entry conditions of other types (e.g. binding conditions
  a controller set) are kept. The write is a JSON patch of this driver's entries of
  ``status.devices`` alone, each by its index (:func:`drakit.kubeapi.jsonpatch.list_map_ops`),
  guarded by the ``resourceVersion`` read (retried on a conflict): entries of other drivers
  and the allocation, whose bytes the apiserver compares byte for byte, are never sent
  back, so they keep their bytes and, under granular status authorization, the write
  changes only this driver's entries. It needs ``patch`` on ``resourceclaims/status`` and,
  with granular status authorization, ``associated-node:patch`` on
  ``resourceclaims/driver`` for the driver.
* **Best effort.** A failure to write valid status (apiserver unreachable, forbidden,
  the feature off in the cluster) never fails the prepare: the devices are usable, the
  status is informational. It is logged and reported as an Event on the claim
  (``DeviceStatusNotWritten``).
* **Removed at unprepare.** The checkpoint records which entries were reported; unprepare
  removes exactly those from the claim (a claim already gone or deallocated needs
  nothing). A failure there is logged and an Event, and the unprepare still succeeds.

Each entry carries ``driver``, ``pool``, ``device``, ``shareID`` (for a share of a
multi-allocatable device), ``conditions``, and ``data``/``networkData`` when given.
``lastTransitionTime`` of a condition is filled in by the plugin: now for a new condition
or a changed status, the previous time when the status is unchanged.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

from drakit.kubeapi.deepjson import MAX_DEPTH, depth_problem
from drakit.kubeapi.errors import ApiError, Conflict, Invalid, NotFound
from drakit.kubeapi.jsonpatch import JsonPatchable, guarded_patch, list_map_ops
from drakit.plugin.claims import ClaimRef, DeviceToPrepare
from drakit.plugin.prepared import DeviceStatus
from drakit.telemetry.logs import StructuredLogger

__all__ = [
    "CHECKPOINT_KEY",
    "DATA_MAX_BYTES",
    "ClaimStatusApi",
    "DeviceStatusError",
    "DeviceStatusWriter",
    "StatusKey",
    "build_entries",
    "merged_devices",
    "without_devices",
]

#: The apiserver's limits (k8s.io/kubernetes pkg/apis/resource/types.go, 1.37).
DATA_MAX_BYTES = 10 * 1024
MAX_CONDITIONS = 8
MAX_IPS = 16
INTERFACE_NAME_MAX = 256
HARDWARE_ADDRESS_MAX = 128

#: How deep an entry may nest: it is level 4 of its claim (claim, status, devices, entry),
#: and every claim stays within kubeapi.deepjson's bound.
ENTRY_MAX_DEPTH = MAX_DEPTH - 3

#: The checkpoint entry's key for the (pool, device, shareID) keys written for a claim.
CHECKPOINT_KEY = "deviceStatus"

#: Attempts of a read-modify-write against concurrent writers of the same claim.
WRITE_ATTEMPTS = 5

_CONDITION_STATUS = ("True", "False", "Unknown")
_REASON = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")

#: (pool, device, shareID or "") of one entry of this driver.
StatusKey = tuple[str, str, str]


class DeviceStatusError(ValueError):
    """A backend's device status cannot be written; the message names device, field, reason."""


class ClaimStatusApi(JsonPatchable, Protocol):
    """Reading a claim and patching its status (``drakit.kubeapi.resources.Resource``)."""

    def get(self, name: str, namespace: str | None = None) -> dict[str, Any]: ...


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def entry_key(entry: Mapping[str, Any]) -> StatusKey:
    return (
        str(entry.get("pool", "")),
        str(entry.get("device", "")),
        str(entry.get("shareID") or ""),
    )


# -- checking and building entries (pure) ----------------------------------------------------


def build_entries(
    driver: str,
    devices: Sequence[DeviceToPrepare],
    statuses: Sequence[DeviceStatus | None],
    now: str | None = None,
) -> list[dict[str, Any]]:
    """The ``status.devices`` entries for ``statuses`` (one per device, same order; empty:
    none). DeviceStatusError names the device, the field and the reason."""
    if not statuses:
        return []
    if len(statuses) != len(devices):
        raise DeviceStatusError(
            f"device_status has {len(statuses)} entries for {len(devices)} devices "
            "(one per device, in order, or none)"
        )
    stamp = now or _now()
    entries = []
    for device, status in zip(devices, statuses, strict=True):
        if status is None:
            continue
        if not isinstance(status, DeviceStatus):
            raise DeviceStatusError(
                f"device {device.pool}/{device.device}: device_status entry is "
                f"{type(status).__name__}, not DeviceStatus or None"
            )
        entries.append(_entry(driver, device, status, stamp))
    return entries


def _entry(driver: str, device: DeviceToPrepare, status: DeviceStatus, now: str) -> dict[str, Any]:
    where = f"device {device.pool}/{device.device}" + (
        f" share {device.share_id}" if device.share_id else ""
    )
    # Before anything walks them (json.dumps, the copies of a merge): a backend's value
    # nested deep enough to raise RecursionError there is refused as what it is.
    ips = getattr(status.network_data, "ips", None)
    free_form = {"conditions": status.conditions, "data": status.data, "networkData": {"ips": ips}}
    problem = depth_problem(free_form, ENTRY_MAX_DEPTH)
    if problem is not None:  # relative to the entry, which is level 4 of the claim
        raise DeviceStatusError(f"{where}: {problem} (the claim may nest {MAX_DEPTH})")
    entry: dict[str, Any] = {"driver": driver, "pool": device.pool, "device": device.device}
    if device.share_id:
        entry["shareID"] = device.share_id
    entry["conditions"] = _conditions(where, status.conditions, now)
    if status.data is not None:
        entry["data"] = _data(where, status.data)
    if status.network_data is not None:
        entry["networkData"] = _network_data(where, status.network_data)
    return entry


def _data(where: str, data: Any) -> dict[str, Any]:
    if not isinstance(data, Mapping):
        raise DeviceStatusError(f"{where}: data: must be a JSON object, not {type(data).__name__}")
    try:
        # Measured as the API clients send it (json.dumps's defaults: ", " and ": ",
        # non-ASCII escaped): the apiserver limits the bytes it receives, spaces included.
        text = json.dumps(data, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise DeviceStatusError(f"{where}: data: not JSON-serializable: {exc}") from None
    size = len(text.encode())
    if size > DATA_MAX_BYTES:
        raise DeviceStatusError(
            f"{where}: data: {size} bytes as JSON, over the apiserver's limit of "
            f"{DATA_MAX_BYTES} bytes (10 KiB)"
        )
    value: dict[str, Any] = json.loads(text)
    return value


def _conditions(where: str, conditions: Any, now: str) -> list[dict[str, Any]]:
    if isinstance(conditions, (str, Mapping)) or not isinstance(conditions, Sequence):
        raise DeviceStatusError(f"{where}: conditions: must be a sequence of condition mappings")
    if len(conditions) > MAX_CONDITIONS:
        raise DeviceStatusError(
            f"{where}: conditions: {len(conditions)} given, the apiserver allows {MAX_CONDITIONS}"
        )
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for i, raw in enumerate(conditions):
        field = f"{where}: conditions[{i}]"
        if not isinstance(raw, Mapping):
            raise DeviceStatusError(f"{field}: must be a mapping (type, status, reason, message)")
        condition = {str(k): v for k, v in raw.items()}
        ctype = condition.get("type")
        if not isinstance(ctype, str) or not ctype:
            raise DeviceStatusError(f"{field}.type: required (a non-empty string)")
        if ctype in seen:
            raise DeviceStatusError(f"{field}.type: {ctype!r} appears twice")
        seen.add(ctype)
        if condition.get("status") not in _CONDITION_STATUS:
            raise DeviceStatusError(
                f"{field}.status: {condition.get('status')!r} is not one of True, False, Unknown"
            )
        reason = condition.get("reason")
        if not isinstance(reason, str) or not _REASON.match(reason):
            raise DeviceStatusError(
                f"{field}.reason: {reason!r} is not a CamelCase reason (letters, digits, _ , :)"
            )
        condition.setdefault("message", "")
        condition.setdefault("lastTransitionTime", now)
        out.append(condition)
    return out


def _network_data(where: str, network: Any) -> dict[str, Any]:
    if len(network.interface_name) > INTERFACE_NAME_MAX:
        raise DeviceStatusError(
            f"{where}: network_data.interface_name: longer than {INTERFACE_NAME_MAX} characters"
        )
    if len(network.hardware_address) > HARDWARE_ADDRESS_MAX:
        raise DeviceStatusError(
            f"{where}: network_data.hardware_address: longer than {HARDWARE_ADDRESS_MAX} characters"
        )
    if isinstance(network.ips, str) or len(network.ips) > MAX_IPS:
        raise DeviceStatusError(
            f"{where}: network_data.ips: must be a sequence of at most {MAX_IPS} CIDRs"
        )
    out: dict[str, Any] = {}
    if network.interface_name:
        out["interfaceName"] = network.interface_name
    if network.ips:
        out["ips"] = [str(ip) for ip in network.ips]
    if network.hardware_address:
        out["hardwareAddress"] = network.hardware_address
    return out


# -- merging into a claim's status (pure) ----------------------------------------------------


def merged_devices(
    existing: Sequence[Mapping[str, Any]], driver: str, entries: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """``existing`` with ``entries`` (this driver's) put in: other entries unchanged; on an
    entry of the same key, conditions of types not reported stay (a controller's binding
    conditions) and a condition whose status did not change keeps its transition time."""
    new = {entry_key(e): e for e in entries}
    out: list[dict[str, Any]] = []
    for old in existing:
        key = entry_key(old)
        if old.get("driver") != driver or key not in new:
            out.append(dict(old))
            continue
        out.append(_merge_entry(old, new.pop(key)))
    out.extend(dict(e) for e in entries if entry_key(e) in new)
    return out


def _merge_entry(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(old) | dict(new)
    previous = {c.get("type"): c for c in old.get("conditions") or ()}
    conditions = []
    for reported in new.get("conditions", ()):
        condition = dict(reported)
        before = previous.pop(condition["type"], None)
        if before is not None and before.get("status") == condition.get("status"):
            condition["lastTransitionTime"] = before.get("lastTransitionTime")
        conditions.append(condition)
    merged["conditions"] = list(previous.values()) + conditions
    return merged


def without_devices(
    existing: Sequence[Mapping[str, Any]], driver: str, keys: set[StatusKey]
) -> list[dict[str, Any]]:
    """``existing`` without this driver's entries of ``keys``."""
    return [dict(e) for e in existing if not (e.get("driver") == driver and entry_key(e) in keys)]


# -- writing -----------------------------------------------------------------------------


class DeviceStatusWriter:
    """Writes and removes one driver's ``status.devices`` entries; thread-safe.

    ``unsupported()`` says why the cluster cannot hold the field ("" when it can); it is
    asked at each write, and may cache its answer.
    """

    def __init__(
        self,
        claims: ClaimStatusApi,
        driver: str,
        *,
        field_manager: str,
        unsupported: Callable[[], str] = lambda: "",
    ) -> None:
        self.claims = claims
        self.driver = driver
        self.field_manager = field_manager
        self.unsupported = unsupported

    def write(self, ref: ClaimRef, entries: Sequence[Mapping[str, Any]]) -> str:
        """Put ``entries`` into the claim's status; "" or why not (never raises)."""
        reason = self.unsupported()
        if reason:
            return reason
        return self._update(ref, lambda devices: merged_devices(devices, self.driver, entries))

    def remove(self, ref: ClaimRef, keys: set[StatusKey]) -> str:
        """Drop this driver's entries of ``keys`` from the claim; "" or why not."""
        if not keys:
            return ""
        return self._update(ref, lambda devices: without_devices(devices, self.driver, keys))

    def _update(
        self,
        ref: ClaimRef,
        change: Callable[[Sequence[Mapping[str, Any]]], list[dict[str, Any]]],
    ) -> str:
        """Read, then patch this driver's entries of ``status.devices`` guarded by the
        resourceVersion read: a concurrent writer's change makes the patch conflict, and
        the next attempt starts from its result. ``change`` maps the list read to the list
        wanted; only its entries of this driver are written."""
        for _ in range(WRITE_ATTEMPTS):
            try:
                claim = dict(self.claims.get(ref.name, ref.namespace))
            except NotFound:
                return ""  # gone: nothing to write to or remove from
            except ApiError as exc:
                return f"cannot read the claim: {exc}"
            if claim.get("metadata", {}).get("uid") != ref.uid:
                return ""  # replaced by a new claim of the same name: not ours
            status = dict(claim.get("status") or {})
            if not status.get("allocation"):
                return ""  # deallocated: the status.devices went with the allocation
            existing = list(status.get("devices") or ())
            ops = list_map_ops(
                status.get("devices"),
                "/status/devices",
                owner=("driver", self.driver),
                wanted=[e for e in change(existing) if e.get("driver") == self.driver],
                key=entry_key,
            )
            if not ops:
                return ""
            try:
                guarded_patch(
                    self.claims, claim, ops, subresource="status", field_manager=self.field_manager
                )
                return ""
            except NotFound:
                return ""
            except Conflict:
                continue
            except Invalid as exc:
                return f"the apiserver refused the status: {exc}{_unpatchable_hint(exc)}"
            except ApiError as exc:
                return f"the apiserver refused the status: {exc}"
        return f"the claim kept changing ({WRITE_ATTEMPTS} conflicting writes)"


#: Why a patch that leaves the allocation alone is refused as a change of it.
UNPATCHABLE_HINT = (
    " (the claim's opaque config parameters are stored in a form the apiserver changes when "
    'it applies a patch (not compact JSON as Go writes it, e.g. written with ", " '
    "separators by Python's json.dumps): it refuses every patch of this claim; create such "
    "claims with kubectl, client-go or drakit's clients)"
)


def _unpatchable_hint(err: Invalid) -> str:
    """The hint for a refusal naming ``status.allocation``: this driver's patch never touches
    the allocation, so the apiserver's own re-encoding of it changed its bytes (it keeps a
    RawExtension's bytes as the claim's creator wrote them, and kube-scheduler copies them)."""
    fields = {c.field for c in err.causes}
    if "status.allocation" in fields or "status.allocation:" in err.message:
        return UNPATCHABLE_HINT
    return ""


def keys_of(entries: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    """The checkpoint form of the entries' keys (JSON lists)."""
    return [list(entry_key(e)) for e in entries]


def keys_from_checkpoint(raw: Any, log: StructuredLogger | None = None) -> set[StatusKey]:
    """The keys a checkpoint entry recorded (malformed records are ignored)."""
    keys: set[StatusKey] = set()
    for item in raw if isinstance(raw, list) else ():
        if isinstance(item, list) and len(item) == 3 and all(isinstance(p, str) for p in item):
            keys.add((item[0], item[1], item[2]))
        elif log is not None:
            log.warning("Ignoring a malformed device status record", record=repr(item)[:200])
    return keys


def cluster_support(api: Any) -> Callable[[], str]:
    """``unsupported`` for the cluster behind ``api`` (a kubernetes ApiClient): asks once,
    on first use; when the cluster cannot be asked, writing is tried (the apiserver then
    has the last word)."""
    from drakit.kubeapi.clusterversion import detect  # noqa: PLC0415 - only when status is used

    answer: list[str] = []

    def unsupported() -> str:
        if not answer:
            try:
                info = detect(api)
            except Exception:  # unreachable, unsupported version: the apiserver will tell
                answer.append("")
                return ""
            gate = "DRAResourceClaimDeviceStatus"
            answer.append(
                ""
                if info.gate(gate)
                else f"Kubernetes 1.{info.minor} here has no ResourceClaim status.devices "
                f"(feature gate {gate} is off)"
            )
        return answer[0]

    return unsupported
