"""The driver core: NodePrepareResources / NodeUnprepareResources on real state.

One call of :meth:`PrepareCore.prepare` goes through the stages of
:mod:`drakit.node_plugin.prepare`:

1. **fetch and verify**, *before* taking the serialize lock (the lock may be held by
   the other plugin instance during a rolling update; waiting on the API server with it
   held would stall both): every claim reference is checked
   (:mod:`drakit.node_plugin.claimcheck`: no request or path is built from a bad
   namespace, name or UID), every claim read concurrently from ``resource.k8s.io/v1``
   and checked (missing, replaced, not allocated), this driver's allocation results
   kept and each request's opaque config resolved and validated.
2. Under the lock, after reloading the checkpoint if the other instance changed it:
   **guard** (a claim unprepared after the call began is refused, see
   :mod:`drakit.node_plugin.prepare.tombstones`; a claim already ``PrepareCompleted`` with
   its outputs in place is answered from the checkpoint without redoing work; the
   double-use guard refuses devices other claims hold), **record** (``PrepareStarted``,
   one checkpoint write for the batch), **backend**, **apply outputs** (CDI spec, device
   metadata, device status: :mod:`drakit.node_plugin.prepare.output`), **commit**
   (``PrepareCompleted``, one write for the batch).
3. Outside the lock, the outputs' work for after the commit (API writes).

Each claim's outcome is its own: one claim's failure is its error only and never keeps
the others' outcome from being answered and saved. Once the caller has gone (deadline
passed, hung up), no further claim of its call is started.

Per-claim failures become the claim's error, an Event on the ResourceClaim, and a
structured log line with the request id. Unprepare, the mirror, needs no API call:
everything it needs is in the checkpoint.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from drakit.kubeapi.clusterversion import kubelet_health_services_for_node
from drakit.node_plugin.cdi import CDISpecs
from drakit.node_plugin.checkpoint import (
    API_VERSION,
    FILE_NAME,
    Checkpoint,
    ClaimEntry,
    UnsupportedCheckpointError,
    read_boot_id,
    read_document,
)
from drakit.node_plugin.claims import ClaimReader, ClaimSource
from drakit.node_plugin.device_health import HealthMonitor
from drakit.node_plugin.device_metadata import MetadataFiles
from drakit.node_plugin.device_status import DeviceStatusWriter
from drakit.node_plugin.driver import CallContext, HealthSubscription, PluginConfig, PrepareResult
from drakit.node_plugin.metrics import PluginMetrics
from drakit.node_plugin.prepare import stages, unprepare
from drakit.node_plugin.prepare.bounded import UnprepareAttempts
from drakit.node_plugin.prepare.fetch import checked_refs, fetch_claims
from drakit.node_plugin.prepare.output import ClaimOutput
from drakit.node_plugin.prepare.outputs import standard_outputs
from drakit.node_plugin.prepare.recovery import forget_reboot_leftovers, recorded_claims
from drakit.node_plugin.prepare.report import ClaimEvents, ClaimReports
from drakit.node_plugin.prepare.run import PrepareRun, UnprepareRun
from drakit.node_plugin.prepare.status_output import default_status_writer
from drakit.node_plugin.prepare.tombstones import UnprepareTombstones
from drakit.node_plugin.serialize import (
    LOCK_FILE_NAME,
    SerializeLock,
    SerializeTimeoutError,
    serialize_lock_for,
)
from drakit.plugin.backend import Backend
from drakit.plugin.claims import ClaimRef
from drakit.plugin.health import DeviceHealth, health_report
from drakit.plugin.metrics import metrics_reporter
from drakit.telemetry.logs import get_logger

_log = get_logger(__name__)

__all__ = ["START_LOCK_WAIT_SECONDS", "ClaimEvents", "PrepareCore", "peek_prepared_count"]

# How long start() waits for the other instance's lock before it only reads the checkpoint.
START_LOCK_WAIT_SECONDS = 1.0


class PrepareCore:
    """The real :class:`drakit.node_plugin.driver.DriverCore`; thread-safe."""

    def __init__(
        self,
        config: PluginConfig,
        metrics: PluginMetrics,
        backend: Backend,
        claims_api: ClaimSource,
        *,
        events: ClaimEvents | None = None,
        checkpoint: Checkpoint | None = None,
        boot_id: Callable[[], str] = read_boot_id,
        serialize: AbstractContextManager[object] | None = None,
        device_status: DeviceStatusWriter | None = None,
        outputs: Sequence[ClaimOutput] | None = None,
    ) -> None:
        """``serialize`` is the plugin's cross-process lock (default: its ``serialize.lock``);
        the core takes it whenever it touches local state outside a call, too (``start``).
        ``device_status`` writes the backend's ``status.devices`` entries (default: through
        ``claims_api`` when it can update status; see :mod:`drakit.node_plugin.device_status`).
        ``outputs`` are the per-claim outputs of a prepare, in write order (default:
        :func:`~drakit.node_plugin.prepare.outputs.standard_outputs`)."""
        self.config = config
        self.driver = config.driver_name
        self.metrics = metrics
        self.backend = backend
        self.events = events
        self.cdi = CDISpecs(config.cdi_root, config.driver_name)
        self.metadata = MetadataFiles(config.plugin_data_dir, config.driver_name)
        status = device_status or default_status_writer(claims_api, config)
        self.outputs = tuple(
            outputs
            if outputs is not None
            else standard_outputs(self.driver, self.cdi, self.metadata, status, events)
        )
        # The model is read when a claim carries opaque config, not now: a built-in
        # backend's model (pydantic) is imported only then.
        self.reader = ClaimReader(claims_api, config.driver_name, lambda: backend.config_model)
        self.claims_api = claims_api
        self.health = HealthMonitor(health_report(backend))
        self.checkpoint = checkpoint or Checkpoint(
            config.plugin_data_dir / FILE_NAME,
            boot_id=boot_id,
            on_corrupt=self._on_corrupt_checkpoint,
            rebuild=lambda: recorded_claims(self.outputs),
        )
        self._serialize = serialize or serialize_lock_for(config.plugin_data_dir)
        self._boot_id = boot_id
        self._local = threading.Lock()  # in-process guard around checkpoint/backend use
        self._stopped = False
        self.reports = ClaimReports(metrics, events)
        self.tombstones = UnprepareTombstones()
        self.stages = stages.PrepareStages(
            self.driver,
            backend,
            self.checkpoint,
            self.outputs,
            tombstones=self.tombstones,
            attempts=UnprepareAttempts(config.unprepare_timeout_seconds),
        )
        self.unstages = unprepare.UnprepareStages(
            self.checkpoint, self.stages.undo, self.tombstones
        )

    # -- life cycle ----------------------------------------------------------------------

    def start(self) -> None:
        """Load the checkpoint, clean up after a reboot, start health; returns promptly.

        A checkpoint of a newer format (UnsupportedCheckpointError) is logged, not raised:
        the plugin starts, and every prepare and unprepare fails with that error.

        The checkpoint may be rewritten here (reboot drop, corruption recovery), so that
        happens only under the serialize lock: during a rolling update the other instance
        may be preparing. When that instance holds the lock longer than
        ``START_LOCK_WAIT_SECONDS``, the checkpoint is only read now (for the gauge) and
        loaded properly by the first call, which takes the lock anyway.
        """
        self.config.plugin_data_dir.mkdir(parents=True, exist_ok=True)
        try:
            with self._start_lock(), self._local:
                self._refresh_locked()
        except SerializeTimeoutError:
            _log.warning(
                "Serialize lock busy at start; the checkpoint is loaded by the first call",
                lock=str(self.config.plugin_data_dir / LOCK_FILE_NAME),
            )
            count = peek_prepared_count(self.checkpoint.path, self._boot_id())
            self.metrics.prepared_claims.set(count)
        except UnsupportedCheckpointError as exc:
            # Serve what this release can (registration, slices, health); each prepare and
            # unprepare is refused with this message while the checkpoint stays unread.
            _log.error("Checkpoint written by a newer drakit; refusing prepares", error=str(exc))
        self.health.start()
        if self.health.supported:
            self.backend.subscribe(self.health.on_change)

    def _start_lock(self) -> AbstractContextManager[object]:
        if isinstance(self._serialize, SerializeLock):
            return SerializeLock(self._serialize.path, timeout=START_LOCK_WAIT_SECONDS)
        return self._serialize

    def _refresh_locked(self) -> None:
        """Reload the checkpoint if it changed and forget claims a reboot dropped (the
        serialize lock and ``_local`` held)."""
        self.checkpoint.refresh()
        forget_reboot_leftovers(self.checkpoint, self.outputs)
        self.metrics.prepared_claims.set(self._prepared_count())

    def stop(self) -> None:
        """Close health streams and the claim readers; idempotent. The backend is the
        wiring's to close."""
        if self._stopped:
            return
        self._stopped = True
        self.health.close()
        self.reader.close()

    # -- prepare and unprepare -----------------------------------------------------------

    def prepare(self, claims: Sequence[ClaimRef], call: CallContext) -> Mapping[str, PrepareResult]:
        """One answer per claim UID (devices, or the claim's error); never raises for one
        claim's failure. A backend that keeps metrics hears each claim's outcome."""
        started = time.monotonic()
        results = self._prepare(claims, call)
        self._tell_backend("prepare", {uid: r.error for uid, r in results.items()}, started)
        return results

    def unprepare(self, claims: Sequence[ClaimRef], call: CallContext) -> Mapping[str, str]:
        """Claim UID -> "" (undone, or never prepared here) or the claim's error."""
        started = time.monotonic()
        results = self._unprepare(claims, call)
        self._tell_backend("unprepare", results, started)
        return results

    def _tell_backend(self, operation: str, errors: Mapping[str, str], started: float) -> None:
        """Each claim's outcome to a backend that keeps metrics (MetricsReporter)."""
        reporter = metrics_reporter(self.backend)
        if reporter is None:
            return
        seconds = time.monotonic() - started
        for error in errors.values():
            try:
                reporter.claim_finished(operation, error, seconds)
            except Exception:  # the driver's code: never the claim's outcome
                _log.exception("Backend claim_finished failed", operation=operation)

    def _prepare(
        self, claims: Sequence[ClaimRef], call: CallContext
    ) -> Mapping[str, PrepareResult]:
        """The stages of :mod:`drakit.node_plugin.prepare.stages`; the lock only for the
        local ones."""
        with self.tombstones.prepare_in_flight() as began:
            run = PrepareRun(call, _log.bind(request_id=call.request_id), self.reports)
            run.began = began
            fetched = fetch_claims(self.reader, claims, run, self.metrics)
            if not fetched:
                return run.results
            with call.serialize, self._local:
                self._refresh_locked()
                committed = self.stages.run(fetched, run)
                self.metrics.prepared_claims.set(self._prepared_count())
        # Outside the lock: API writes must not hold up the other plugin instance.
        stages.after_commit(committed, run.log)
        return run.results

    def _unprepare(self, claims: Sequence[ClaimRef], call: CallContext) -> Mapping[str, str]:
        """The stages of :mod:`drakit.node_plugin.prepare.unprepare`."""
        log = _log.bind(request_id=call.request_id)
        usable, results = checked_refs(claims, "unprepare", self.metrics, log)
        if not usable:
            return results
        run = UnprepareRun(call, log, self.reports, results)
        with call.serialize, self._local:
            self._refresh_locked()
            forgotten = self.unstages.run(usable, run)
            self.metrics.prepared_claims.set(self._prepared_count())
        unprepare.after_commit(forgotten, run)
        return run.results

    # -- recovery ------------------------------------------------------------------------

    def _prepared_count(self) -> int:
        return sum(1 for e in self.checkpoint.entries() if e.completed)

    def _on_corrupt_checkpoint(self, reason: str, moved_to: Any) -> None:
        self.metrics.corrupt_checkpoints.inc()
        if self.events is not None:
            node = {"apiVersion": "v1", "kind": "Node", "name": self.config.node_name}
            self.events.warning(
                node,
                "CheckpointCorrupt",
                "RecoverCheckpoint",
                f"driver {self.driver}: checkpoint was corrupt ({reason}); moved to {moved_to} "
                "and rebuilt from the CDI specs",
            )

    # -- health (DriverCore's health methods, answered by the health monitor) -----------

    def supports_health(self) -> bool:
        return self.health.supported

    def kubelet_health_services(self) -> tuple[str, ...] | None:
        """DRAResourceHealth versions this node's kubelet calls (None: unknown, offer all)."""
        api = getattr(self.claims_api, "api", None)  # a wrapped claims API may hide it
        if api is None:
            return None
        return kubelet_health_services_for_node(api, self.config.node_name)

    def health_snapshot(self) -> list[DeviceHealth]:
        return self.health.snapshot()

    def watch_health(self) -> HealthSubscription:
        return self.health.watch()


def peek_prepared_count(path: Path, boot_id: str) -> int:
    """Completed claims of this boot in the checkpoint file, read without writing anything
    (0 when it is missing, unreadable or from an earlier boot: the first locked call loads,
    recovers and counts it properly)."""
    try:
        # The snapshot with its journal applied: the snapshot alone may be behind.
        document = read_document(path)
        current = document.get("apiVersion") == API_VERSION and document.get("bootID") == boot_id
        claims = document["claims"] if current else {}
        return sum(1 for uid, data in claims.items() if ClaimEntry.from_json(uid, data).completed)
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return 0
