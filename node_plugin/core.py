"""The driver core: NodePrepareResources / NodeUnprepareResources on real state.

One call of :meth:`PrepareCore.prepare`:

1. GET every claim from ``resource.k8s.io/v1``, concurrently, *before* taking
   the serialize lock (the lock may be held by the other plugin instance
   during a rolling update; waiting on the API server with it held would
   stall both). A claim that is missing, was replaced (UID differs) or is not
   allocated gets a per-claim error.
2. Keep only this driver's allocation results; resolve and validate each
   request's opaque config (:mod:`node_plugin.config`). Still no lock.
3. Under the lock: reload the checkpoint if the other instance changed it. A
   claim already ``PrepareCompleted`` is answered from the checkpoint without
   redoing work. Otherwise the double-use guard checks it, ``PrepareStarted``
   is recorded (one checkpoint write for the whole batch), the backend
   prepares, the CDI spec is written, and ``PrepareCompleted`` is recorded
   (again one write for the batch). Each claim's outcome is its own: one
   claim's failure is its error only and never keeps the others' outcome
   from being answered and saved.

Before any of this, every claim reference from the socket is checked
(:mod:`node_plugin.claimcheck`): no request or path is built from a bad
namespace, name or UID. Once the caller has gone (deadline passed, hung up),
no further claim of its call is started.

Per-claim failures become the claim's error, an Event on the ResourceClaim,
and a structured log line with the request id. Unprepare needs no API call:
everything it needs is in the checkpoint.
"""

from __future__ import annotations

import importlib
import json
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from prometheus_client import Counter

from allocator.model import DeviceRequestAllocationResult, ModelError, ResourceClaim
from kubeapi.client import load_client
from kubeapi.clusterversion import kubelet_health_services_for_node
from kubeapi.errors import ApiError, NotFound
from kubeapi.errors import ConfigError as KubeConfigError
from kubeapi.events import EventRecorder
from kubeapi.resources import RESOURCE_CLAIMS, Resource
from node_plugin.backends.base import (
    Backend,
    BackendConfigError,
    BackendPrepared,
    ClaimToPrepare,
    DeviceToPrepare,
)
from node_plugin.backends.registry import load_backend
from node_plugin.cdi import PREPARED_ANNOTATION, CDIDevice, CDISpecs
from node_plugin.checkpoint import (
    COMPLETED,
    FILE_NAME,
    STARTED,
    Checkpoint,
    ClaimEntry,
    read_boot_id,
)
from node_plugin.claimcheck import claim_ref_problem
from node_plugin.config import ConfigError, base_request, resolve_config
from node_plugin.driver import (
    CallContext,
    ClaimRef,
    CoreConfigError,
    DeviceHealth,
    HealthSubscription,
    PluginConfig,
    PreparedDevice,
    PrepareResult,
)
from node_plugin.fairpool import FairPool
from node_plugin.guard import Inventory, claim_from_results, find_conflicts
from node_plugin.health_feed import HealthFeed
from node_plugin.logging import StructuredLogger, get_logger
from node_plugin.metrics import PluginMetrics

_log = get_logger(__name__)

# GETs run in parallel: a batch of 32 claims costs about one round trip.
MAX_PARALLEL_GETS = 16
# "module:function" building the ResourceSlice publisher, if that module has it:
# build_publisher(config, backend, api_client, metrics) -> object with start()/stop().
PUBLISHER_FACTORY = "node_plugin.publisher:build_publisher"
KUBE_API_QPS_ENV = "KUBE_API_QPS"
KUBE_API_BURST_ENV = "KUBE_API_BURST"
DEFAULT_QPS = 50.0
DEFAULT_BURST = 100


class Service(Protocol):
    """Background work the core starts and stops with itself (e.g. the publisher)."""

    def start(self) -> None: ...

    def stop(self) -> None: ...


class ClaimEvents(Protocol):
    """Where per-claim failures are reported (a Kubernetes Event recorder)."""

    def warning(
        self, regarding: dict[str, Any], reason: str, action: str, note: str = ""
    ) -> None: ...


