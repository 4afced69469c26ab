"""One call's state on its way through the stages: the kubelet's call, its logger, the
answers so far, and how a failure is told."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from drakit.node_plugin.claims import ClaimError
from drakit.node_plugin.driver import CallContext, PrepareResult, run_after_reply
from drakit.node_plugin.prepare.report import ClaimReports
from drakit.plugin.claims import ClaimRef
from drakit.telemetry.logs import StructuredLogger


@dataclass
class PrepareRun:
    """A NodePrepareResources call: ``results`` gets one answer per claim, in the order the
    stages reach them; ``began``: the tick of :class:`~drakit.node_plugin.prepare.tombstones.\
UnprepareTombstones` the call began at."""

    call: CallContext
    log: StructuredLogger
    reports: ClaimReports
    results: dict[str, PrepareResult] = field(default_factory=dict)
    began: int = 0

    def failed(self, ref: ClaimRef, obj: Mapping[str, Any] | None, error: ClaimError) -> None:
        """The claim's answer is ``error``; logged, counted and an Event (``obj``: the claim
        as read, if it was)."""
        self.reports.failed(ref, obj, error, "Prepare", self.log)
        self.results[ref.uid] = PrepareResult(error=str(error))


@dataclass
class UnprepareRun:
    """A NodeUnprepareResources call: ``results`` maps claim UID to "" or its error."""

    call: CallContext
    log: StructuredLogger
    reports: ClaimReports
    results: dict[str, str] = field(default_factory=dict)

    def failed(self, ref: ClaimRef, message: str) -> None:
        """The claim's answer is ``message`` (naming the claim); logged, counted, an Event."""
        error = f"ResourceClaim {ref.namespace}/{ref.name}: {message}"
        self.reports.failed(ref, None, ClaimError("UnprepareFailed", error), "Unprepare", self.log)
        self.results[ref.uid] = error


def log_done_after_reply(
    call: CallContext, log: StructuredLogger, message: str, done: Mapping[str, Mapping[str, Any]]
) -> None:
    """Once the reply is sent, one line per claim whose new state is on disk (``done``:
    claim UID -> the line's other fields)."""
    if not done:
        return

    def report() -> None:
        for uid, fields in done.items():
            log.info(message, claim_uid=uid, **fields)

    run_after_reply(call.after_reply, report)
