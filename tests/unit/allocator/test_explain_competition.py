"""``drakit allocate --explain`` names the shared counters that are used up (set, counter,
needed, left) and what requests that fit on their own compete for, with or without
``--allocated``: exact messages, through the allocator API and the command.

An NPU publishes counter set ``npu-0`` (memory 40Gi) and partitions that consume it: the
whole NPU (40Gi), two halves (20Gi) and four quarters (10Gi). Before, a claim whose own
requests used the counters up was told only that "the claim's constraints or other requests
and claims compete", and a device refused for its counters was only counted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from alloc_builders import (
    DRIVER,
    allocated,
    attrs,
    claim,
    consumes,
    counter_slice,
    dclass,
    device,
    gpus,
    match,
    req,
    result,
    rslice,
)

from drakit.allocator import (
    AllocatedState,
    Allocator,
    DeviceClass,
    Inventory,
    Node,
    ResourceClaim,
    ResourceSlice,
    with_api_defaults,
)
from drakit.allocator.explain import explain, render
from drakit.cli import main

NODE = Node.named("node-1")
POOL = f"{DRIVER}/node-1"


def size_is(size: str) -> str:
    return f'device.attributes["{DRIVER}"].size == "{size}"'


def partition(name: str, size: str, memory: str, npu: int = 0) -> dict[str, Any]:
    return device(name, attrs(size=size), consumesCounters=consumes(f"npu-{npu}", memory=memory))


def npu_slices(npus: int = 1) -> list[dict[str, Any]]:
    """``npus`` NPUs of 40Gi in pool node-1: a counters slice and a partitions slice."""
    partitions = []
    for n in range(npus):
        partitions += [
            partition(f"npu{n}-whole", "whole", "40Gi", n),
            partition(f"npu{n}-half-0", "half", "20Gi", n),
            partition(f"npu{n}-half-1", "half", "20Gi", n),
            *(partition(f"npu{n}-quarter-{i}", "quarter", "10Gi", n) for i in range(4)),
        ]
    sets = {f"npu-{n}": {"memory": "40Gi"} for n in range(npus)}
    return [
        counter_slice("counters", sets, pool="node-1", count=2),
        rslice("partitions", partitions, pool="node-1", count=2),
    ]


def allocator(
    slices: list[dict[str, Any]], holding: list[dict[str, Any]] | None = None
) -> Allocator:
    return Allocator(
        Inventory([ResourceSlice.from_dict(s) for s in slices]),
        [DeviceClass.from_dict(dclass())],
        AllocatedState([ResourceClaim.from_dict(c) for c in holding or []]),
    )


def explained(a: Allocator, *claims: dict[str, Any]) -> str:
    defaulted = [with_api_defaults(ResourceClaim.from_dict(c)) for c in claims]
    assert a.allocate(NODE, defaulted) is None
    return render(explain(a, NODE, defaulted))


def test_a_claims_own_requests_that_use_the_counters_up_are_named_with_needed_and_left() -> None:
    text = explained(
        allocator(npu_slices()),
        claim("c", req("whole", "gpu", size_is("whole")), req("half", "gpu", size_is("half"))),
    )
    assert text == "\n".join([
        "node node-1: the claims do not fit",
        "  claim default/c:",
        "    request whole (class gpu) wants 1 device(s): 1 of 7 device(s) suitable",
        "      6 rejected by the request's selectors",
        "      note: enough suitable devices on its own, but not together with the others (below)",
        "    request half (class gpu) wants 1 device(s): 2 of 7 device(s) suitable",
        "      5 rejected by the request's selectors",
        "      note: enough suitable devices on its own, but not together with the others (below)",
        "  together:",
        f"    counter set npu-0 of pool {POOL}, counter memory: request whole (1 x 40Gi) and "
        "request half (1 x 20Gi) need at least 60Gi, 40Gi left",
    ])  # fmt: skip


def test_one_request_wanting_more_partitions_than_the_counters_hold_is_told_so() -> None:
    text = explained(
        allocator(npu_slices()),
        claim("c", req("r", "gpu", f'device.attributes["{DRIVER}"].size != "whole"', count=5)),
    )
    assert text == "\n".join([
        "node node-1: the claims do not fit",
        "  claim default/c:",
        "    request r (class gpu) wants 5 device(s): 6 of 7 device(s) suitable",
        "      1 rejected by the request's selectors",
        "      note: enough suitable devices, but not all it wants at once (below)",
        "  together:",
        f"    counter set npu-0 of pool {POOL}, counter memory: request r (5 x 10Gi) needs at "
        "least 50Gi, 40Gi left",
    ])  # fmt: skip


def test_requests_spread_over_several_npus_are_measured_against_all_their_counter_sets() -> None:
    # Two NPUs (80Gi): a whole one and three halves need 100Gi; no single NPU is short,
    # since every request can use either.
    text = explained(
        allocator(npu_slices(npus=2)),
        claim(
            "c",
            req("whole", "gpu", size_is("whole")),
            req("halves", "gpu", size_is("half"), count=3),
        ),
    )
    assert text.splitlines()[-1] == (
        f"    counter sets npu-0, npu-1 of pool {POOL}, counter memory: request whole "
        "(1 x 40Gi) and request halves (3 x 20Gi) need at least 100Gi, 80Gi left"
    )


def test_counters_left_after_allocated_claims_count_and_each_refused_device_names_them() -> None:
    holding = [allocated("o", result("npu0-quarter-0"))]  # 30Gi left
    a = allocator(npu_slices(), holding)
    together = explained(
        a, claim("c", req("a", "gpu", size_is("half")), req("b", "gpu", size_is("half")))
    )
    assert together.splitlines()[-1] == (
        f"    counter set npu-0 of pool {POOL}, counter memory: request a (1 x 20Gi) and "
        "request b (1 x 20Gi) need at least 40Gi, 30Gi left"
    )
    alone = explained(a, claim("c", req("r", "gpu", size_is("whole"))))
    assert alone == "\n".join([
        "node node-1: the claims do not fit",
        "  claim default/c:",
        "    request r (class gpu) wants 1 device(s): 0 of 7 device(s) suitable",
        "      6 rejected by the request's selectors",
        "      1 shared counters used up",
        f"        counter set npu-0 of pool {POOL}, counter memory: 40Gi needed, 30Gi left "
        "(1 device(s))",
    ])  # fmt: skip


def test_refused_devices_needing_different_amounts_show_the_range() -> None:
    a = allocator(npu_slices(), [allocated("o", result("npu0-half-0"), result("npu0-quarter-0"))])
    text = explained(
        a, claim("c", req("r", "gpu", f'device.attributes["{DRIVER}"].size != "quarter"'))
    )
    assert (
        f"        counter set npu-0 of pool {POOL}, counter memory: 20Gi to 40Gi needed, "
        "10Gi left (2 device(s))"
    ) in text.splitlines()


def test_requests_of_two_claims_that_want_more_devices_than_suit_them_are_named() -> None:
    text = explained(
        allocator([rslice("s", gpus(2))]), claim("c1", req("a")), claim("c2", req("b", count=2))
    )
    assert text.splitlines()[-2:] == [
        "  together:",
        "    request a of claim default/c1 and request b of claim default/c2 want 3 device(s) "
        f"together, and only 2 suit any of them: {DRIVER}/node-1/gpu-0, {DRIVER}/node-1/gpu-1",
    ]


def test_without_a_shortage_the_devices_requests_compete_for_are_named() -> None:
    # a can use gpu-0 or gpu-1, b gpu-1 or gpu-2; the claim wants both on one NUMA node,
    # which only gpu-1 could give both: enough devices and no counters, yet no fit.
    devices = [device(f"gpu-{i}", attrs(index=i, numa=i)) for i in range(3)]
    text = explained(
        allocator([rslice("s", devices)]),
        claim(
            "c",
            req("a", "gpu", f'device.attributes["{DRIVER}"].index in [0, 1]'),
            req("b", "gpu", f'device.attributes["{DRIVER}"].index in [1, 2]'),
            constraints=[match(f"{DRIVER}/numa")],
        ),
    )
    assert text.splitlines()[-2:] == [
        "  together:",
        f"    request a and request b compete for the same devices ({DRIVER}/node-1/gpu-1)",
    ]


def test_the_command_prints_the_counters_without_allocated_claims(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = {
        "slices": npu_slices(),
        "classes": [dclass()],
        "claims": [
            claim("c", req("whole", "gpu", size_is("whole")), req("half", "gpu", size_is("half")))
        ],
    }
    args = []
    for flag, objects in files.items():
        path = tmp_path / f"{flag}.yaml"
        path.write_text(yaml.safe_dump_all(objects))
        args += [f"--{flag}", str(path)]
    code = main(["allocate", *args, "--node", "node-1", "--explain"])
    out = capsys.readouterr().out
    assert code == 1
    assert out.splitlines()[-2:] == [
        "  together:",
        f"    counter set npu-0 of pool {POOL}, counter memory: request whole (1 x 40Gi) and "
        "request half (1 x 20Gi) need at least 60Gi, 40Gi left",
    ]
