"""The device status output: the backend's entries in the claim's ``status.devices``.

Checked at prepare under the lock (a bad entry fails the prepare), written to the API
server after the commit, outside the lock, best effort; removed after the unprepare is
saved. See :mod:`drakit.node_plugin.device_status` for the contract of the entries and the
writes. The checkpoint records which entries were written (:data:`CHECKPOINT_KEY`), so an
unprepare after a restart removes exactly those.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from drakit.node_plugin.checkpoint import ClaimEntry
from drakit.node_plugin.claims import ClaimSource
from drakit.node_plugin.device_status import (
    CHECKPOINT_KEY,
    DeviceStatusError,
    DeviceStatusWriter,
    build_entries,
    cluster_support,
    keys_from_checkpoint,
    keys_of,
)
from drakit.node_plugin.driver import PluginConfig
from drakit.node_plugin.prepare.draft import Draft
from drakit.node_plugin.prepare.output import AfterCommit, ClaimOutput
from drakit.node_plugin.prepare.report import ClaimEvents, claim_object
from drakit.plugin.claims import ClaimRef
from drakit.telemetry.logs import StructuredLogger

NO_API_ACCESS = "this plugin has no API access to write claim status"


class DeviceStatusOutput(ClaimOutput):
    """``status.devices`` entries through ``writer`` (None: the plugin cannot write status,
    and a backend that reports some gets an Event saying so)."""

    title = "device status"

    def __init__(
        self, driver: str, writer: DeviceStatusWriter | None, events: ClaimEvents | None
    ) -> None:
        self.driver = driver
        self.writer = writer
        self.events = events

    def write(self, draft: Draft) -> AfterCommit | None:
        """Check the entries and record their keys; the API write is left for after the
        commit. ``PrepareFailed`` naming device, field and reason for a bad entry."""
        devices = draft.claim.to_prepare.devices
        try:
            entries = build_entries(self.driver, devices, draft.prepared.device_status)
        except DeviceStatusError as exc:
            raise draft.backend_failure("device_status", exc) from exc
        if not entries:
            return None
        draft.record[CHECKPOINT_KEY] = keys_of(entries)
        ref, obj = draft.claim.ref, draft.claim.obj

        def publish(log: StructuredLogger) -> None:
            error = self.writer.write(ref, entries) if self.writer else NO_API_ACCESS
            if error:
                self._failed(ref, obj, "Prepare", f"device status not written: {error}", log)

        return publish

    def roll_back(self, uid: str) -> None:
        """Nothing: the entries are written only once the prepare is saved."""

    def forget(self, claim: ClaimRef, entry: ClaimEntry | None) -> AfterCommit | None:
        """Remove the entries the record says were written, once the unprepare is saved."""
        raw = entry.extra.get(CHECKPOINT_KEY) if entry is not None else None
        writer = self.writer
        if not raw or writer is None:
            return None

        def remove(log: StructuredLogger) -> None:
            error = writer.remove(claim, keys_from_checkpoint(raw, log))
            if error:
                self._failed(claim, None, "Unprepare", f"device status not removed: {error}", log)

        return remove

    def _failed(
        self,
        ref: ClaimRef,
        obj: Mapping[str, Any] | None,
        action: str,
        error: str,
        log: StructuredLogger,
    ) -> None:
        """A status write that failed: the claim's devices are fine, so only log and Event."""
        error = f"ResourceClaim {ref.namespace}/{ref.name}: {error}"
        log.warning(
            "Device status of a claim not written",
            claim=f"{ref.namespace}/{ref.name}",
            claim_uid=ref.uid,
            action=action,
            error=error,
        )
        if self.events is not None:
            regarding = dict(obj) if obj else claim_object(ref)
            self.events.warning(regarding, "DeviceStatusNotWritten", action, error)


def default_status_writer(
    claims_api: ClaimSource, config: PluginConfig
) -> DeviceStatusWriter | None:
    """A writer through ``claims_api`` when it can update status (a Resource), else None."""
    if not hasattr(claims_api, "update_status"):
        return None
    api = getattr(claims_api, "api", None)
    return DeviceStatusWriter(
        claims_api,  # type: ignore[arg-type]
        config.driver_name,
        field_manager=f"{config.driver_name}/{config.node_name}",
        unsupported=cluster_support(api) if api is not None else (lambda: ""),
    )
