"""Stage 4, the backend: the driver's own code, called with the call's context.

Whatever the backend raises is the claim's error, never the call's: one claim's failure
is that claim's only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from drakit.node_plugin.claims import ClaimError, FetchedClaim, describe
from drakit.node_plugin.driver import CallContext
from drakit.plugin.backend import Backend
from drakit.plugin.claims import ClaimRef
from drakit.plugin.context import RequestContext
from drakit.plugin.prepared import BackendPrepared
from drakit.telemetry.logs import StructuredLogger, get_logger


def backend_context(backend: Backend, ref: ClaimRef, call: CallContext) -> RequestContext:
    """The backend's view of the call: its request id and deadline, and a logger named
    for the backend's module, bound to the call and the claim."""
    log = get_logger(type(backend).__module__).bind(
        request_id=call.request_id, claim=f"{ref.namespace}/{ref.name}", claim_uid=ref.uid
    )
    return RequestContext(request_id=call.request_id, log=log, deadline=call.deadline)


def backend_prepare(backend: Backend, claim: FetchedClaim, call: CallContext) -> BackendPrepared:
    """The backend's answer for ``claim``; ``PrepareFailed`` naming claim and backend when it
    raises (it then holds nothing new: the caller rolls back with what it held before)."""
    try:
        return backend.prepare(claim.to_prepare, backend_context(backend, claim.ref, call))
    except Exception as exc:
        ref = claim.ref
        raise ClaimError(
            "PrepareFailed",
            f"ResourceClaim {ref.namespace}/{ref.name}: backend {backend.name}: {describe(exc)}",
        ) from exc


def backend_unprepare(
    backend: Backend,
    ref: ClaimRef,
    state: Mapping[str, Any],
    call: CallContext,
    log: StructuredLogger,
) -> str:
    """Let the backend release the claim (``state``: what its prepare returned); "" or the
    error text naming the backend."""
    try:
        backend.unprepare(ref, state, backend_context(backend, ref, call))
    except Exception as exc:
        log.exception("Backend unprepare failed", claim_uid=ref.uid)
        return f"backend {backend.name}: {describe(exc)}"
    return ""
