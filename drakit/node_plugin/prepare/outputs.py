"""The list of per-claim outputs every prepare writes: the one place an output is added.

Order matters: outputs write in this order and roll back (and forget) in reverse. The CDI
spec comes last: it carries the container edits the outputs before it added and records
the claim as prepared. Device metadata comes before it and is removed after it, so no
mount in a spec names a missing file.
"""

from __future__ import annotations

from drakit.node_plugin.cdi import CDISpecs
from drakit.node_plugin.device_metadata import MetadataFiles
from drakit.node_plugin.device_status import DeviceStatusWriter
from drakit.node_plugin.prepare.cdi_output import CDISpecOutput
from drakit.node_plugin.prepare.metadata_output import DeviceMetadataOutput
from drakit.node_plugin.prepare.output import ClaimOutput
from drakit.node_plugin.prepare.report import ClaimEvents
from drakit.node_plugin.prepare.status_output import DeviceStatusOutput


def standard_outputs(
    driver: str,
    cdi: CDISpecs,
    metadata: MetadataFiles,
    status: DeviceStatusWriter | None,
    events: ClaimEvents | None,
) -> list[ClaimOutput]:
    """The outputs of a prepare, in write order (``status``: None when the plugin cannot
    write claim status; ``events``: where a status write that failed is reported)."""
    return [
        DeviceStatusOutput(driver, status, events),
        DeviceMetadataOutput(metadata),
        CDISpecOutput(cdi),
    ]