class ClaimError(Exception):
    """A per-claim failure; ``reason`` is the Event reason (UpperCamelCase)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.obj: Mapping[str, Any] | None = None  # the claim as read, when it was read


@dataclass(frozen=True)
class FetchedClaim:
    """A claim read from the API server and checked, ready to prepare (no lock needed)."""

    ref: ClaimRef
    obj: Mapping[str, Any]
    results: tuple[DeviceRequestAllocationResult, ...]
    to_prepare: ClaimToPrepare


def _describe(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


# Failures that say nothing about the claim itself: logged and answered, no Event.
_NO_EVENT_REASONS = frozenset({"CallAbandoned"})


def _abandoned(ref: ClaimRef) -> ClaimError:
    """The error of a claim not worked on because its caller had gone."""
    return ClaimError(
        "CallAbandoned",
        f"ResourceClaim {ref.namespace}/{ref.name}: not processed, the caller's deadline "
        "passed or it disconnected first",
    )


class PrepareCore:
    """The real :class:`node_plugin.driver.DriverCore`; thread-safe."""

    def __init__(
        self,
        config: PluginConfig,
        metrics: PluginMetrics,
        backend: Backend,
        claims_api: Resource,
        *,
        events: ClaimEvents | None = None,
        checkpoint: Checkpoint | None = None,
        services: Sequence[Service] = (),
        boot_id: Callable[[], str] = read_boot_id,
    ) -> None:
        self.config = config
        self.driver = config.driver_name
        self.metrics = metrics
        self.backend = backend
        self.claims_api = claims_api
        self.events = events
        self.cdi = CDISpecs(config.cdi_root, config.driver_name)
        self.corrupt_checkpoints = Counter(
            "checkpoint_corrupt",
            "Checkpoint files found corrupt, moved aside and rebuilt.",
            namespace="drakit_node_plugin",
            registry=metrics.registry,
        )
        self.claim_errors = Counter(
            "claim_errors",
            "Per-claim prepare/unprepare failures, by operation and reason.",
            ["operation", "reason"],
            namespace="drakit_node_plugin",
            registry=metrics.registry,
        )
        self.checkpoint = checkpoint or Checkpoint(
            config.plugin_data_dir / FILE_NAME,
            boot_id=boot_id,
            on_corrupt=self._on_corrupt_checkpoint,
            rebuild=self._rebuild_from_cdi_specs,
        )
        self.services = list(services)
        self._pool: FairPool[ClaimRef, FetchedClaim | ClaimError] = FairPool(
            MAX_PARALLEL_GETS, self._fetch, thread_name_prefix="claim-get"
        )
        self._local = threading.Lock()  # in-process guard around checkpoint/backend use
        self._feed = HealthFeed()
        self._health: dict[tuple[str, str], DeviceHealth] = {}
        self._health_lock = threading.Lock()
        self._stopped = False

    # -- life cycle ----------------------------------------------------------------------

    def start(self) -> None:
        with self._local:
            self.checkpoint.refresh()
            self._forget_reboot_leftovers()
            self.metrics.prepared_claims.set(self._prepared_count())
        if self.backend.supports_health:
            self._health = {(h.pool_name, h.device_name): h for h in self.backend.health()}
        self.backend.subscribe(self._on_backend_change)
        for service in self.services:
            service.start()

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        for service in reversed(self.services):
            try:
                service.stop()
            except Exception:
                _log.exception("Background service failed to stop", service=type(service).__name__)
        self._feed.close()
        self.backend.close()
        self._pool.shutdown()
        stop_events = getattr(self.events, "stop", None)
        if callable(stop_events):
            stop_events(timeout=5)

    # -- prepare -------------------------------------------------------------------------

    def prepare(self, claims: Sequence[ClaimRef], call: CallContext) -> Mapping[str, PrepareResult]:
        log = _log.bind(request_id=call.request_id)
        results: dict[str, PrepareResult] = {}
        usable, rejected = self._usable(claims, "prepare", log)
        results.update((uid, PrepareResult(error=error)) for uid, error in rejected.items())
        fetched: list[FetchedClaim] = []
        outcomes = self._pool.map(usable, is_active=call.is_active, skipped=_abandoned)
        for ref, outcome in zip(usable, outcomes, strict=True):
            if isinstance(outcome, ClaimError):
                results[ref.uid] = self._fail(ref, outcome.obj, outcome, "Prepare", log)
            else:
                fetched.append(outcome)
        if fetched:
            with call.serialize, self._local:
                self.checkpoint.refresh()
                by_uid = {f.ref.uid: f for f in fetched}
                for uid, done in self._prepare_locked(fetched, call, log).items():
                    if isinstance(done, ClaimError):
                        claim = by_uid[uid]
                        results[uid] = self._fail(claim.ref, claim.obj, done, "Prepare", log)
                    else:
                        results[uid] = done
                self.metrics.prepared_claims.set(self._prepared_count())
        return results

    def _usable(
        self, claims: Sequence[ClaimRef], operation: str, log: StructuredLogger
    ) -> tuple[list[ClaimRef], dict[str, str]]:
        """(claims with valid references, claim UID -> error for the others).

        Runs before any request or path is built. A rejected reference gets no
        Event: it cannot name a claim safely.
        """
        usable: list[ClaimRef] = []
        rejected: dict[str, str] = {}
        for ref in claims:
            problem = claim_ref_problem(ref)
            if problem:
                log.warning("Claim reference rejected", error=problem)
                self.claim_errors.labels(operation, "InvalidClaimReference").inc()
                rejected[ref.uid] = f"invalid claim reference: {problem}"
            else:
                usable.append(ref)
        return usable, rejected

    def _fetch(self, ref: ClaimRef) -> FetchedClaim | ClaimError:
        """GET and check one claim; never raises (runs in the thread pool)."""
        try:
            obj = self.claims_api.get(ref.name, ref.namespace)
        except NotFound:
            return ClaimError(
                "ResourceClaimNotFound", f"ResourceClaim {ref.namespace}/{ref.name} not found"
            )
        except ApiError as exc:
            return ClaimError(
                "ResourceClaimUnreadable",
                f"cannot read ResourceClaim {ref.namespace}/{ref.name}: {_describe(exc)}",
            )
        try:
            return self._check(ref, obj)
        except ClaimError as exc:
            exc.obj = obj
            return exc

    def _check(self, ref: ClaimRef, obj: Mapping[str, Any]) -> FetchedClaim:
        name = f"ResourceClaim {ref.namespace}/{ref.name}"
        uid = obj.get("metadata", {}).get("uid", "")
        if uid != ref.uid:
            raise ClaimError(
                "ResourceClaimReplaced",
                f"{name} has UID {uid}, not {ref.uid}: it was deleted and re-created",
            )
        try:
            claim = ResourceClaim.from_dict(obj)
        except ModelError as exc:
            raise ClaimError("InvalidResourceClaim", f"{name}: {exc}") from exc
        allocation = claim.status.allocation
        if allocation is None:
            raise ClaimError("ResourceClaimNotAllocated", f"{name} is not allocated")
        ours = tuple(r for r in allocation.devices.results if r.driver == self.driver)
        devices = []
        for r in ours:
            try:
                config = resolve_config(
                    allocation.devices.config, self.driver, r.request, self.backend.config_model
                )
            except ConfigError as exc:
                raise ClaimError("InvalidDeviceConfig", f"{name}: {exc}") from exc
            devices.append(
                DeviceToPrepare(
                    request=r.request,
                    pool=r.pool,
                    device=r.device,
                    config=config,
                    share_id=r.share_id,
                    consumed_capacity=dict(r.consumed_capacity),
                    admin_access=bool(r.admin_access),
                )
            )
        to_prepare = ClaimToPrepare(ref.uid, ref.namespace, ref.name, tuple(devices))
        return FetchedClaim(ref, obj, ours, to_prepare)

    def _prepare_locked(
        self, fetched: Sequence[FetchedClaim], call: CallContext, log: StructuredLogger
    ) -> dict[str, PrepareResult | ClaimError]:
        """Prepare under the lock: checkpoint hits, guard, two-phase record, backend, CDI.

        Every claim's outcome is its own: each claim is prepared, recorded
        (PrepareCompleted) or rolled back by itself, and no claim's failure can skip
        the save that persists the others. One save per phase, not one per claim:
        the two phases already make a crash mid-batch recoverable (a claim left
        PrepareStarted is completed or rolled back on the next call), and a save
        (fsync of file and folder) per claim made a 32-claim call 1.8x slower.
        """
        out: dict[str, PrepareResult | ClaimError] = {}
        todo: list[FetchedClaim] = []
        fresh: set[str] = set()  # claims without a checkpoint entry before this call
        inventory = Inventory(self.driver, self.backend.discover())
        for claim in fetched:
            if not call.is_active():
                out[claim.ref.uid] = _abandoned(claim.ref)
                continue
            entry = self.checkpoint.get(claim.ref.uid)
            if entry is not None and entry.completed:
                if not entry.devices or self.cdi.spec_path(claim.ref.uid).exists():
                    out[claim.ref.uid] = PrepareResult(devices=entry.devices)
                    continue
                # Someone removed the spec (a wiped /var/run/cdi without a reboot): the
                # runtime could not resolve the CDI IDs, so prepare again.
                log.warning("CDI spec of a prepared claim is missing", claim_uid=claim.ref.uid)
            others = [e for e in self.checkpoint.entries() if e.uid != claim.ref.uid]
            as_claim = claim_from_results(
                claim.ref.uid,
                claim.ref.namespace,
                claim.ref.name,
                [r.to_dict() for r in claim.results],
            )
            conflicts = find_conflicts(self.driver, as_claim, others, inventory)
            if conflicts:
                # The holders are named in the log only: the Event goes on this claim,
                # whose owner must not learn which other claims exist.
                log.warning(
                    "Devices of a claim are in use by other claims",
                    claim_uid=claim.ref.uid,
                    conflicts=[c.detail for c in conflicts],
                )
                out[claim.ref.uid] = ClaimError(
                    "DeviceAlreadyInUse",
                    f"ResourceClaim {claim.ref.namespace}/{claim.ref.name}: "
                    + "; ".join(c.public for c in conflicts),
                )
                continue
            if entry is None:
                fresh.add(claim.ref.uid)
            else:
                log.info("Completing a prepare interrupted earlier", claim_uid=claim.ref.uid)
            self.checkpoint.put(self._entry(claim, STARTED))
            todo.append(claim)
        if not todo:
            return out
        try:
            self.checkpoint.save()  # phase 1: every claim of the batch is PrepareStarted
        except OSError as exc:
            self.checkpoint.remove(*fresh)
            for claim in todo:
                out[claim.ref.uid] = ClaimError(
                    "CheckpointWriteFailed", f"cannot record the prepare in the checkpoint: {exc}"
                )
            return out
        for claim in todo:
            out[claim.ref.uid] = self._prepare_recorded(claim, call, claim.ref.uid in fresh, log)
        try:
            self.checkpoint.save()  # phase 2: each claim PrepareCompleted or rolled back
        except OSError as exc:
            for claim in todo:
                if isinstance(out[claim.ref.uid], PrepareResult):
                    entry = self.checkpoint.get(claim.ref.uid)
                    self._roll_back(claim.ref.uid, entry.backend_state if entry else {}, log)
                    out[claim.ref.uid] = ClaimError(
                        "CheckpointWriteFailed",
                        f"cannot record the prepare in the checkpoint: {exc}",
                    )
        return out

    def _prepare_recorded(
        self, claim: FetchedClaim, call: CallContext, fresh: bool, log: StructuredLogger
    ) -> PrepareResult | ClaimError:
        """Phase 2 for one claim recorded as started: prepare, then update its entry.

        Never raises: any failure is this claim's error (the caller saves).
        """
        uid = claim.ref.uid
        if not call.is_active():
            if fresh:  # nothing was done for it: forget it again
                self.checkpoint.remove(uid)
            return _abandoned(claim.ref)
        try:
            entry = self._prepare_one(claim)
        except ClaimError as exc:
            self._roll_back(uid, {}, log)
            return exc
        except Exception as exc:  # a bug must not cost the other claims their answer
            log.exception("Prepare of a claim failed unexpectedly", claim_uid=uid)
            self._roll_back(uid, {}, log)
            return ClaimError("PrepareFailed", f"prepare failed: {_describe(exc)}")
        self.checkpoint.put(entry)
        log.info("Prepared claim", claim_uid=uid, devices=len(entry.devices))
        return PrepareResult(devices=entry.devices)

    def _entry(
        self,
        claim: FetchedClaim,
        state: str,
        devices: tuple[PreparedDevice, ...] = (),
        backend_state: Mapping[str, Any] | None = None,
    ) -> ClaimEntry:
        return ClaimEntry(
            uid=claim.ref.uid,
            namespace=claim.ref.namespace,
            name=claim.ref.name,
            state=state,
            results=tuple(r.to_dict() for r in claim.results),
            devices=devices,
            backend_state=backend_state or {},
        )

    def _prepare_one(self, claim: FetchedClaim) -> ClaimEntry:
        name = f"ResourceClaim {claim.ref.namespace}/{claim.ref.name}"
        try:
            prepared: BackendPrepared = self.backend.prepare(claim.to_prepare)
        except Exception as exc:
            raise ClaimError(
                "PrepareFailed", f"{name}: backend {self.backend.name}: {_describe(exc)}"
            ) from exc
        if len(prepared.device_edits) != len(claim.to_prepare.devices):
            raise ClaimError(
                "PrepareFailed",
                f"{name}: backend {self.backend.name} returned {len(prepared.device_edits)} "
                f"device edits for {len(claim.to_prepare.devices)} devices",
            )
        cdi_devices: list[CDIDevice] = []
        answer: list[PreparedDevice] = []
        for device, edits in zip(claim.to_prepare.devices, prepared.device_edits, strict=True):
            cdi_name = self.cdi.device_name(claim.ref.uid, device.device, device.share_id)
            cdi_devices.append(CDIDevice(cdi_name, edits))
            answer.append(
                PreparedDevice(
                    request_names=(base_request(device.request),),
                    pool_name=device.pool,
                    device_name=device.device,
                    cdi_device_ids=(self.cdi.device_id(cdi_name),),
                    share_id=device.share_id,
                )
            )
        entry = self._entry(claim, COMPLETED, tuple(answer), prepared.state)
        if cdi_devices:
            annotation = json.dumps(entry.to_json() | {"uid": entry.uid}, separators=(",", ":"))
            try:
                self.cdi.write(claim.ref.uid, cdi_devices, {PREPARED_ANNOTATION: annotation})
            except OSError as exc:
                raise ClaimError("PrepareFailed", f"{name}: cannot write CDI spec: {exc}") from exc
        return entry

    def _roll_back(self, uid: str, backend_state: Mapping[str, Any], log: StructuredLogger) -> str:
        """Undo a (partial) prepare; returns "" or the error text. Caller saves the checkpoint."""
        try:
            self.backend.unprepare(uid, backend_state)
        except Exception as exc:
            log.exception("Backend unprepare failed", claim_uid=uid)
            return f"backend {self.backend.name}: {_describe(exc)}"
        try:
            self.cdi.remove(uid)
        except OSError as exc:
            return f"cannot remove CDI spec: {exc}"
        self.checkpoint.remove(uid)
        return ""

    # -- unprepare -----------------------------------------------------------------------

    def unprepare(self, claims: Sequence[ClaimRef], call: CallContext) -> Mapping[str, str]:
        log = _log.bind(request_id=call.request_id)
        usable, results = self._usable(claims, "unprepare", log)
        if not usable:
            return results
        with call.serialize, self._local:
            self.checkpoint.refresh()
            removed = []
            for ref in usable:
                if not call.is_active():
                    results[ref.uid] = str(_abandoned(ref))
                    continue
                had_entry = self.checkpoint.get(ref.uid) is not None
                results[ref.uid] = self._unprepare_one(ref, log)
                if had_entry and not results[ref.uid]:
                    removed.append(ref)
            self._save_unprepared(removed, results, log)
            self.metrics.prepared_claims.set(self._prepared_count())
        return results

    def _save_unprepared(
        self, removed: Sequence[ClaimRef], results: dict[str, str], log: StructuredLogger
    ) -> None:
        """Persist every claim's own outcome; if that fails, the removed claims say so."""
        try:
            self.checkpoint.save()
        except OSError as exc:
            for ref in removed:  # undone on the node, but not recorded: the kubelet retries
                error = f"ResourceClaim {ref.namespace}/{ref.name}: cannot save checkpoint: {exc}"
                results[ref.uid] = error
                self._fail(ref, None, ClaimError("UnprepareFailed", error), "Unprepare", log)

    def _unprepare_one(self, ref: ClaimRef, log: StructuredLogger) -> str:
        """Undo one claim and drop its entry (the caller saves); "" or the claim's error.

        Never raises: one claim's failure is that claim's error only.
        """
        try:
            entry = self.checkpoint.get(ref.uid)
            if entry is None:
                self.cdi.remove(ref.uid)  # a stray spec of a lost checkpoint entry
                return ""
            if entry.state == STARTED:
                log.info("Rolling back a prepare interrupted earlier", claim_uid=ref.uid)
            error = self._roll_back(ref.uid, entry.backend_state, log)
        except Exception as exc:
            log.exception("Unprepare of a claim failed", claim_uid=ref.uid)
            error = f"cannot update the node's state: {_describe(exc)}"
        if error:
            error = f"ResourceClaim {ref.namespace}/{ref.name}: {error}"
            self._fail(ref, None, ClaimError("UnprepareFailed", error), "Unprepare", log)
        else:
            log.info("Unprepared claim", claim_uid=ref.uid)
        return error

    # -- failures, recovery --------------------------------------------------------------

    def _fail(
        self,
        ref: ClaimRef,
        obj: Mapping[str, Any] | None,
        error: ClaimError,
        action: str,
        log: StructuredLogger,
    ) -> PrepareResult:
        log.warning(
            f"{action} failed for a claim",
            claim=f"{ref.namespace}/{ref.name}",
            claim_uid=ref.uid,
            reason=error.reason,
            error=str(error),
        )
        self.claim_errors.labels(action.lower(), error.reason).inc()
        if self.events is not None and error.reason not in _NO_EVENT_REASONS:
            regarding = (
                dict(obj)
                if obj
                else {
                    "apiVersion": RESOURCE_CLAIMS.api_version,
                    "kind": RESOURCE_CLAIMS.kind,
                    "namespace": ref.namespace,
                    "name": ref.name,
                    "uid": ref.uid,
                }
            )
            self.events.warning(regarding, error.reason, action, str(error))
        return PrepareResult(error=str(error))

    def _prepared_count(self) -> int:
        return sum(1 for e in self.checkpoint.entries() if e.completed)

    def _forget_reboot_leftovers(self) -> None:
        """After a reboot the checkpoint dropped its claims; their CDI specs go too."""
        for entry in self.checkpoint.dropped_after_reboot:
            self.cdi.remove(entry.uid)
        self.checkpoint.dropped_after_reboot.clear()

    def _rebuild_from_cdi_specs(self) -> list[ClaimEntry]:
        """Checkpoint entries recovered from the annotations of our CDI specs."""
        rebuilt = []
        for uid, spec in self.cdi.read_all():
            raw = spec.get("annotations", {}).get(PREPARED_ANNOTATION)
            try:
                entry = ClaimEntry.from_json(uid, json.loads(raw)) if raw else None
            except ValueError:
                entry = None
            if entry is not None and entry.completed:
                rebuilt.append(entry)
        return rebuilt

    def _on_corrupt_checkpoint(self, reason: str, moved_to: Any) -> None:
        self.corrupt_checkpoints.inc()
        if self.events is not None:
            node = {"apiVersion": "v1", "kind": "Node", "name": self.config.node_name}
            self.events.warning(
                node,
                "CheckpointCorrupt",
                "RecoverCheckpoint",
                f"driver {self.driver}: checkpoint was corrupt ({reason}); moved to {moved_to} "
                "and rebuilt from the CDI specs",
            )

    # -- health --------------------------------------------------------------------------

    def supports_health(self) -> bool:
        return bool(self.backend.supports_health)

    def kubelet_health_services(self) -> tuple[str, ...] | None:
        """DRAResourceHealth versions this node's kubelet calls (None: unknown, offer all)."""
        api = getattr(self.claims_api, "api", None)  # a wrapped claims API may hide it
        if api is None:
            return None
        return kubelet_health_services_for_node(api, self.config.node_name)

    def health_snapshot(self) -> list[DeviceHealth]:
        with self._health_lock:
            return list(self._health.values())

    def watch_health(self) -> HealthSubscription:
        return self._feed.subscribe()

    def _on_backend_change(self) -> None:
        """Publish devices whose health changed (called from the backend's threads)."""
        if not self.backend.supports_health:
            return
        current = {(h.pool_name, h.device_name): h for h in self.backend.health()}
        with self._health_lock:
            changed = [
                h
                for key, h in current.items()
                if key not in self._health
                or (self._health[key].health, self._health[key].message) != (h.health, h.message)
            ]
            self._health = current
        self._feed.publish(changed)


