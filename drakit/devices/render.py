"""Printing the device table, the pool summary and the node views: aligned text, or JSON/YAML
documents.

The JSON/YAML documents are the stable, scriptable form: every number as in the table, every
quantity in Kubernetes' canonical text (``16Gi``), and the notes (what is hidden and why) in
a ``notes`` list rather than on stderr.

This module is the one way out to the terminal for ``drakit devices``, and nothing it prints
is trusted: names, attributes, pod names, messages and the node view come from other users'
objects or from another program. Every table cell and note goes through
:func:`drakit.telemetry.safetext.clean` (so a value can neither start a line of its own nor
send an escape sequence), every string of a document through
:func:`~drakit.telemetry.safetext.clean_document` (then JSON is written ASCII-only and YAML
with non-ASCII escaped), and each function's whole answer through
:func:`~drakit.telemetry.safetext.clean_lines` as a last pass.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import yaml

from drakit.allocator.usage import CapacityUse, DeviceUsage, PoolSummary
from drakit.devices.nodeview import ClaimView, FindingView, NodeViews
from drakit.devices.view import Rendered
from drakit.telemetry.safetext import clean, clean_document, clean_lines

__all__ = ["FORMATS", "render", "render_node_views"]

FORMATS = ("table", "wide", "json", "yaml")
API_VERSION = "drakit.io/v1alpha1"


def render(rendered: Rendered, *, summary: bool, output: str) -> str:
    """The text to print for ``rendered`` (ends with a newline; terminal-safe)."""
    if output in ("json", "yaml"):
        doc = clean_document(_summary_doc(rendered) if summary else _devices_doc(rendered))
        if output == "json":
            return clean_lines(json.dumps(doc, indent=2, ensure_ascii=True) + "\n")
        return clean_lines(str(yaml.safe_dump(doc, sort_keys=False, allow_unicode=False)))
    wide = output == "wide"
    text = _summary_table(rendered.view.pools) if summary else _device_table(rendered, wide)
    return clean_lines(text + _notes(rendered.notes))


def _notes(notes: Sequence[str]) -> str:
    return "".join(f"note: {clean(note)}\n" for note in notes)


# -- tables ------------------------------------------------------------------------------------


def _table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Aligned columns; every cell cleaned before its width is measured."""
    cleaned = [[clean(c) for c in row] for row in (header, *rows)]
    widths = [max(len(c) for c in column) for column in zip(*cleaned, strict=False)]
    lines = []
    for row in cleaned:
        cells = [c.ljust(w) for c, w in zip(row, widths, strict=False)]
        lines.append("   ".join(cells).rstrip())
    return "\n".join(lines) + "\n"


def state_text(u: DeviceUsage) -> str:
    """``shared (memory 6Gi/16Gi left)`` for shared devices, ``exhausted (gpu-counters/memory
    40Gi needed, 20Gi left)`` for devices whose shared counters are used up, else the state
    word."""
    if u.state == "shared" and u.capacity:
        left = ", ".join(f"{c.name} {c.left}/{c.total}" for c in u.capacity)
        return f"shared ({left} left)"
    if u.state == "exhausted" and u.short:
        short = ", ".join(f"{name} {need} needed, {left} left" for name, need, left in u.short)
        return f"exhausted ({short})"
    return u.state


def _claims_text(u: DeviceUsage) -> str:
    names = []
    for h in u.holders:
        name = h.claim + (" (admin)" if h.admin_access else "")
        if name not in names:
            names.append(name)
    return ",".join(names) or "-"


def _pods_text(u: DeviceUsage) -> str:
    pods: list[str] = []
    for h in u.holders:
        pods.extend(p for p in h.pods if p not in pods)
    return ",".join(pods) or "-"


def _device_table(rendered: Rendered, wide: bool) -> str:
    header = ["NODE", "DRIVER", "POOL", "DEVICE", "STATE", "CLAIM", "PODS"]
    if wide:
        header += ["TAINTS", "COUNTERS", "SLICE"]
    rows = []
    for u in rendered.view.devices:
        row = [u.node, u.driver, u.pool, u.device, state_text(u), _claims_text(u), _pods_text(u)]
        if wide:
            counters = ",".join(f"{k}={v}" for k, v in u.counters)
            row += [",".join(u.taints) or "-", counters or "-", u.slice]
        rows.append(row)
    if not rows:
        return "No devices found.\n"
    return _table(header, rows)


def _use_text(uses: Sequence[CapacityUse]) -> str:
    return ", ".join(f"{c.name} {c.used}/{c.total}" for c in uses) or "-"


