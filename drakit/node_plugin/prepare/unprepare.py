"""The stages of an unprepare, the mirror of a prepare's; no API call is needed.

1. **verify** (no lock): every claim reference is checked
   (:func:`~drakit.node_plugin.prepare.fetch.checked_refs`).
2. **guard** (per claim): a claim whose caller has gone is abandoned.
3. **forget** (per claim): the backend lets go of the claim, every output forgets it, its
   entry is dropped (:meth:`~drakit.node_plugin.prepare.undo.ClaimUndo.forget`). A claim
   left ``PrepareStarted`` by a crash is rolled back the same way. The call waits for the
   backend at most ``--unprepare-timeout`` for all its claims together
   (:mod:`~drakit.node_plugin.prepare.bounded`): a claim whose backend call outlives it
   keeps its entry and its answer is the timeout error.
4. **commit** (one flushed save for the batch); every claim unprepared leaves a tombstone
   for the prepares in flight (:mod:`~drakit.node_plugin.prepare.tombstones`); then,
   outside the lock, the outputs' work for after the commit (removing status entries from
   the claim).

Everything is in the checkpoint: the backend gets the claim as it was prepared
(namespace and name from the checkpoint, the kubelet's where the entry has none).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from drakit.node_plugin.checkpoint import STARTED, Checkpoint, ClaimEntry
from drakit.node_plugin.claims import abandoned, describe
from drakit.node_plugin.prepare.output import AfterCommit
from drakit.node_plugin.prepare.run import UnprepareRun, log_done_after_reply
from drakit.node_plugin.prepare.tombstones import UnprepareTombstones
from drakit.node_plugin.prepare.undo import ClaimUndo
from drakit.plugin.claims import ClaimRef


@dataclass
class Forgotten:
    """A claim whose entry the forget stage dropped, on its way to the commit."""

    ref: ClaimRef
    after_commit: list[AfterCommit] = field(default_factory=list)


class UnprepareStages:
    """Stages 2-4 over one checkpoint and one undo; use under the lock."""

    def __init__(
        self,
        checkpoint: Checkpoint,
        undo: ClaimUndo,
        tombstones: UnprepareTombstones | None = None,
    ) -> None:
        """``tombstones``: where each claim unprepared is told, before the lock is released,
        to the prepares in flight (shared with the prepare stages)."""
        self.checkpoint = checkpoint
        self.undo = undo
        self.tombstones = UnprepareTombstones() if tombstones is None else tombstones

    def run(self, refs: Sequence[ClaimRef], run: UnprepareRun) -> list[Forgotten]:
        """Every claim's answer into ``run``; returns the claims whose removal was saved,
        their work for after the commit still to do (outside the lock)."""
        forgotten = []
        attempts = self.undo.attempts
        until = time.monotonic() + attempts.timeout
        if run.call.deadline is not None:
            until = min(until, run.call.deadline)
        # Claims whose backend unprepare is still running from an earlier call go last: a
        # stuck one must not spend the wait the call's other claims need.
        for ref in sorted(refs, key=lambda r: attempts.running(r.uid)):
            if not run.call.is_active():
                run.results[ref.uid] = str(abandoned(ref))
                continue
            done = self.forget(ref, run, until)
            if done is not None:
                forgotten.append(done)
        saved = self.commit(forgotten, run)
        self.tombstones.unprepared(ref.uid for ref in refs if run.results.get(ref.uid) == "")
        return saved

    def forget(self, ref: ClaimRef, run: UnprepareRun, until: float) -> Forgotten | None:
        """Stage 3 for one claim, its backend call waited for until ``until``
        (:func:`time.monotonic`); never raises. Returns the claim when its entry was
        dropped, None when it had none or its undo failed or timed out (then its error is
        its answer, and its entry stays)."""
        entry = self.checkpoint.get(ref.uid)
        try:
            if entry is not None and entry.state == STARTED:
                run.log.info("Rolling back a prepare interrupted earlier", claim_uid=ref.uid)
            error, later = self.undo.forget(
                _as_prepared(ref, entry), entry, run.call, run.log, until
            )
        except Exception as exc:
            run.log.exception("Unprepare of a claim failed", claim_uid=ref.uid)
            error, later = f"cannot update the node's state: {describe(exc)}", []
        if error:
            run.failed(ref, error)
            return None
        run.results[ref.uid] = ""
        return Forgotten(ref, later) if entry is not None else None

    def commit(self, forgotten: list[Forgotten], run: UnprepareRun) -> list[Forgotten]:
        """Stage 4: one flushed save persists every claim's own outcome. If it fails, the
        claims undone on the node say so (not recorded: the kubelet retries); returns the
        claims whose removal was saved."""
        try:
            self.checkpoint.save()
        except OSError as exc:
            for gone in forgotten:
                run.failed(gone.ref, f"cannot save checkpoint: {exc}")
            return []
        return forgotten


def after_commit(forgotten: Sequence[Forgotten], run: UnprepareRun) -> None:
    """The outputs' work for the claims unprepared, then (once the reply is sent) one log
    line each; outside the lock. A failure is logged: the claim is unprepared."""
    for gone in forgotten:
        for work in gone.after_commit:
            try:
                work(run.log)
            except Exception:
                run.log.exception("Output work after an unprepare failed", claim_uid=gone.ref.uid)
    done: dict[str, dict[str, object]] = {gone.ref.uid: {} for gone in forgotten}
    log_done_after_reply(run.call, run.log, "Unprepared claim", done)


def _as_prepared(ref: ClaimRef, entry: ClaimEntry | None) -> ClaimRef:
    """The claim as it was prepared: the checkpoint's namespace and name where it has them."""
    if entry is None:
        return ref
    return ClaimRef(entry.namespace or ref.namespace, ref.uid, entry.name or ref.name)
