"""The CDI spec output: the claim's transient CDI spec, and the CDI IDs of the answer.

It goes last in the list of outputs: the spec holds the container edits outputs before it
added (:class:`~drakit.node_plugin.prepare.draft.RequestEdits`), and its annotation records
the claim as prepared (:data:`~drakit.node_plugin.cdi.PREPARED_ANNOTATION`), the record a
corrupt checkpoint is rebuilt from, so it must see everything the record holds.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

from drakit.node_plugin.cdi import PREPARED_ANNOTATION, CDIDevice, CDISpecs
from drakit.node_plugin.checkpoint import ClaimEntry
from drakit.node_plugin.config import base_request
from drakit.node_plugin.driver import PreparedDevice
from drakit.node_plugin.prepare.draft import Draft
from drakit.node_plugin.prepare.output import AfterCommit, ClaimOutput


class CDISpecOutput(ClaimOutput):
    """One spec per claim in the CDI root (:class:`~drakit.node_plugin.cdi.CDISpecs`)."""

    title = "CDI spec"

    def __init__(self, specs: CDISpecs) -> None:
        self.specs = specs

    def write(self, draft: Draft) -> AfterCommit | None:
        """Name a CDI device for every device (and for every :class:`RequestEdits`), set the
        answer's devices with their CDI IDs, and write the spec; none for a claim without
        devices. ``PrepareFailed`` when the spec cannot be written."""
        cdi_devices = [CDIDevice(e.name, e.edits) for e in draft.request_edits]
        draft.devices = self._answer(draft, cdi_devices)
        if not cdi_devices:
            return None
        entry = draft.entry()
        annotation = json.dumps(entry.to_json() | {"uid": entry.uid}, separators=(",", ":"))
        try:
            self.specs.write(
                draft.uid,
                cdi_devices,
                {PREPARED_ANNOTATION: annotation},
                claim_edits=draft.prepared.claim_edits,
            )
        except OSError as exc:
            raise draft.failure("PrepareFailed", f"cannot write CDI spec: {exc}") from exc
        return None

    def _answer(self, draft: Draft, cdi_devices: list[CDIDevice]) -> tuple[PreparedDevice, ...]:
        """The answer's devices; appends each device's CDI device to ``cdi_devices``. The
        request edits' IDs ride on the request's first device, as upstream's helper does."""
        riders: dict[str, list[str]] = {}
        for extra in draft.request_edits:
            riders.setdefault(extra.request, []).append(self.specs.device_id(extra.name))
        answer = []
        devices = draft.claim.to_prepare.devices
        for device, edits in zip(devices, draft.prepared.device_edits, strict=True):
            cdi_name = self.specs.device_name(draft.uid, device.device, device.share_id)
            cdi_devices.append(CDIDevice(cdi_name, edits))
            request = base_request(device.request)
            ids = (self.specs.device_id(cdi_name), *riders.pop(request, ()))
            answer.append(
                PreparedDevice(
                    request_names=(request,),
                    pool_name=device.pool,
                    device_name=device.device,
                    cdi_device_ids=ids,
                    share_id=device.share_id,
                )
            )
        return tuple(answer)

    def roll_back(self, uid: str) -> None:
        self.specs.remove(uid)

    def in_place(self, entry: ClaimEntry) -> bool:
        """A claim with devices needs its spec: without it the runtime cannot resolve the
        CDI IDs the kubelet holds (a wiped ``/var/run/cdi`` without a reboot)."""
        return not entry.devices or self.specs.spec_path(entry.uid).exists()

    def leftovers(self) -> Iterator[str]:
        """Every claim with a spec of this driver: no spec of an earlier boot is valid."""
        return (uid for uid, _ in self.specs.read_all())

    def recorded(self) -> Iterator[ClaimEntry]:
        """The completed claims the specs' annotations record (unreadable ones skipped)."""
        for uid, spec in self.specs.read_all():
            raw = spec.get("annotations", {}).get(PREPARED_ANNOTATION)
            try:
                entry = ClaimEntry.from_json(uid, json.loads(raw)) if raw else None
            except ValueError:
                entry = None
            if entry is not None and entry.completed:
                yield entry