def _load_services(
    config: PluginConfig, backend: Backend, api: Any, metrics: PluginMetrics
) -> list[Service]:
    module_name, _, attr = PUBLISHER_FACTORY.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        return []
    factory: Callable[..., Service] | None = getattr(module, attr, None)
    return [factory(config, backend, api, metrics)] if callable(factory) else []


def _client_limits() -> tuple[float, int]:
    """Client-side API limits: ``KUBE_API_QPS``/``KUBE_API_BURST`` (the Go example driver's
    names), else the kubelet's own defaults (50/100): the plugin GETs only claims the
    kubelet asks for, so it never needs more than the kubelet itself.
    """
    try:
        qps = float(os.environ.get(KUBE_API_QPS_ENV, DEFAULT_QPS))
        burst = int(os.environ.get(KUBE_API_BURST_ENV, DEFAULT_BURST))
    except ValueError as exc:
        raise CoreConfigError(f"${KUBE_API_QPS_ENV}/${KUBE_API_BURST_ENV}: {exc}") from exc
    if qps <= 0 or burst < 1:
        raise CoreConfigError(f"${KUBE_API_QPS_ENV} must be > 0 and ${KUBE_API_BURST_ENV} >= 1")
    return qps, burst


def build_core(config: PluginConfig, metrics: PluginMetrics) -> PrepareCore:
    """The factory ``node_plugin.app`` calls; CoreConfigError names the flag and reason."""
    try:
        backend = load_backend(
            config.backend,
            driver_name=config.driver_name,
            node_name=config.node_name,
            config_path=config.backend_config,
        )
    except BackendConfigError as exc:
        raise CoreConfigError(str(exc)) from exc
    try:
        qps, burst = _client_limits()
        api = load_client(
            config.kubeconfig,
            user_agent=f"drakit-node-plugin/{config.driver_name}",
            qps=qps,
            burst=burst,
        )
    except KubeConfigError as exc:
        raise CoreConfigError(f"--kubeconfig: {exc}") from exc
    events = EventRecorder(
        api,
        reporting_controller=config.driver_name,
        reporting_instance=f"{config.driver_name}-{config.node_name}",
    )
    return PrepareCore(
        config,
        metrics,
        backend,
        Resource(api, RESOURCE_CLAIMS),
        events=events,
        services=_load_services(config, backend, api, metrics),
    )
