"""``drakit driver-controller``: satisfy binding conditions of one driver's allocated devices.

kube-scheduler allocates a claim with a device whose ResourceSlice entry names
``bindingConditions``, copies them into the allocation result and waits in PreBind (up to its
binding timeout, 600 s by default) until each of them is True in the claim's
``status.devices[].conditions`` for that device; a True ``bindingFailureConditions`` entry makes
it deallocate the claim and schedule the pod again.

This controller watches ResourceClaims. For every allocation result of ``driver_name`` that
names binding conditions and still waits (some binding condition not True, no failure
condition True) it calls the driver's :class:`~drakit.plugin.BindingCheck`
and writes the verdict into that device's ``status.devices`` entry:

- only this driver's entries change; other conditions of the entry and its
  data/networkData are kept (a JSON patch of this driver's ``status.devices`` entries alone,
  each by its index, :func:`drakit.kubeapi.jsonpatch.list_map_ops`, guarded by the
  resourceVersion read: a concurrent writer's change is never overwritten, a conflict reads
  the claim again and decides again; other drivers' entries and the allocation, whose bytes
  the apiserver compares byte for byte, are never sent back);
- a condition that becomes True gets ``lastTransitionTime`` now; one already True keeps its
  time, so repeating a verdict writes nothing (idempotent);
- a claim whose devices still wait is checked again after the verdict's ``retry_after``
  (default ``recheck_period``) and on every change of the claim; a check that raises is
  retried with the work queue's per-key backoff (5 ms doubling to 1000 s);
- a claim with a part nested deeper than :data:`drakit.kubeapi.deepjson.MAX_DEPTH` (a
  DeepJSON leaf) is not handed to the check: a Warning Event ``NestedTooDeep`` on the claim
  names the field path, and the claim is left alone until its resourceVersion changes.

Keys are ``<namespace>/<name>``; one worker per key at a time, namespaces take turns. Run it
only while holding the leader Lease when there are several replicas (``--leader-elect``).
Permissions: resourceclaims get/list/watch, resourceclaims/status patch, and (granular
status authorization, Kubernetes 1.36+) ``arbitrary-node:patch`` on ``resourceclaims/driver``
for this driver's name only; events create and patch for its Events.
"""

from __future__ import annotations

import copy
import datetime as dt
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from drakit.kubeapi import deepjson
from drakit.kubeapi.errors import Conflict, NotFound
from drakit.kubeapi.events import EventRecorder
from drakit.kubeapi.informer import EventHandlers, Informer
from drakit.kubeapi.jsonpatch import guarded_patch, list_map_ops
from drakit.kubeapi.objects import KubeObject, split_key
from drakit.kubeapi.resources import RESOURCE_CLAIMS, Resource
from drakit.kubeapi.workqueue import WorkQueue
from drakit.plugin.binding import (
    BindingCheck,
    BindingClaim,
    BindingDevice,
    BindingVerdict,
    VerdictError,
)
from drakit.telemetry.logs import get_logger

__all__ = [
    "FIELD_MANAGER",
    "BindingCheckError",
    "BindingConditionsController",
    "DriverControllerConfig",
    "apply_verdicts",
    "waiting_devices",
]

logger = get_logger(__name__)

FIELD_MANAGER = "drakit-driver-controller"
#: Writes retried at once after a conflict (each with a fresh GET) before the key backs off.
CONFLICT_ATTEMPTS = 3
HOSTNAME_LABEL = "kubernetes.io/hostname"
#: The shortest re-check a verdict may ask for: a check answering "again in 0 s" must not spin.
MIN_RECHECK = 0.1


class BindingCheckError(Exception):
    """The driver's check raised or returned an invalid verdict; the message names the claim,
    the device and the reason. The claim is retried with backoff."""


@dataclass(frozen=True)
class DriverControllerConfig:
    """What ``drakit driver-controller`` runs with (already validated)."""

    driver_name: str
    check: BindingCheck
    workers: int = 4
    #: Seconds before a device whose conditions are not all met is checked again.
    recheck_period: float = 5.0
    #: Every object is synced again this often (repairs what a lost event left behind); 0: never.
    resync_period: float = 300.0


# -- pure helpers ----------------------------------------------------------------------------


def _status(claim: Mapping[str, Any]) -> Mapping[str, Any]:
    return claim.get("status") or {}


def _entry_key(entry: Mapping[str, Any]) -> tuple[str, str, str, str]:
    return (
        str(entry.get("driver") or ""),
        str(entry.get("pool") or ""),
        str(entry.get("device") or ""),
        str(entry.get("shareID") or ""),
    )


def _device_key(device: BindingDevice) -> tuple[str, str, str, str]:
    return (device.driver, device.pool, device.device, device.share_id or "")