def _summary_table(pools: Sequence[PoolSummary]) -> str:
    if not pools:
        return "No pools found.\n"
    header = [
        "NODE", "DRIVER", "POOL", "DEVICES", "ALLOCATED", "FREE", "EXHAUSTED", "TAINTED",
        "COUNTERS USED/TOTAL", "CAPACITY USED/TOTAL",
    ]  # fmt: skip
    rows = []
    for p in pools:
        free = "?" if p.free is None else str(p.free)
        pool = p.pool + (" (incomplete)" if p.incomplete else "")
        rows.append(
            [
                p.node,
                p.driver,
                pool,
                str(p.total),
                str(p.allocated),
                free,
                str(p.exhausted),
                str(p.tainted),
                _use_text(p.counters),
                _use_text(p.capacity),
            ]
        )
    return _table(header, rows)


# -- documents ---------------------------------------------------------------------------------


def _uses_doc(uses: Sequence[CapacityUse]) -> list[dict[str, str]]:
    return [
        {"name": c.name, "used": str(c.used), "total": str(c.total), "available": str(c.left)}
        for c in uses
    ]


def _devices_doc(rendered: Rendered) -> dict[str, Any]:
    items = []
    for u in rendered.view.devices:
        items.append(
            {
                "node": u.node,
                "driver": u.driver,
                "pool": u.pool,
                "device": u.device,
                "state": u.state,
                "claims": [
                    {
                        "namespace": h.namespace,
                        "name": h.name,
                        "pods": list(h.pods),
                        "adminAccess": h.admin_access,
                        **({"shareID": h.share_id} if h.share_id else {}),
                        **(
                            {"consumedCapacity": {k: str(v) for k, v in h.consumed.items()}}
                            if h.consumed
                            else {}
                        ),
                    }
                    for h in u.holders
                ],
                "taints": list(u.taints),
                "capacity": _uses_doc(u.capacity),
                "counters": {k: str(v) for k, v in u.counters},
                **(
                    {
                        "exhaustedCounters": [
                            {"name": name, "needed": str(need), "left": str(left)}
                            for name, need, left in u.short
                        ]
                    }
                    if u.short
                    else {}
                ),
                "slice": u.slice,
            }
        )
    return {
        "apiVersion": API_VERSION,
        "kind": "DeviceList",
        "items": items,
        "notes": list(rendered.notes),
    }


def _summary_doc(rendered: Rendered) -> dict[str, Any]:
    items = [
        {
            "node": p.node,
            "driver": p.driver,
            "pool": p.pool,
            "devices": p.total,
            "allocated": p.allocated,
            "free": p.free,
            "exhausted": p.exhausted,
            "tainted": p.tainted,
            "unknown": p.unknown,
            "counters": _uses_doc(p.counters),
            "capacity": _uses_doc(p.capacity),
            "slices": p.slices,
            "incomplete": p.incomplete,
        }
        for p in rendered.view.pools
    ]
    return {
        "apiVersion": API_VERSION,
        "kind": "PoolSummaryList",
        "items": items,
        "notes": list(rendered.notes),
    }


# -- node views --------------------------------------------------------------------------------


def render_node_views(found: NodeViews) -> str:
    """The views as text: one table per plugin (claim, pod, container, devices, prepared),
    then its findings, then the problems (terminal-safe, as everything here)."""
    out = []
    for view in found.views:
        out.append(
            f"\nNode view of {clean(view.node or '?')} from driver {clean(view.driver or '?')} "
            f"(from {clean(view.source)}, kubelet PodResources read at "
            f"{clean(view.checked_at or '?')}):\n"
        )
        out.append(_claims_table(view.claims))
        if view.error:
            out.append(f"error: {clean(view.error)}\n")
        out.extend(_finding_line(f) for f in view.findings)
        if view.cut:
            out.append(f"note: {view.cut} more entries of this view not shown\n")
    out.append(_notes(found.problems))
    return clean_lines("".join(out))


def _finding_line(finding: FindingView) -> str:
    pods = ", ".join(finding.pods)
    devices = ", ".join(finding.devices)
    text = (
        f"finding: {finding.kind}: claim {finding.claim}"
        + (f" ({pods})" if pods else "")
        + (f" devices {devices}" if devices else "")
        + f", for {finding.seconds} s: {finding.detail}"
    )
    return clean(text) + "\n"


def _claims_table(claims: Sequence[ClaimView]) -> str:
    header = ("CLAIM", "POD", "CONTAINER", "DEVICES", "PREPARED")
    rows: list[tuple[str, ...]] = []
    for claim in claims:
        name = f"{claim.namespace}/{claim.name}"
        if not claim.containers:
            rows.append((name, "-", "-", ",".join(claim.devices) or "-", claim.prepared))
        for c in claim.containers:
            rows.append((name, c.pod, c.container, ",".join(c.devices), claim.prepared))
    if not rows:
        return "(no claims of this driver prepared or in use on the node)\n"
    return _table(header, rows)
