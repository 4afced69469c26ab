"""Runs scenarios through the reference allocator (``dra-oracle``) and the Python one, and
compares their answers.

The scenario and result formats are the contract in ``hack/oracle/README.md``; the Python
side is ``drakit.allocator.scenario.run_scenario``. Two answers agree when the outcome class is
the same and, for ``allocated``, every claim's AllocationResult is the same after
normalisation: fields Go omits when empty are dropped, quantities are compared by value
and a ``shareID`` only has to be present on both sides (it is a random UUID).
"""

from __future__ import annotations

import copy
import importlib.util
import json
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from drakit.allocator.quantity import Quantity

Obj = dict[str, Any]
REPO = Path(__file__).resolve().parents[2]
SHARE_ID_PRESENT = "<shareID>"


def load_module(name: str, path: Path) -> ModuleType:
    """Imports a helper module by file path (tests/ is not a package)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def bench_scenarios() -> ModuleType:
    return load_module("drakit_bench_scenarios", REPO / "tests" / "bench" / "scenarios.py")


# --------------------------------------------------------------------------- running


class Oracle:
    """The built ``dra-oracle`` binary."""

    def __init__(self, binary: Path) -> None:
        self.binary = binary

    def run_batch(self, scenarios: Sequence[Obj]) -> list[Obj]:
        """Answers every scenario with one process (one JSON line each way)."""
        if not scenarios:
            return []
        lines = "".join(json.dumps(s, separators=(",", ":")) + "\n" for s in scenarios)
        done = subprocess.run(
            [str(self.binary), "-batch"],
            input=lines,
            capture_output=True,
            text=True,
            check=False,
            timeout=600,
        )
        if done.returncode != 0:
            raise RuntimeError(f"dra-oracle -batch failed ({done.returncode}): {done.stderr}")
        answers = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
        if len(answers) != len(scenarios):
            raise RuntimeError(
                f"dra-oracle answered {len(answers)} of {len(scenarios)} scenarios: {done.stderr}"
            )
        return answers

    def run_bench(self, workload_path: Path, iterations: int) -> Obj:
        done = subprocess.run(
            [str(self.binary), "-bench", str(workload_path), "-iterations", str(iterations)],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"dra-oracle -bench failed ({done.returncode}): {done.stderr}")
        report: Obj = json.loads(done.stdout)
        return report


PythonRunner = Callable[[Obj], Obj]


def run_python(run_scenario: PythonRunner, scenario: Obj) -> Obj:
    """The Python allocator's answer; an exception is an answer too (and never agrees)."""
    try:
        return run_scenario(copy.deepcopy(scenario))
    except Exception as err:  # a crash is a finding, not a test error
        return {"outcome": f"exception: {type(err).__name__}", "error": str(err)}


def is_invalid_scenario(answer: Obj) -> bool:
    """The oracle refused the input itself (a generator or case bug, not a finding)."""
    return answer.get("outcome") == "error" and str(answer.get("error", "")).startswith(
        "invalid scenario:"
    )


# --------------------------------------------------------------------------- comparing


def _canonical_quantity(value: Any) -> Any:
    try:
        return str(Quantity.parse(value).value)
    except (ValueError, TypeError):
        return value


def _drop_empty(value: Any) -> Any:
    """Removes what Go's ``omitempty`` would not print (None, "", [], {}, false flags are
    kept: ``adminAccess: false`` is not emitted by Go either, so it is dropped too)."""
    if isinstance(value, dict):
        cleaned = {k: _drop_empty(v) for k, v in value.items()}
        return {k: v for k, v in cleaned.items() if v not in (None, "", [], {}, False)}
    if isinstance(value, list):
        return [_drop_empty(v) for v in value]
    return value


def normalize_allocation(allocation: Obj) -> Obj:
    """The parts of an AllocationResult both allocators must agree on."""
    out: Obj = _drop_empty(copy.deepcopy(allocation))
    out.pop("allocationTimestamp", None)
    for result in out.get("devices", {}).get("results", []):
        if "shareID" in result:
            result["shareID"] = SHARE_ID_PRESENT
        if "consumedCapacity" in result:
            result["consumedCapacity"] = {
                k: _canonical_quantity(v) for k, v in result["consumedCapacity"].items()
            }
    return out


def devices_by_request(allocation: Obj) -> list[tuple[str, str, str, str]]:
    return [
        (r.get("request", ""), r.get("driver", ""), r.get("pool", ""), r.get("device", ""))
        for r in allocation.get("devices", {}).get("results", [])
    ]