def waiting_devices(claim: Mapping[str, Any], driver_name: str) -> list[BindingDevice]:
    """The allocated devices of ``driver_name`` in ``claim`` that still wait for binding
    conditions (see :attr:`BindingDevice.waiting`), in allocation order."""
    allocation = _status(claim).get("allocation") or {}
    results = (allocation.get("devices") or {}).get("results") or ()
    entries = {_entry_key(e): e for e in _status(claim).get("devices") or ()}
    found = []
    for result in results:
        if result.get("driver") != driver_name or not result.get("bindingConditions"):
            continue
        device = BindingDevice(
            request=str(result.get("request") or ""),
            driver=driver_name,
            pool=str(result.get("pool") or ""),
            device=str(result.get("device") or ""),
            share_id=result.get("shareID") or None,
            binding_conditions=tuple(result.get("bindingConditions") or ()),
            binding_failure_conditions=tuple(result.get("bindingFailureConditions") or ()),
        )
        entry = entries.get(_device_key(device)) or {}
        device = replace(device, conditions=tuple(entry.get("conditions") or ()))
        if device.waiting:
            found.append(device)
    return found


def apply_verdicts(
    devices_status: Iterable[Mapping[str, Any]],
    verdicts: Iterable[tuple[BindingDevice, BindingVerdict]],
    now: str,
) -> list[dict[str, Any]]:
    """``status.devices`` with each verdict's True conditions set on its device's entry.

    Entries of other devices and drivers, and the entry's other fields and conditions, are
    kept as they are. A missing entry is added. A condition that was already True keeps its
    reason, message and lastTransitionTime (nothing changes, so nothing is written).
    """
    entries = [copy.deepcopy(dict(e)) for e in devices_status]
    for device, verdict in verdicts:
        entry = next((e for e in entries if _entry_key(e) == _device_key(device)), None)
        if entry is None:
            entry = {"driver": device.driver, "pool": device.pool, "device": device.device,
                     "conditions": []}  # fmt: skip
            if device.share_id:
                entry["shareID"] = device.share_id
            entries.append(entry)
        conditions: list[dict[str, Any]] = list(entry.get("conditions") or [])
        for result in (*verdict.met, *verdict.failed):
            old = next((c for c in conditions if c.get("type") == result.type), None)
            if old is not None and old.get("status") == "True":
                continue
            new = {"type": result.type, "status": "True", "reason": result.reason,
                   "message": result.message, "lastTransitionTime": now}  # fmt: skip
            if old is None:
                conditions.append(new)
            else:
                conditions[conditions.index(old)] = new
        entry["conditions"] = conditions
    return entries


def _node_name(claim: Mapping[str, Any]) -> str | None:
    """The single node the allocation's node selector names, if it names exactly one."""
    selector = (_status(claim).get("allocation") or {}).get("nodeSelector") or {}
    terms: list[dict[str, Any]] = selector.get("nodeSelectorTerms") or []
    if len(terms) != 1:
        return None
    for field, key in (("matchFields", "metadata.name"), ("matchExpressions", HOSTNAME_LABEL)):
        for req in terms[0].get(field) or ():
            values: list[str] = req.get("values") or []
            if req.get("key") == key and req.get("operator") == "In" and len(values) == 1:
                return str(values[0])
    return None


def _claim_view(claim: Mapping[str, Any]) -> BindingClaim:
    meta = claim.get("metadata") or {}
    return BindingClaim(
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        uid=str(meta.get("uid") or ""),
        node_name=_node_name(claim),
        raw=claim,
    )


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# -- the controller --------------------------------------------------------------------------


