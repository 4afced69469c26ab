"""Search-heavy allocation scenarios: claims that do not fit, or fit only late, on a node
small enough for the exhaustive search to finish within the scheduler's time limit.

The upstream allocator walks every combination of devices of the earlier requests and
claims before it answers "does not fit" (kubernetes#131730), so these scenarios measure
the search itself, not selectors or bookkeeping. Four kinds, drawn by seed:

* ``late-impossible``: a request no device can ever satisfy comes after requests with
  many combinations (drakit issue 30's ``search-unschedulable`` case is one);
* ``exhausted``: the claims together ask for one device more than the node has;
* ``shared-capacity``: shares of multi-allocatable devices whose memory runs out;
* ``constraint``: the last claim needs devices with one common attribute value, and the
  earlier claims can always take enough of each value to make it fail.

Scenarios are in the oracle's input format (``hack/oracle/README.md``); the same seed
always gives the same scenario.
"""

from __future__ import annotations

import random
from typing import Any

from scenarios import (
    FEATURES_ALL,
    NIC,
    NODE_NAME,
    claim,
    device_class,
    exact_request,
    node,
    resource_slice,
    scenario,
)

Obj = dict[str, Any]

KINDS = ("late-impossible", "exhausted", "shared-capacity", "constraint")
NIC_CLASS = "nic"


def _classes() -> list[Obj]:
    return [device_class(NIC_CLASS, [f'device.driver == "{NIC}"']), device_class("any", [])]


def _plain(name: str, numa: int) -> Obj:
    return {
        "name": name,
        "attributes": {"numa": {"int": numa}, "model": {"string": "a100"}},
        "capacity": {"memory": {"value": "16Gi"}},
    }


def _shared(name: str, memory_gi: int, model: str = "a100") -> Obj:
    return {
        "name": name,
        "attributes": {"model": {"string": model}},
        "allowMultipleAllocations": True,
        "capacity": {
            "memory": {
                "value": f"{memory_gi}Gi",
                "requestPolicy": {
                    "default": "1Gi",
                    "validRange": {"min": "1Gi", "step": "1Gi"},
                },
            }
        },
    }


def _slices(devices: list[Obj]) -> list[Obj]:
    """The devices in two slices of one pool published for the node."""
    half = (len(devices) + 1) // 2
    return [
        resource_slice(f"nic-{i}", NIC, "nic-pool", devices=part, slice_count=2, nodeName=NODE_NAME)
        for i, part in enumerate((devices[:half], devices[half:]))
    ]


def _request(name: str, count: int, memory_gi: int | None = None) -> Obj:
    fields: Obj = {"count": count}
    if memory_gi is not None:
        fields["capacity"] = {"requests": {"memory": f"{memory_gi}Gi"}}
    return exact_request(name, NIC_CLASS, **fields)


def _late_impossible(rng: random.Random) -> tuple[list[Obj], list[Obj]]:
    devices = [_shared(f"s{i}", rng.choice((8, 16))) for i in range(rng.randint(4, 5))]
    devices += [_plain(f"p{i}", i % 2) for i in range(2)]
    first = claim("first", [_request("r0", 1), _request("r1", 1, 2)])
    heavy = claim(
        "heavy",
        [
            _request("r0", rng.randint(2, 3), 1),
            _request("r1", 2, 2),
            {
                "name": "r2",
                "firstAvailable": [
                    {"name": "all", "deviceClassName": NIC_CLASS, "allocationMode": "All",
                     "selectors": [{"cel": {"expression": 'device.attributes["'
                                            f'{NIC}"].model == "h100"'}}]},
                    {"name": "one", "deviceClassName": NIC_CLASS, "count": 1},
                ],
            },
            _request("r3", 2, 32),  # no device has 32Gi
        ],
    )  # fmt: skip
    return devices, [first, heavy]


def _exhausted(rng: random.Random) -> tuple[list[Obj], list[Obj]]:
    size = rng.randint(8, 9)
    devices = [_plain(f"p{i}", i % 2) for i in range(size)]
    counts = [2, 2, 2, 1, 1]
    while sum(counts) < size + 1:
        counts[rng.randrange(len(counts))] += 1
    rng.shuffle(counts)
    claims = [
        claim("c0", [_request("r0", counts[0]), _request("r1", counts[1])]),
        claim("c1", [_request("r0", counts[2]), _request("r1", counts[3])]),
        claim("c2", [_request("r0", counts[4])]),
    ]
    return devices, claims


def _shared_capacity(rng: random.Random) -> tuple[list[Obj], list[Obj]]:
    size = rng.randint(5, 6)
    devices = [_shared(f"s{i}", 8) for i in range(size)]
    # shares of 2 or 3 GiB on two or three devices each, one share too many in all
    requests: list[Obj] = []
    asked = 0
    while asked <= 8 * size:
        count, gi = rng.randint(2, 3), rng.choice((2, 3))
        requests.append(_request(f"r{len(requests)}", count, gi))
        asked += count * gi
    third = (len(requests) + 2) // 3
    claims = [
        claim(f"c{i}", requests[i * third : (i + 1) * third])
        for i in range(3)
        if requests[i * third : (i + 1) * third]
    ]
    return devices, claims


def _constraint(rng: random.Random) -> tuple[list[Obj], list[Obj]]:
    groups = 3
    # three devices per NUMA node: never four with one value for the last claim
    devices = [_plain(f"p{i}", i % groups) for i in range(groups * 3)]
    claims = [
        claim("c0", [_request("r0", rng.randint(1, 2)), _request("r1", 1)]),
        claim("c1", [_request("r0", rng.randint(1, 2))]),
        claim(
            "c2",
            [_request("r0", 2), _request("r1", 2)],
            constraints=[{"requests": ["r0", "r1"], "matchAttribute": f"{NIC}/numa"}],
        ),
    ]
    return devices, claims


_BUILDERS = {
    "late-impossible": _late_impossible,
    "exhausted": _exhausted,
    "shared-capacity": _shared_capacity,
    "constraint": _constraint,
}


def search_heavy_scenario(seed: int) -> tuple[str, Obj]:
    """(kind, scenario) for ``seed``: the kind cycles with the seed, the sizes are drawn."""
    kind = KINDS[seed % len(KINDS)]
    devices, claims = _BUILDERS[kind](random.Random(seed))
    return kind, scenario(
        _slices(devices),
        _classes(),
        claims,
        on_node=node(NODE_NAME, {"kubernetes.io/hostname": NODE_NAME}),
        features=dict(FEATURES_ALL),
    )
