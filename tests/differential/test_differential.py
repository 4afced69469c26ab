"""The Python allocator must answer every scenario exactly like the Kubernetes 1.37
reference allocator (``dra-oracle``, built from k8s.io/dynamic-resource-allocation v0.37.2).

Three sources of scenarios: the allocator's contract table, the hand-written seeds in
``seed_cases.py`` and seeded random scenarios from ``tests/bench/scenarios.py``
(``DRAKIT_DIFFERENTIAL_SCENARIOS``, default 1200). A mismatch is shrunk to a minimal
scenario and printed as JSON, ready to become a contract case.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from differential_harness import (
    REPO,
    Mismatch,
    Oracle,
    PythonRunner,
    bench_scenarios,
    compare_all,
    load_module,
    shrink,
)
from seed_cases import seed_cases

Obj = dict[str, Any]
CONTRACT_CASES = REPO / "tests" / "unit" / "allocator" / "contract_cases.py"
SCENARIO_KEYS = ("slices", "classes", "claims", "allocated", "node", "features")
RANDOM_SCENARIOS = int(os.environ.get("DRAKIT_DIFFERENTIAL_SCENARIOS", "1200"))
CHUNK = 100
MAX_SHRUNK = 3


def _case_scenario(case: Any) -> tuple[str, Obj]:
    """(name, scenario) of one contract case: a dict with the scenario keys at top level
    or under ``scenario``, or an object with ``name`` and ``scenario`` attributes."""
    if isinstance(case, dict):
        name = str(case.get("name") or case.get("id"))
        body = case.get("scenario", case)
    else:
        name = str(case.name)
        body = case.scenario() if callable(case.scenario) else case.scenario
    return name, {key: body[key] for key in SCENARIO_KEYS if key in body}


def contract_cases() -> list[tuple[str, Obj]]:
    if not CONTRACT_CASES.exists():
        return []
    module = load_module("drakit_contract_cases", CONTRACT_CASES)
    cases = getattr(module, "CASES", None) or getattr(module, "CONTRACT_CASES", [])
    return [_case_scenario(case) for case in cases]


def _fail_with(mismatches: list[Mismatch], oracle: Oracle, run_scenario: PythonRunner) -> None:
    shrunk = [shrink(oracle, run_scenario, m).report() for m in mismatches[:MAX_SHRUNK]]
    others = ", ".join(m.label for m in mismatches[MAX_SHRUNK:])
    pytest.fail(
        f"{len(mismatches)} scenario(s) answered differently from the reference allocator\n"
        + "\n".join(shrunk)
        + (f"\nalso: {others}" if others else ""),
        pytrace=False,
    )


def _check(
    oracle: Oracle,
    run_scenario: PythonRunner,
    labelled: list[tuple[str, Obj]],
    *,
    generated: bool = False,
) -> None:
    mismatches, invalid = compare_all(oracle, run_scenario, labelled, expect_valid=generated)
    assert not invalid, "the reference refused these scenarios as input:\n" + "\n".join(invalid)
    if mismatches:
        _fail_with(mismatches, oracle, run_scenario)


_CONTRACT = contract_cases()


@pytest.mark.skipif(not _CONTRACT, reason=f"{CONTRACT_CASES.relative_to(REPO)} has no cases yet")
@pytest.mark.parametrize("name", [name for name, _ in _CONTRACT] or ["none"], ids=str)
def test_contract_case_matches_reference(
    name: str, oracle: Oracle, run_scenario: PythonRunner
) -> None:
    scenario = dict(_CONTRACT)[name]
    _check(oracle, run_scenario, [(name, scenario)])


@pytest.mark.parametrize("name", [name for name, _ in seed_cases()], ids=str)
def test_seed_case_matches_reference(name: str, oracle: Oracle, run_scenario: PythonRunner) -> None:
    scenario = dict(seed_cases())[name]
    _check(oracle, run_scenario, [(name, scenario)])


@pytest.mark.parametrize(
    "first_seed", range(0, RANDOM_SCENARIOS, CHUNK), ids=lambda s: f"seeds-{s}-{s + CHUNK - 1}"
)
def test_random_scenarios_match_reference(
    first_seed: int, oracle: Oracle, run_scenario: PythonRunner
) -> None:
    random_scenario = bench_scenarios().random_scenario
    seeds = range(first_seed, min(first_seed + CHUNK, RANDOM_SCENARIOS))
    labelled = [(f"seed {s}", random_scenario(s)) for s in seeds]
    _check(oracle, run_scenario, labelled, generated=True)


def _without_selectors(claim: Obj, expressions: tuple[str, ...]) -> Obj:
    """A copy of ``claim`` without the selectors that use ``expressions`` (the generator's
    deliberately broken CEL, which only stored objects can carry)."""
    claim = json.loads(json.dumps(claim))
    for request in claim["spec"]["devices"]["requests"]:
        for body in [request.get("exactly"), *request.get("firstAvailable", [])]:
            if body and "selectors" in body:
                body["selectors"] = [
                    s for s in body["selectors"] if s["cel"]["expression"] not in expressions
                ]
    return claim


def test_random_scenarios_are_valid_api_objects() -> None:
    """The generator must only produce objects the API server would accept; otherwise a
    difference could be about input checking rather than allocation."""
    from drakit.allocator import (  # noqa: PLC0415
        DeviceClass,
        ResourceClaim,
        ResourceSlice,
        validate_device_class,
        validate_resource_claim,
        validate_resource_slice,
    )

    generator = bench_scenarios()
    problems = []
    for seed in range(300):
        scenario = generator.random_scenario(seed)
        for s in scenario["slices"]:
            problems += validate_resource_slice(ResourceSlice.from_dict(s))
        for c in scenario["classes"]:
            problems += validate_device_class(DeviceClass.from_dict(c))
        for c in scenario["claims"] + scenario["allocated"]:
            claim = _without_selectors(c, generator.BAD_SELECTORS)
            problems += validate_resource_claim(ResourceClaim.from_dict(claim))
    assert not problems, "\n".join(str(p) for p in problems[:20])


@pytest.mark.parametrize("shape", bench_scenarios().BENCH_SHAPES)
def test_benchmark_workload_places_pods_like_reference(
    shape: str, oracle: Oracle, tmp_path: Path
) -> None:
    """The Python benchmark loop must place every pod where the reference loop does."""
    bench = load_module("drakit_bench_allocator", REPO / "tests" / "bench" / "bench_allocator.py")
    workload = bench_scenarios().bench_workload(shape, nodes=6, pods=30, feasible_nodes=3)
    path = tmp_path / "workload.json"
    path.write_text(json.dumps(workload))
    reference = oracle.run_bench(path, iterations=1)
    python = bench.run_python_bench(workload, iterations=1)
    assert (python["scheduled"], python["allocateCalls"]) == (
        reference["scheduled"],
        reference["allocateCalls"],
    )
    assert python["placementSha256"] == reference["placementSha256"]
