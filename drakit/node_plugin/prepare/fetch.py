"""Stage 1, fetch and verify: before any lock, every claim reference is checked and every
claim read from the API server and checked (:class:`~drakit.node_plugin.claims.ClaimReader`).

No lock is held: the serialize lock may be held by the other plugin instance during a
rolling update, and waiting on the API server with it held would stall both. Nothing on
the node changes here, so there is nothing to roll back.
"""

from __future__ import annotations

from collections.abc import Sequence

from drakit.node_plugin.claimcheck import claim_ref_problem
from drakit.node_plugin.claims import ClaimError, ClaimReader, FetchedClaim
from drakit.node_plugin.driver import PrepareResult
from drakit.node_plugin.metrics import PluginMetrics
from drakit.node_plugin.prepare.run import PrepareRun
from drakit.plugin.claims import ClaimRef
from drakit.telemetry.logs import StructuredLogger


def checked_refs(
    claims: Sequence[ClaimRef], operation: str, metrics: PluginMetrics, log: StructuredLogger
) -> tuple[list[ClaimRef], dict[str, str]]:
    """(claims with valid references, claim UID -> error for the others).

    Runs before any request or path is built. A rejected reference gets no Event: it
    cannot name a claim safely.
    """
    usable: list[ClaimRef] = []
    rejected: dict[str, str] = {}
    for ref in claims:
        problem = claim_ref_problem(ref)
        if problem:
            log.warning("Claim reference rejected", error=problem)
            metrics.claim_errors.labels(operation, "InvalidClaimReference").inc()
            rejected[ref.uid] = f"invalid claim reference: {problem}"
        else:
            usable.append(ref)
    return usable, rejected


def fetch_claims(
    reader: ClaimReader, claims: Sequence[ClaimRef], run: PrepareRun, metrics: PluginMetrics
) -> list[FetchedClaim]:
    """The claims ready to prepare, in order; every other claim gets its answer in ``run``
    (a bad reference, a claim missing, replaced, not allocated or with bad config). Claims
    not started once the caller has gone are abandoned."""
    usable, rejected = checked_refs(claims, "prepare", metrics, run.log)
    run.results.update((uid, PrepareResult(error=error)) for uid, error in rejected.items())
    fetched: list[FetchedClaim] = []
    for ref, outcome in zip(usable, reader.read(usable, run.call.is_active), strict=True):
        if isinstance(outcome, ClaimError):
            run.failed(ref, outcome.obj, outcome)
        else:
            fetched.append(outcome)
    return fetched