def difference(reference: Obj, python: Obj) -> str | None:
    """Why the two answers disagree, or None when they agree."""
    ref_outcome, py_outcome = reference.get("outcome"), python.get("outcome")
    if ref_outcome != py_outcome:
        return (
            f"outcome: reference {ref_outcome!r} ({reference.get('error', '')}), "
            f"python {py_outcome!r} ({python.get('error', '')})"
        )
    if ref_outcome != "allocated":
        return None
    ref_allocs, py_allocs = reference.get("allocations", []), python.get("allocations", [])
    ref_claims = [a.get("claim") for a in ref_allocs]
    py_claims = [a.get("claim") for a in py_allocs]
    if ref_claims != py_claims:
        return f"claims: reference {ref_claims}, python {py_claims}"
    for ref, py in zip(ref_allocs, py_allocs, strict=True):
        ref_devices = devices_by_request(ref.get("allocation", {}))
        py_devices = devices_by_request(py.get("allocation", {}))
        if ref_devices != py_devices:
            return f"devices of {ref['claim']}: reference {ref_devices}, python {py_devices}"
        ref_norm = normalize_allocation(ref.get("allocation", {}))
        py_norm = normalize_allocation(py.get("allocation", {}))
        if ref_norm != py_norm:
            return (
                f"allocation of {ref['claim']}:\n  reference {json.dumps(ref_norm, sort_keys=True)}"
                f"\n  python    {json.dumps(py_norm, sort_keys=True)}"
            )
    return None


@dataclass(frozen=True)
class Mismatch:
    label: str
    scenario: Obj
    reference: Obj
    python: Obj
    reason: str

    @property
    def kind(self) -> tuple[str, str, str]:
        """What kind of disagreement this is; shrinking keeps it."""
        return (
            str(self.reference.get("outcome")),
            str(self.python.get("outcome")),
            self.reason.split(":", 1)[0].split(" ", 1)[0],
        )

    def report(self) -> str:
        return (
            f"--- {self.label}: {self.reason}\n"
            f"minimal scenario:\n{json.dumps(self.scenario, sort_keys=True)}\n"
            f"reference answer: {json.dumps(self.reference, sort_keys=True)}\n"
            f"python answer:    {json.dumps(self.python, sort_keys=True)}"
        )


def compare_all(
    oracle: Oracle,
    run_scenario: PythonRunner,
    labelled: Sequence[tuple[str, Obj]],
    *,
    expect_valid: bool = True,
) -> tuple[list[Mismatch], list[str]]:
    """Runs every scenario through both; returns the mismatches and the labels of
    scenarios the oracle refused as invalid input. With ``expect_valid`` such scenarios
    are only listed; otherwise (hand-written cases about bad input) both sides must
    refuse them alike."""
    answers = oracle.run_batch([s for _, s in labelled])
    mismatches, invalid = [], []
    for (label, scenario), reference in zip(labelled, answers, strict=True):
        if expect_valid and is_invalid_scenario(reference):
            invalid.append(f"{label}: {reference['error']}")
            continue
        python = run_python(run_scenario, scenario)
        reason = difference(reference, python)
        if reason is not None:
            mismatches.append(Mismatch(label, scenario, reference, python, reason))
    return mismatches, invalid


# --------------------------------------------------------------------------- shrinking


def _without(items: list[Any], index: int) -> list[Any]:
    return items[:index] + items[index + 1 :]


def _list_edits(scenario: Obj) -> Iterator[Obj]:
    """Every scenario that lacks exactly one element of one list."""
    for key in ("slices", "claims", "allocated", "classes"):
        for i in range(len(scenario.get(key, []))):
            smaller = copy.deepcopy(scenario)
            smaller[key] = _without(smaller[key], i)
            yield smaller
    for si, slice_ in enumerate(scenario.get("slices", [])):
        for di in range(len(slice_.get("spec", {}).get("devices") or [])):
            smaller = copy.deepcopy(scenario)
            devices = smaller["slices"][si]["spec"]["devices"]
            smaller["slices"][si]["spec"]["devices"] = _without(devices, di)
            yield smaller
    for ci, claim in enumerate(scenario.get("claims", [])):
        devices = claim.get("spec", {}).get("devices", {})
        for key in ("requests", "constraints", "config"):
            for i in range(len(devices.get(key) or [])):
                smaller = copy.deepcopy(scenario)
                target = smaller["claims"][ci]["spec"]["devices"]
                target[key] = _without(target[key], i)
                yield smaller
        for ri, request in enumerate(devices.get("requests") or []):
            for si in range(len(request.get("firstAvailable") or [])):
                smaller = copy.deepcopy(scenario)
                target = smaller["claims"][ci]["spec"]["devices"]["requests"][ri]
                target["firstAvailable"] = _without(target["firstAvailable"], si)
                yield smaller
    for ai, claim in enumerate(scenario.get("allocated", [])):
        results = claim.get("status", {}).get("allocation", {}).get("devices", {}).get("results")
        for i in range(len(results or [])):
            smaller = copy.deepcopy(scenario)
            target = smaller["allocated"][ai]["status"]["allocation"]["devices"]
            target["results"] = _without(target["results"], i)
            yield smaller


