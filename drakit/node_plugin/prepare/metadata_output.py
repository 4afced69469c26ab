"""The device metadata output (KEP-5304): one file per request, mounted into the containers.

The files are :class:`~drakit.node_plugin.device_metadata.MetadataFiles`'; their mounts go
to the CDI spec output as :class:`~drakit.node_plugin.prepare.draft.RequestEdits`, so the
spec and the checkpoint's record of it come and go together with the files.
"""

from __future__ import annotations

from drakit.node_plugin.device_metadata import (
    ClaimIdentity,
    DeviceMetadataError,
    MetadataFiles,
    UnsafeClaimNameError,
)
from drakit.node_plugin.prepare.draft import Draft, RequestEdits
from drakit.node_plugin.prepare.output import AfterCommit, ClaimOutput


class DeviceMetadataOutput(ClaimOutput):
    """The backend's ``device_metadata`` as files under the plugin's data folder."""

    title = "device metadata"

    def __init__(self, files: MetadataFiles) -> None:
        self.files = files

    def write(self, draft: Draft) -> AfterCommit | None:
        """Write the files (none when the backend gave no metadata) and add their mounts.

        ``InvalidResourceClaim`` when a part of the claim cannot name a folder (the claim's
        fault); ``PrepareFailed`` for metadata that cannot be written (the backend's).
        """
        metadata = draft.prepared.device_metadata
        if not metadata:
            return None
        devices = draft.claim.to_prepare.devices
        try:
            if len(metadata) != len(devices):
                raise DeviceMetadataError(f"{len(metadata)} entries for {len(devices)} devices")
            mounts = self.files.write(ClaimIdentity.of(draft.claim.obj), devices, metadata)
        except UnsafeClaimNameError as exc:
            raise draft.failure("InvalidResourceClaim", str(exc)) from exc
        except (DeviceMetadataError, OSError) as exc:
            raise draft.backend_failure("device_metadata", exc) from exc
        draft.request_edits.extend(RequestEdits(m.request, m.cdi_name, m.edits) for m in mounts)
        return None

    def roll_back(self, uid: str) -> None:
        """Delete the claim's files; after the CDI spec (later in the list, so undone
        first): no mount may name a missing file."""
        self.files.remove(uid)
