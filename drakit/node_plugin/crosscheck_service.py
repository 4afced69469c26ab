"""The node plugin's PodResources cross-check, run every ``period`` seconds in the background.

Each round: ``List`` on the kubelet's PodResources socket, then the checkpoint read from its
files (read-only, no lock: the snapshot with its journal applied, as a tool reads it), then
:func:`~drakit.node_plugin.crosscheck.compare`. A lost claim or unknown device is confirmed
with ``Get`` on each pod it names before it counts (List and the checkpoint are two snapshots;
the pod may have finished in between). The :class:`~drakit.node_plugin.crosscheck.Tracker`
holds each finding back for ``grace`` seconds.

What a finding produces:

* metrics ``drakit_node_plugin_podresources_findings{kind}`` (now) and
  ``..._findings_reported_total{kind}`` (every finding once), plus the check's health
  (``..._check_errors_total``, ``..._last_success_timestamp_seconds``);
* one warning log line when reported, one info line when it is gone;
* for a leak older than ``event_after``: a Warning Event ``PreparedClaimUnused`` on the claim.

The last round's node view (claim -> pod -> container -> device, and the findings) is kept for
``/debug/node-view`` on the metrics endpoint (:meth:`node_view`).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol

from drakit.kubeapi.events import EventRecorder
from drakit.kubeapi.resources import RESOURCE_CLAIMS
from drakit.node_plugin.checkpoint import (
    API_VERSION,
    ClaimEntry,
    CorruptCheckpointError,
    read_boot_id,
    read_document,
)
from drakit.node_plugin.crosscheck import (
    KINDS,
    LEAK,
    ContainerUse,
    CrossCheckConfig,
    DeviceRef,
    Finding,
    PreparedClaim,
    Round,
    Tracker,
    compare,
)
from drakit.node_plugin.podresources import PodResourcesError
from drakit.telemetry.families import MetricFamilies
from drakit.telemetry.logs import get_logger
from drakit.telemetry.metrics import Registry

__all__ = ["NODE_VIEW_PATH", "CrossCheck", "CrossCheckConfig", "Kubelet", "checkpoint_claims"]

_log = get_logger(__name__)
EVENT_REASON = "PreparedClaimUnused"
NODE_VIEW_PATH = "/debug/node-view"


class Kubelet(Protocol):
    """What the check needs of :class:`~drakit.node_plugin.podresources.PodResourcesClient`."""

    def list_uses(self) -> list[ContainerUse]: ...

    def pod_uses(self, namespace: str, name: str) -> list[ContainerUse] | None: ...

    def close(self) -> None: ...


def checkpoint_claims(path: Path, boot_id: str) -> list[PreparedClaim]:
    """The claims of the checkpoint at ``path`` as the check sees them; none when the file is
    missing or from an earlier boot (the core drops those on its next call). Raises
    CorruptCheckpointError for a damaged file (the core repairs it; the round is skipped)."""
    try:
        document = read_document(path)
    except FileNotFoundError:
        return []
    if document.get("apiVersion") != API_VERSION or document.get("bootID") != boot_id:
        return []
    out = []
    for uid, data in document.get("claims", {}).items():
        entry = ClaimEntry.from_json(uid, data)
        devices = tuple(
            sorted(DeviceRef(d.pool_name, d.device_name, d.share_id or "") for d in entry.devices)
        )
        out.append(PreparedClaim(uid, entry.namespace, entry.name, entry.completed, devices))
    return out


class _Metrics:
    def __init__(self, registry: Registry) -> None:
        metric = MetricFamilies(registry, "drakit_node_plugin_podresources")
        self.findings = metric.gauge(
            "findings",
            "Disagreements between the kubelet's PodResources and the checkpoint that have "
            "persisted past the grace period, by kind (leak, unknown-device, lost-claim).",
            "kind",
        )
        self.reported = metric.counter(
            "findings_reported",
            "Findings reported (each once, when it passed the grace period), by kind.",
            "kind",
        )
        self.oldest = metric.gauge(
            "oldest_finding_seconds",
            "How long the oldest current finding of each kind has persisted.",
            "kind",
        )
        self.errors = metric.counter(
            "check_errors", "Cross-check rounds that failed (kubelet or checkpoint unreadable)."
        )
        self.last_success = metric.gauge(
            "last_success_timestamp_seconds", "Unix time of the last complete cross-check round."
        )
        for kind in KINDS:
            self.findings.labels(kind)
            self.reported.labels(kind)
            self.oldest.labels(kind)

    def record(self, done: Round) -> None:
        for kind in KINDS:
            ages = [done.ages[f.key] for f in done.current if f.kind == kind]
            self.findings.labels(kind).set(len(ages))
            self.oldest.labels(kind).set(max(ages, default=0.0))
        for finding in done.new:
            self.reported.labels(finding.kind).inc()
        self.last_success.set(time.time())


class CrossCheck:
    """The background check; :meth:`run_once` is one round (tests call it directly)."""

    def __init__(
        self,
        config: CrossCheckConfig,
        *,
        driver: str,
        node: str,
        checkpoint_path: Path,
        kubelet: Kubelet,
        registry: Registry,
        events: EventRecorder | None = None,
        clock: Callable[[], float] = time.monotonic,
        boot_id: Callable[[], str] = read_boot_id,
    ) -> None:
        self.config = config
        self.driver = driver
        self.node = node
        self._checkpoint_path = checkpoint_path
        self._kubelet = kubelet
        self._events = events
        self._clock = clock
        self._boot_id = boot_id
        self._tracker = Tracker(config.grace, config.event_after)
        self._metrics = _Metrics(registry)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._view_lock = threading.Lock()
        self._round_lock = threading.Lock()
        self._view: dict[str, Any] = self._document([], [], Round(), error="no round yet")

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="podresources-check", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self._kubelet_timeout() + 5)
        self._kubelet.close()

    def _kubelet_timeout(self) -> float:
        return float(getattr(self._kubelet, "timeout", 10.0))

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.run_once()
            except Exception:  # a bug in one round must not end the check for good
                self._metrics.errors.inc()
                _log.exception("PodResources cross-check round failed unexpectedly")
            self._stop.wait(self.config.period)

    def debug_routes(self) -> dict[str, Callable[[], bytes]]:
        """``/debug/node-view`` for the metrics endpoint (see docs/podresources.md)."""
        return {NODE_VIEW_PATH: lambda: json.dumps(self.node_view()).encode()}

    def node_view(self) -> dict[str, Any]:
        """The last round's view (a JSON-able document; see docs/podresources.md)."""
        with self._view_lock:
            return self._view

    def run_once(self) -> Round | None:
        """One round; None when the kubelet or the checkpoint could not be read (logged,
        counted, and the findings so far are kept: one failed read is no evidence).
        Rounds never overlap (the tracker is not thread-safe)."""
        with self._round_lock:
            return self._round()

    def _round(self) -> Round | None:
        try:
            uses = self._kubelet.list_uses()
            claims = checkpoint_claims(self._checkpoint_path, self._boot_id())
            findings = self._confirmed(compare(uses, claims), uses)
        except (PodResourcesError, CorruptCheckpointError, OSError, ValueError) as exc:
            self._metrics.errors.inc()
            _log.warning("PodResources cross-check failed", error=str(exc))
            with self._view_lock:
                self._view = {**self._view, "error": str(exc)}
            return None
        done = self._tracker.update(findings, self._clock())
        self._metrics.record(done)
        self._report(done)
        with self._view_lock:
            self._view = self._document(uses, claims, done)
        return done

    def _confirmed(self, findings: list[Finding], uses: list[ContainerUse]) -> list[Finding]:
        """``findings`` without lost claims and unknown devices that Get no longer shows."""
        suspects = {
            (u.pod_namespace, u.pod_name)
            for f in findings
            if f.kind != LEAK
            for u in uses
            if (u.claim_namespace, u.claim_name) == (f.claim_namespace, f.claim_name)
        }
        if not suspects:
            return findings
        fresh: list[ContainerUse] = []
        for namespace, name in sorted(suspects):
            fresh.extend(self._kubelet.pod_uses(namespace, name) or [])
        still = {(u.claim_namespace, u.claim_name, tuple(u.devices)) for u in fresh}
        return [f for f in findings if f.kind == LEAK or self._still_used(f, still)]

    @staticmethod
    def _still_used(finding: Finding, still: set[tuple[str, str, tuple[DeviceRef, ...]]]) -> bool:
        wanted = set(finding.devices)
        return any(
            (ns, name) == (finding.claim_namespace, finding.claim_name) and wanted & set(devices)
            for ns, name, devices in still
        )

    def _report(self, done: Round) -> None:
        for finding in done.new:
            _log.warning(
                f"PodResources cross-check: {finding.kind}",
                kind=finding.kind,
                claim=finding.claim,
                claim_uid=finding.claim_uid,
                pods=list(finding.pods),
                devices=[str(d) for d in finding.devices],
                detail=finding.detail,
                seconds=round(done.ages.get(finding.key, 0.0)),
            )
        for finding in done.resolved:
            _log.info(
                f"PodResources cross-check: {finding.kind} resolved",
                kind=finding.kind,
                claim=finding.claim,
                claim_uid=finding.claim_uid,
            )
        for finding in done.events:
            self._event(finding, done.ages.get(finding.key, 0.0))

    def _event(self, finding: Finding, age: float) -> None:
        if self._events is None:
            return
        regarding = {
            "apiVersion": RESOURCE_CLAIMS.api_version,
            "kind": RESOURCE_CLAIMS.kind,
            "namespace": finding.claim_namespace,
            "name": finding.claim_name,
            "uid": finding.claim_uid,
        }
        devices = ", ".join(str(d) for d in finding.devices) or "no devices"
        note = (
            f"driver {self.driver} on node {self.node}: claim prepared ({devices}) but used by "
            f"no container for {int(age)} s; the kubelet normally unprepares it when its pods "
            "are gone (see docs/podresources.md)"
        )
        self._events.warning(regarding, EVENT_REASON, "CrossCheck", note)

    def _document(
        self,
        uses: Sequence[ContainerUse],
        claims: Iterable[PreparedClaim],
        done: Round,
        *,
        error: str = "",
    ) -> dict[str, Any]:
        return {
            "apiVersion": "drakit.dev/v1",
            "kind": "NodeView",
            "driver": self.driver,
            "node": self.node,
            "checkedAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "error": error,
            "claims": node_view_claims(uses, claims),
            "findings": [
                {
                    "kind": f.kind,
                    "claim": f.claim,
                    "claimUID": f.claim_uid,
                    "pods": list(f.pods),
                    "devices": [str(d) for d in f.devices],
                    "detail": f.detail,
                    "seconds": round(done.ages.get(f.key, 0.0)),
                }
                for f in done.current
            ],
        }


def node_view_claims(
    uses: Sequence[ContainerUse], claims: Iterable[PreparedClaim]
) -> list[dict[str, Any]]:
    """claim -> pod -> container -> devices, for the checkpoint's claims and every claim the
    kubelet names (``prepared`` says which the checkpoint holds)."""
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for claim in claims:
        rows[claim.key] = {
            "namespace": claim.namespace,
            "name": claim.name,
            "uid": claim.uid,
            "prepared": "completed" if claim.completed else "started",
            "devices": [str(d) for d in claim.devices],
            "containers": [],
        }
    for use in sorted(uses):
        row = rows.setdefault(
            use.claim_key,
            {
                "namespace": use.claim_namespace,
                "name": use.claim_name,
                "uid": "",
                "prepared": "no",
                "devices": [],
                "containers": [],
            },
        )
        row["containers"].append(
            {"pod": use.pod, "container": use.container, "devices": [str(d) for d in use.devices]}
        )
    return [rows[k] for k in sorted(rows)]