def _slice_edits(scenario: Obj) -> Iterator[Obj]:
    """Every scenario that lacks one slice of a pool, the pool's slice count lowered."""
    slices = scenario.get("slices", [])
    for i, removed in enumerate(slices):
        pool = removed.get("spec", {}).get("pool", {})
        if int(pool.get("resourceSliceCount", 1)) <= 1:
            continue
        smaller = copy.deepcopy(scenario)
        smaller["slices"] = _without(smaller["slices"], i)
        for other in smaller["slices"]:
            spec = other.get("spec", {})
            if spec.get("driver") == removed["spec"].get("driver") and spec.get("pool", {}).get(
                "name"
            ) == pool.get("name"):
                spec["pool"]["resourceSliceCount"] = int(spec["pool"]["resourceSliceCount"]) - 1
        yield smaller


def _selector_edits(scenario: Obj) -> Iterator[Obj]:
    """Every scenario with one request or subrequest selector list removed."""
    for ci, claim in enumerate(scenario.get("claims", [])):
        for ri, request in enumerate(claim.get("spec", {}).get("devices", {}).get("requests", [])):
            bodies = [request.get("exactly"), *(request.get("firstAvailable") or [])]
            for bi, body in enumerate(bodies):
                if not body or "selectors" not in body:
                    continue
                smaller = copy.deepcopy(scenario)
                target = smaller["claims"][ci]["spec"]["devices"]["requests"][ri]
                target = target["exactly"] if bi == 0 else target["firstAvailable"][bi - 1]
                del target["selectors"]
                yield smaller


def _attribute_edits(scenario: Obj) -> Iterator[Obj]:
    """Every scenario that lacks one attribute, capacity, taint or selector."""
    for si, slice_ in enumerate(scenario.get("slices", [])):
        for di, device in enumerate(slice_.get("spec", {}).get("devices") or []):
            for key in ("attributes", "capacity"):
                for name in device.get(key) or {}:
                    smaller = copy.deepcopy(scenario)
                    del smaller["slices"][si]["spec"]["devices"][di][key][name]
                    yield smaller
            for key in ("taints", "bindingConditions", "consumesCounters"):
                if key in device:
                    smaller = copy.deepcopy(scenario)
                    del smaller["slices"][si]["spec"]["devices"][di][key]
                    yield smaller
    for ki, klass in enumerate(scenario.get("classes", [])):
        for i in range(len(klass.get("spec", {}).get("selectors") or [])):
            smaller = copy.deepcopy(scenario)
            target = smaller["classes"][ki]["spec"]
            target["selectors"] = _without(target["selectors"], i)
            yield smaller


def shrink(
    oracle: Oracle, run_scenario: PythonRunner, mismatch: Mismatch, max_rounds: int = 100
) -> Mismatch:
    """Greedily removes elements while the two allocators still disagree the same way."""
    current = mismatch
    for _ in range(max_rounds):
        candidates = [
            *_slice_edits(current.scenario),
            *_list_edits(current.scenario),
            *_selector_edits(current.scenario),
            *_attribute_edits(current.scenario),
        ]
        if not candidates:
            return current
        answers = oracle.run_batch(candidates)
        for candidate, reference in zip(candidates, answers, strict=True):
            if is_invalid_scenario(reference):
                continue
            python = run_python(run_scenario, candidate)
            reason = difference(reference, python)
            if reason is None:
                continue
            smaller = Mismatch(current.label, candidate, reference, python, reason)
            if smaller.kind == current.kind:
                current = smaller
                break
        else:
            return current
    return current
