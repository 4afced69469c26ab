"""Recovery at start-up over the outputs: after a reboot, and from a corrupt checkpoint.

A claim an interrupted call left ``PrepareStarted`` needs nothing here: the next prepare
completes it and the next unprepare rolls it back, through the stages of a call.
"""

from __future__ import annotations

from collections.abc import Sequence

from drakit.node_plugin.checkpoint import Checkpoint, ClaimEntry
from drakit.node_plugin.prepare.output import ClaimOutput


def forget_reboot_leftovers(checkpoint: Checkpoint, outputs: Sequence[ClaimOutput]) -> None:
    """After a reboot the checkpoint dropped its claims; every output of ours goes too.

    Every one the outputs find on the node, not only those of the dropped claims: on a CDI
    root that survives a reboot, a spec may outlive a ``PrepareStarted`` record the crash
    took (it is not flushed on its own), and no output of an earlier boot is valid. The
    backend is not asked: whatever it held went with the boot.
    """
    stale = {entry.uid for entry in checkpoint.dropped_after_reboot}
    if checkpoint.rebooted:
        for output in outputs:
            stale.update(output.leftovers())
    for uid in sorted(stale):
        for output in reversed(outputs):
            output.roll_back(uid)
    checkpoint.dropped_after_reboot.clear()
    checkpoint.rebooted = False


def recorded_claims(outputs: Sequence[ClaimOutput]) -> list[ClaimEntry]:
    """The prepared claims the outputs recorded, to rebuild a corrupt checkpoint from."""
    return [entry for output in outputs for entry in output.recorded()]
