"""Printing the device table and the pool summary: aligned text, or JSON/YAML documents.

The JSON/YAML documents are the stable, scriptable form: every number as in the table, every
quantity in Kubernetes' canonical text (``16Gi``), and the notes (what is hidden and why) in
a ``notes`` list rather than on stderr.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import yaml

from drakit.allocator.usage import CapacityUse, DeviceUsage, PoolSummary
from drakit.devices.view import Rendered

__all__ = ["FORMATS", "render"]

FORMATS = ("table", "wide", "json", "yaml")
API_VERSION = "drakit.io/v1alpha1"


def render(rendered: Rendered, *, summary: bool, output: str) -> str:
    """The text to print for ``rendered`` (ends with a newline)."""
    if output in ("json", "yaml"):
        doc = _summary_doc(rendered) if summary else _devices_doc(rendered)
        if output == "json":
            return json.dumps(doc, indent=2) + "\n"
        return str(yaml.safe_dump(doc, sort_keys=False))
    wide = output == "wide"
    text = _summary_table(rendered.view.pools) if summary else _device_table(rendered, wide)
    return text + "".join(f"note: {note}\n" for note in rendered.notes)


# -- tables ------------------------------------------------------------------------------------


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(c)) for c in column) for column in zip(header, *rows, strict=False)]
    lines = []
    for row in (header, *rows):
        cells = [str(c).ljust(w) for c, w in zip(row, widths, strict=False)]
        lines.append("   ".join(cells).rstrip())
    return "\n".join(lines) + "\n"


def state_text(u: DeviceUsage) -> str:
    """``shared (memory 6Gi/16Gi left)`` for shared devices, else the state word."""
    if u.state == "shared" and u.capacity:
        left = ", ".join(f"{c.name} {c.left}/{c.total}" for c in u.capacity)
        return f"shared ({left} left)"
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
        "NODE", "DRIVER", "POOL", "DEVICES", "ALLOCATED", "FREE", "TAINTED",
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
