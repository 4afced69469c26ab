"""The one interface every per-claim output of a prepare shares.

An output is what the plugin makes of the backend's answer for one claim, beyond the
answer to the kubelet: the CDI spec, the device metadata files, the claim's
``status.devices`` entries, and whatever comes next. Each is a :class:`ClaimOutput`
in the list of :func:`drakit.node_plugin.prepare.outputs.standard_outputs`; the stages
(:mod:`drakit.node_plugin.prepare.stages`) call every output the same way and know none
of them by name, so adding an output is one new class in that list.

How the stages call an output (every call but the :data:`AfterCommit` work is made
under the serialize lock, one claim at a time):

* :meth:`ClaimOutput.write` once the backend prepared the claim, in list order.
* :meth:`ClaimOutput.roll_back` when the prepare fails (at any stage after the claim was
  recorded as started, or when its ``PrepareCompleted`` record cannot be saved), in
  reverse list order, after the backend let go of the claim; every output, whether it
  wrote or not: the one that failed may have written half, and a claim an earlier,
  interrupted attempt left ``PrepareStarted`` may have any output's leftovers.
* :meth:`ClaimOutput.forget` at unprepare, in reverse list order, after the backend let
  go of the claim; the checkpoint entry is dropped after the last one.
* After a crash: :meth:`ClaimOutput.in_place` decides whether a claim recorded as
  prepared can be answered from the checkpoint or is prepared again;
  :meth:`ClaimOutput.leftovers` names the claims whose output an earlier boot left
  (each is rolled back); :meth:`ClaimOutput.recorded` rebuilds a corrupt checkpoint.

An ``OSError`` from ``roll_back`` or ``forget`` stops the undo there: the claim keeps
its checkpoint entry (and the outputs not yet undone), so the kubelet's retry of the
unprepare finds it and tries again.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable

from drakit.node_plugin.checkpoint import ClaimEntry
from drakit.node_plugin.prepare.draft import Draft
from drakit.plugin.claims import ClaimRef
from drakit.telemetry.logs import StructuredLogger

#: Work an output leaves for after the commit, outside the serialize lock (an API write
#: must not hold up the other plugin instance). It runs only when the claim's new state
#: was saved, gets the call's logger, and never fails the claim: it logs and reports.
AfterCommit = Callable[[StructuredLogger], None]


class ClaimOutput(ABC):
    """One per-claim output of a prepare. Subclasses implement ``write`` and ``roll_back``;
    the other methods have defaults that fit an output kept on the node alone."""

    #: What the output is, as messages name it ("CDI spec").
    title: str = "output"

    @abstractmethod
    def write(self, draft: Draft) -> AfterCommit | None:
        """Write the claim's output from ``draft`` (and add to the draft what later outputs
        and the record need); idempotent: a re-prepare writes it again. Raises the claim's
        :class:`~drakit.node_plugin.claims.ClaimError` (see ``Draft.failure``) when the
        backend's answer or the claim cannot be written; every output is then rolled back.
        Returns work for after the commit, or None."""

    @abstractmethod
    def roll_back(self, uid: str) -> None:
        """Undo whatever this output may hold for claim ``uid``, written in full, in part or
        not at all; idempotent. ``OSError`` when it cannot (the undo stops there)."""

    def forget(self, claim: ClaimRef, entry: ClaimEntry | None) -> AfterCommit | None:
        """Undo the output of a claim being unprepared (``claim`` as it was prepared;
        ``entry`` its record, None for a claim this node has no record of); idempotent.
        Returns work for once the unprepare is saved, or None. Default: ``roll_back``."""
        self.roll_back(claim.uid)
        return None

    def in_place(self, entry: ClaimEntry) -> bool:
        """Whether the output of a claim recorded as prepared is still there (default:
        True). False makes a repeated prepare prepare the claim again instead of
        answering from the checkpoint (someone wiped a folder without a reboot)."""
        return True

    def leftovers(self) -> Iterable[str]:
        """UIDs of the claims this output holds on the node, read from the node (not the
        checkpoint): after a reboot every one is rolled back. Default: none."""
        return ()

    def recorded(self) -> Iterable[ClaimEntry]:
        """Prepared claims this output recorded on its own, to rebuild a corrupt checkpoint
        from. Default: none."""
        return ()
