"""Undoing a claim on the node: the roll back of a failed prepare and the unprepare.

Both go the same way, the mirror of a prepare: the backend lets go first, then every
output in reverse list order, then the claim's checkpoint entry is dropped (the caller
saves). A failing step stops the undo there: what is left, the entry included, is still
recorded, so the next unprepare (the kubelet retries) tries again. The backend goes
first so that while it still holds the claim, every output of it stays in place.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from drakit.node_plugin.checkpoint import Checkpoint, ClaimEntry
from drakit.node_plugin.driver import CallContext
from drakit.node_plugin.prepare.backend_calls import backend_unprepare
from drakit.node_plugin.prepare.bounded import UnprepareAttempts
from drakit.node_plugin.prepare.output import AfterCommit, ClaimOutput
from drakit.plugin.backend import Backend
from drakit.plugin.claims import ClaimRef
from drakit.telemetry.logs import StructuredLogger


class ClaimUndo:
    """Undoes claims with ``backend`` over ``outputs`` and ``checkpoint`` (under the lock).

    An unprepare's backend call is bounded by ``attempts`` (:mod:`~drakit.node_plugin.\
prepare.bounded`); a roll back's is not: it is part of a prepare, which the backend
    bounds with the caller's deadline.
    """

    def __init__(
        self,
        backend: Backend,
        checkpoint: Checkpoint,
        outputs: Sequence[ClaimOutput],
        attempts: UnprepareAttempts | None = None,
    ) -> None:
        self.backend = backend
        self.checkpoint = checkpoint
        self.outputs = tuple(outputs)
        self.attempts = UnprepareAttempts() if attempts is None else attempts

    def roll_back(
        self, ref: ClaimRef, state: Mapping[str, Any], call: CallContext, log: StructuredLogger
    ) -> str:
        """Undo a prepare that failed (``state``: what the backend holds for the claim);
        "" or the error text. Every output rolls back, whichever got to write."""
        error, _ = self._undo(
            ref,
            state,
            lambda: backend_unprepare(self.backend, ref, state, call, log),
            lambda output: output.roll_back(ref.uid),
        )
        return error

    def forget(
        self,
        ref: ClaimRef,
        entry: ClaimEntry | None,
        call: CallContext,
        log: StructuredLogger,
        until: float | None = None,
    ) -> tuple[str, list[AfterCommit]]:
        """Unprepare ``ref`` (as it was prepared) recorded as ``entry``; ("" or the error
        text, the outputs' work for once the unprepare is saved). Without an entry the
        backend was never given the claim: only stray outputs are removed. The backend's
        call is waited for until ``until`` (:func:`time.monotonic`; default: the
        attempts' timeout from now); past it, the claim's answer is the timeout error and
        nothing else is undone."""
        state = entry.backend_state if entry is not None else None
        if entry is None:
            self.attempts.drop_finished(ref.uid)
        end = time.monotonic() + self.attempts.timeout if until is None else until
        return self._undo(
            ref,
            state,
            lambda: self._bounded_backend(ref, state or {}, call, log, end),
            lambda output: output.forget(ref, entry),
        )

    def _bounded_backend(
        self,
        ref: ClaimRef,
        state: Mapping[str, Any],
        call: CallContext,
        log: StructuredLogger,
        until: float,
    ) -> str:
        """The backend's unprepare of ``ref`` waited for until ``until``; "" or the error."""
        timeout = self.attempts.timeout
        wait = until - time.monotonic()
        if wait <= 0 and not self.attempts.pending(ref.uid):
            return (
                f"backend {self.backend.name}: unprepare not started, this call's "
                f"--unprepare-timeout of {timeout:g}s was spent on its other claims; "
                "the next NodeUnprepareResources starts it"
            )
        # A backend that reads the deadline stops by itself when the wait ends.
        deadline = until if call.deadline is None else min(call.deadline, until)
        bounded = replace(call, deadline=deadline)
        outcome = self.attempts.run(
            ref.uid, lambda: backend_unprepare(self.backend, ref, state, bounded, log), wait
        )
        if outcome is not None:
            return outcome
        running = self.attempts.running_for(ref.uid)
        log.warning(
            "Backend unprepare still running after the unprepare timeout",
            claim_uid=ref.uid,
            running_seconds=round(running, 3),
            timeout_seconds=timeout,
        )
        return (
            f"backend {self.backend.name}: unprepare did not finish within the "
            f"--unprepare-timeout of {timeout:g}s (running for {running:.1f}s); the claim "
            "stays prepared, and the next NodeUnprepareResources waits for the same backend "
            "call again"
        )

    def _undo(
        self,
        ref: ClaimRef,
        state: Mapping[str, Any] | None,
        backend_step: Callable[[], str],
        step: Callable[[ClaimOutput], AfterCommit | None],
    ) -> tuple[str, list[AfterCommit]]:
        """``backend_step`` (when ``state`` says the backend was given the claim), then
        ``step`` for every output in reverse list order, then the entry dropped; ("" or the
        error of the step that stopped it, the outputs' work for after the save)."""
        if state is not None:
            error = backend_step()
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
