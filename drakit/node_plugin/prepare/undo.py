"""Undoing a claim on the node: the roll back of a failed prepare and the unprepare.

Both go the same way, the mirror of a prepare: the backend lets go first, then every
output in reverse list order, then the claim's checkpoint entry is dropped (the caller
saves). A failing step stops the undo there: what is left, the entry included, is still
recorded, so the next unprepare (the kubelet retries) tries again. The backend goes
first so that while it still holds the claim, every output of it stays in place.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from drakit.node_plugin.checkpoint import Checkpoint, ClaimEntry
from drakit.node_plugin.driver import CallContext
from drakit.node_plugin.prepare.backend_calls import backend_unprepare
from drakit.node_plugin.prepare.output import AfterCommit, ClaimOutput
from drakit.plugin.backend import Backend
from drakit.plugin.claims import ClaimRef
from drakit.telemetry.logs import StructuredLogger


class ClaimUndo:
    """Undoes claims with ``backend`` over ``outputs`` and ``checkpoint`` (under the lock)."""

    def __init__(
        self, backend: Backend, checkpoint: Checkpoint, outputs: Sequence[ClaimOutput]
    ) -> None:
        self.backend = backend
        self.checkpoint = checkpoint
        self.outputs = tuple(outputs)

    def roll_back(
        self, ref: ClaimRef, state: Mapping[str, Any], call: CallContext, log: StructuredLogger
    ) -> str:
        """Undo a prepare that failed (``state``: what the backend holds for the claim);
        "" or the error text. Every output rolls back, whichever got to write."""
        error, _ = self._undo(ref, state, call, log, lambda output: output.roll_back(ref.uid))
        return error

    def forget(
        self, ref: ClaimRef, entry: ClaimEntry | None, call: CallContext, log: StructuredLogger
    ) -> tuple[str, list[AfterCommit]]:
        """Unprepare ``ref`` (as it was prepared) recorded as ``entry``; ("" or the error
        text, the outputs' work for once the unprepare is saved). Without an entry the
        backend was never given the claim: only stray outputs are removed."""
        state = entry.backend_state if entry is not None else None
        return self._undo(ref, state, call, log, lambda output: output.forget(ref, entry))

    def _undo(
        self,
        ref: ClaimRef,
        state: Mapping[str, Any] | None,
        call: CallContext,
        log: StructuredLogger,
        step: Callable[[ClaimOutput], AfterCommit | None],
    ) -> tuple[str, list[AfterCommit]]:
        """The backend (when ``state`` says it was given the claim), then ``step`` for every
        output in reverse list order, then the entry dropped; ("" or the error of the step
        that stopped it, the outputs' work for after the save)."""
        if state is not None:
            error = backend_unprepare(self.backend, ref, state, call, log)
            if error:
                return error, []
        later: list[AfterCommit] = []
        for output in reversed(self.outputs):
            try:
                work = step(output)
            except OSError as exc:
                return f"cannot remove {output.title}: {exc}", []
            if work is not None:
                later.append(work)
        if state is not None:
            self.checkpoint.remove(ref.uid)
        return "", later