class BindingConditionsController:
    """One instance per process run: ``run(stop)`` once, then build a new one."""

    def __init__(
        self,
        api: Any,
        config: DriverControllerConfig,
        *,
        claims: Resource | None = None,
        clock: Callable[[], str] = _now,
        events: EventRecorder | None = None,
    ) -> None:
        self.config = config
        self._events = events
        #: Claims refused for their depth: key -> the resourceVersion refused.
        self._refused: dict[str, str] = {}
        self._refused_lock = threading.Lock()
        self._claims = claims or Resource(api, RESOURCE_CLAIMS)
        self._clock = clock
        self.informer = Informer(
            Resource(api, RESOURCE_CLAIMS), resync_period=config.resync_period, name="claims"
        )
        self.queue: WorkQueue[str] = WorkQueue(
            "drakit-driver-controller", tenant_of=lambda key: key.partition("/")[0]
        )
        self.informer.add_handlers(
            EventHandlers(
                on_add=lambda claim, _initial: self._changed(claim),
                on_update=lambda _old, new: self._changed(new),
                on_delete=self._deleted,
            )
        )
        self.started = threading.Event()
        #: Whether this replica may act now (leader election sets it; default: always).
        self.fence: Callable[[], bool] = lambda: True
        #: Verdict writes done (for tests and logs).
        self.writes = 0

    def run(self, stop: threading.Event) -> None:
        """Sync until ``stop`` is set."""
        self.informer.start()
        try:
            while not self.informer.wait_for_sync(0.5):
                if stop.is_set():
                    return
            self.queue.start(self.sync, workers=self.config.workers)
            self.started.set()
            logger.info(
                "Driver controller started",
                driver=self.config.driver_name,
                workers=self.config.workers,
            )
            stop.wait()
        finally:
            self.queue.shutdown(wait=False)
            self.queue.shutdown(wait=True, timeout=30)
            self.informer.stop()
            logger.info("Driver controller stopped")

    def _changed(self, claim: KubeObject) -> None:
        if waiting_devices(claim, self.config.driver_name):
            meta = claim.get("metadata") or {}
            self.queue.add(f"{meta.get('namespace')}/{meta.get('name')}")

    def _deleted(self, claim: KubeObject) -> None:
        meta = claim.get("metadata") or {}
        with self._refused_lock:
            self._refused.pop(f"{meta.get('namespace')}/{meta.get('name')}", None)

    def sync(self, key: str) -> float | None:
        """Check and write one claim; returns when to look again (None: when it changes)."""
        if not self.fence():
            logger.warning("Not acting: the leader Lease may be lost", claim=key)
            return 1.0
        namespace, name = split_key(key)
        claim = self.informer.store.get(key)
        for _attempt in range(CONFLICT_ATTEMPTS):
            if claim is None:
                return None
            try:
                return self._sync_claim(claim)
            except Conflict:
                # Someone else wrote the claim after our read: decide again on what is stored.
                try:
                    claim = self._claims.get(name, namespace)
                except NotFound:
                    return None
        raise BindingCheckError(f"claim {key}: status kept changing under the write; retrying")

    def _sync_claim(self, claim: KubeObject) -> float | None:
        devices = waiting_devices(claim, self.config.driver_name)
        if not devices or self._too_deep(claim):
            return None
        view = _claim_view(claim)
        verdicts = [(device, self._ask(view, device)) for device in devices]
        status = _status(claim)
        current = list(status.get("devices") or ())
        wanted = apply_verdicts(current, verdicts, self._clock())
        ops = list_map_ops(
            status.get("devices"),
            "/status/devices",
            owner=("driver", self.config.driver_name),
            wanted=[e for e in wanted if e.get("driver") == self.config.driver_name],
            key=_entry_key,
        )
        if ops:
            guarded_patch(
                self._claims, claim, ops, subresource="status", field_manager=FIELD_MANAGER
            )
            self.writes += 1
            for device, verdict in verdicts:
                if verdict.met or verdict.failed:
                    logger.info(
                        "Binding conditions set",
                        claim=f"{view.namespace}/{view.name}",
                        device=device.device,
                        pool=device.pool,
                        met=[r.type for r in verdict.met],
                        failed=[r.type for r in verdict.failed],
                    )
        return self._recheck_after(verdicts)

    def _too_deep(self, claim: KubeObject) -> bool:
        """Whether ``claim`` holds a part nested past the depth bound (then reported once
        per resourceVersion, as a Warning Event and a log line, and not checked)."""
        problem = deepjson.depth_problem(claim)
        if problem is None:
            return False
        meta = claim.get("metadata") or {}
        key, version = (
            f"{meta.get('namespace')}/{meta.get('name')}",
            str(meta.get("resourceVersion")),
        )
        with self._refused_lock:
            if self._refused.get(key) == version:
                return True
            self._refused[key] = version
        note = f"{problem}: binding conditions of driver {self.config.driver_name} are not checked"
        logger.warning(
            "Claim nested too deep; not checking its binding conditions", claim=key, problem=problem
        )
        if self._events is not None:
            self._events.warning(claim, deepjson.EVENT_REASON, "CheckBindingConditions", note)
        return True

    def _ask(self, claim: BindingClaim, device: BindingDevice) -> BindingVerdict:
        where = f"claim {claim.namespace}/{claim.name}, device {device.pool}/{device.device}"
        try:
            verdict = self.config.check.check(claim, device)
        except Exception as err:
            raise BindingCheckError(f"binding check failed for {where}: {err}") from err
        if not isinstance(verdict, BindingVerdict):
            raise BindingCheckError(
                f"binding check for {where} returned {type(verdict).__name__}, not a BindingVerdict"
            )
        try:
            verdict.check_against(device)
        except VerdictError as err:
            raise BindingCheckError(f"binding check for {where} returned {err}") from None
        return verdict

    def _recheck_after(self, verdicts: list[tuple[BindingDevice, BindingVerdict]]) -> float | None:
        """The earliest re-check of a device that still waits after its verdict."""
        delays = []
        for device, verdict in verdicts:
            if verdict.failed:
                continue
            met = {r.type for r in verdict.met}
            if all(device.is_true(c) or c in met for c in device.binding_conditions):
                continue
            delays.append(self.config.recheck_period if verdict.retry_after is None
                          else max(MIN_RECHECK, verdict.retry_after))  # fmt: skip
        return min(delays) if delays else None
