"""Compare a scenario output (run_scenario or the oracle) with a contract case's expectation."""

from __future__ import annotations

from typing import Any

from alloc_builders import DRIVER

from drakit.allocator.quantity import Quantity


def device_lists(output: dict[str, Any]) -> list[list[str]]:
    """Per claim: ``request=pool/device`` (``driver:pool/device`` for other drivers)."""
    out = []
    for entry in output.get("allocations") or []:
        results = (entry["allocation"].get("devices") or {}).get("results") or []
        names = []
        for r in results:
            prefix = "" if r["driver"] == DRIVER else f"{r['driver']}:"
            names.append(f"{r['request']}={prefix}{r['pool']}/{r['device']}")
        out.append(names)
    return out


def _normalize_quantities(m: dict[str, str] | None) -> dict[str, Any]:
    return {k: Quantity.parse(v) for k, v in (m or {}).items()}


def mismatches(case: dict[str, Any], output: dict[str, Any]) -> list[str]:
    """Human-readable differences between the expectation and the output (empty = ok)."""
    expect = case["expect"]
    problems = []
    if output.get("outcome") != expect["outcome"]:
        problems.append(
            f"outcome {output.get('outcome')!r} != {expect['outcome']!r} "
            f"({output.get('error', '')})"
        )
        return problems
    if expect["outcome"] != "allocated":
        return problems
    if expect.get("devices") is not None and device_lists(output) != expect["devices"]:
        problems.append(f"devices {device_lists(output)} != {expect['devices']}")
    check = expect.get("check") or {}
    if not check:
        return problems
    alloc = output["allocations"][0]["allocation"]
    results = (alloc.get("devices") or {}).get("results") or []
    if "config" in check:
        got = (alloc.get("devices") or {}).get("config") or []
        if got != check["config"]:
            problems.append(f"config {got} != {check['config']}")
    if "nodeSelector" in check and alloc.get("nodeSelector") != check["nodeSelector"]:
        problems.append(f"nodeSelector {alloc.get('nodeSelector')} != {check['nodeSelector']}")
    for r in results:
        if "consumedCapacity" in check and _normalize_quantities(
            r.get("consumedCapacity")
        ) != _normalize_quantities(check["consumedCapacity"]):
            problems.append(f"consumedCapacity {r.get('consumedCapacity')}")
        if "shareID" in check and ("shareID" in r) != check["shareID"]:
            problems.append(f"shareID presence {('shareID' in r)}")
        if "adminAccess" in check and r.get("adminAccess") != check["adminAccess"]:
            problems.append(f"adminAccess {r.get('adminAccess')}")
        if "tolerations" in check and r.get("tolerations") != check["tolerations"]:
            problems.append(f"tolerations {r.get('tolerations')}")
        if (
            "bindingConditions" in check
            and r.get("bindingConditions") != check["bindingConditions"]
        ):
            problems.append(f"bindingConditions {r.get('bindingConditions')}")
    return problems


def comparable(output: dict[str, Any]) -> dict[str, Any]:
    """An output with shareIDs replaced by a marker and quantities canonicalized."""
    if output.get("outcome") != "allocated":
        return {"outcome": output.get("outcome")}
    allocs = []
    for entry in output.get("allocations") or []:
        alloc = dict(entry["allocation"])
        devices = dict(alloc.get("devices") or {})
        results = []
        for original in devices.get("results") or []:
            r = dict(original)
            if "shareID" in r:
                r["shareID"] = "<share>"
            if "consumedCapacity" in r:
                r["consumedCapacity"] = {
                    k: Quantity.parse(v).canonical() for k, v in r["consumedCapacity"].items()
                }
            results.append(r)
        if results:
            devices["results"] = results
        alloc["devices"] = devices
        alloc = {k: v for k, v in alloc.items() if v}
        allocs.append({"claim": entry["claim"], "allocation": alloc})
    return {"outcome": "allocated", "allocations": allocs}
