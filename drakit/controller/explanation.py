"""Why a pod's claims fit on none of the nodes: the allocator's explanations, summed up.

The allocator explains one node at a time (``drakit.allocator.explain``). For a pod condition one
line per request is enough: how many candidate devices all tried nodes offered, how many were
suitable, and the reasons the others were rejected, summed over the nodes; then what requests
that fit on their own compete for (counters used up together, devices wanted by several),
once per finding, naming the first node it was seen on. Explaining is slower than
allocating, so at most ``MAX_NODES`` nodes are looked at.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from drakit.allocator.allocate import Allocator
from drakit.allocator.explain import REASONS, explain
from drakit.allocator.model import Node, ResourceClaim

__all__ = ["MAX_NODES", "summarise"]

MAX_NODES = 50
_LABELS = dict(REASONS)


@dataclass
class _RequestTotal:
    device_class: str
    wanted: str
    considered: int = 0
    suitable: int = 0
    rejected: Counter[str] = field(default_factory=Counter)
    errors: set[str] = field(default_factory=set)
    notes: set[str] = field(default_factory=set)


def summarise(allocator: Allocator, nodes: Sequence[Node], claims: list[ResourceClaim]) -> str:
    """One sentence per request of ``claims`` over (up to ``MAX_NODES`` of) ``nodes``."""
    tried = list(nodes[:MAX_NODES])
    totals: dict[tuple[str, str], _RequestTotal] = {}
    together: dict[str, str] = {}  # finding -> the first node it was seen on
    for node in tried:
        account = explain(allocator, node, claims)
        for line in account.together:
            together.setdefault(line, node.name)
        for claim in account.claims:
            for r in claim.requests:
                total = totals.setdefault(
                    (claim.claim, r.request), _RequestTotal(r.device_class, r.wanted)
                )
                total.considered += r.considered
                total.suitable += r.suitable
                total.rejected.update({k: v for k, v in r.rejected.items() if v})
                if r.error:
                    total.errors.add(r.error)
                if r.note:
                    total.notes.add(r.note.removesuffix(" (below)"))
    scope = f"{len(tried)} node(s)" + (f" of {len(nodes)}" if len(nodes) > len(tried) else "")
    parts = []
    for (claim_key, request), t in totals.items():
        text = (
            f"claim {claim_key} request {request} (class {t.device_class}) wants {t.wanted}: "
            f"{t.suitable} of {t.considered} device(s) on {scope} suitable"
        )
        reasons = [f"{n} {_LABELS.get(k, k)}" for k, n in t.rejected.most_common()]
        if reasons:
            text += " (" + ", ".join(reasons) + ")"
        extra = sorted(t.errors) + sorted(t.notes)
        if extra:
            text += "; " + "; ".join(extra)
        parts.append(text)
    parts += [f"together on node {node}: {line}" for line, node in together.items()]
    return ". ".join(parts)
