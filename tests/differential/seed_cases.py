"""Hand-written scenarios the differential suite always runs, one per allocation rule it
most cares about. They complement the allocator's contract table
(``tests/unit/allocator/contract_cases.py``) and the random scenarios; no expected answer
is written here: the reference allocator's answer is the expectation.
"""

from __future__ import annotations

from typing import Any

from differential_harness import bench_scenarios

Obj = dict[str, Any]
sc = bench_scenarios()
GPU = sc.GPU


def _gpu(name: str, **fields: Any) -> Obj:
    return {"name": name, **fields}


def _local_slice(devices: list[Obj], pool: str = "pool-a", **spec: Any) -> Obj:
    fields: Obj = {"nodeName": sc.NODE_NAME, **spec}
    made: Obj = sc.resource_slice(f"{pool}-0", GPU, pool, devices=devices, **fields)
    return made


def _classes() -> list[Obj]:
    return [
        sc.device_class("gpu", [f'device.driver == "{GPU}"'], [sc.opaque(GPU, {"from": "class"})])
    ]


def _one(name: str, count: int = 1, **fields: Any) -> Obj:
    made: Obj = sc.claim("c0", [sc.exact_request(name, "gpu", count=count, **fields)])
    return made


def _attrs(**values: Any) -> Obj:
    out: Obj = {}
    for key, value in values.items():
        kind = "bool" if isinstance(value, bool) else "int" if isinstance(value, int) else "string"
        out[key] = {kind: value}
    return out


def seed_cases() -> list[tuple[str, Obj]]:
    """(name, scenario) pairs."""
    three = [_gpu(f"gpu-{i}", attributes=_attrs(index=i, root=f"r{i % 2}")) for i in range(3)]
    held = sc.claim("held", [sc.exact_request("r0", "gpu")])
    held["status"] = {
        "allocation": {
            "devices": {
                "results": [{"request": "r0", "driver": GPU, "pool": "pool-a", "device": "gpu-1"}]
            }
        }
    }
    tainted = [_gpu("gpu-0", taints=[{"key": "maint", "value": "true", "effect": "NoSchedule"}])]
    counters = [{"name": "mem", "counters": {"memory": {"value": "40Gi"}}}]
    parts = [
        _gpu(
            f"part-{i}",
            consumesCounters=[{"counterSet": "mem", "counters": {"memory": {"value": "30Gi"}}}],
        )
        for i in range(2)
    ]
    partitionable = [
        sc.resource_slice(
            "p-counters", GPU, "p", counter_sets=counters, slice_count=2, nodeName=sc.NODE_NAME
        ),
        sc.resource_slice(
            "p-devices", GPU, "p", devices=parts, slice_count=2, nodeName=sc.NODE_NAME
        ),
    ]
    shared = [
        _gpu(
            "gpu-0",
            allowMultipleAllocations=True,
            capacity={
                "memory": {
                    "value": "16Gi",
                    "requestPolicy": {
                        "default": "4Gi",
                        "validRange": {"min": "1Gi", "step": "1Gi"},
                    },
                }
            },
        )
    ]
    capacity_claims = [
        sc.claim(f"c{i}", [sc.exact_request("r0", "gpu", capacity={"requests": {"memory": "7Gi"}})])
        for i in range(2)
    ]
    zone_selector = {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1"]}]}
        ]
    }
    zoned_node = sc.node(sc.NODE_NAME, {"zone": "z1"})
    first_available = sc.claim(
        "c0",
        [
            {
                "name": "r0",
                "firstAvailable": [
                    {"name": "big", "deviceClassName": "gpu", "count": 5},
                    {"name": "small", "deviceClassName": "gpu", "count": 2},
                ],
            }
        ],
        config=[{"requests": ["r0/small"], **sc.opaque(GPU, {"from": "claim"})}],
    )
    return [
        ("one-device", sc.scenario([_local_slice(three)], _classes(), [_one("r0")])),
        ("count-too-large", sc.scenario([_local_slice(three)], _classes(), [_one("r0", 4)])),
        (
            "in-use-device-skipped",
            sc.scenario([_local_slice(three)], _classes(), [_one("r0", 2)], allocated=[held]),
        ),
        (
            "all-mode-with-device-in-use",
            sc.scenario(
                [_local_slice(three)],
                _classes(),
                [sc.claim("c0", [sc.exact_request("r0", "gpu", allocationMode="All")])],
                allocated=[held],
            ),
        ),
        (
            "match-attribute-across-requests",
            sc.scenario(
                [_local_slice(three)],
                _classes(),
                [
                    sc.claim(
                        "c0",
                        [sc.exact_request("a", "gpu"), sc.exact_request("b", "gpu")],
                        constraints=[{"matchAttribute": f"{GPU}/root"}],
                    )
                ],
            ),
        ),
        (
            "distinct-attribute-within-request",
            sc.scenario(
                [_local_slice(three)],
                _classes(),
                [
                    sc.claim(
                        "c0",
                        [sc.exact_request("a", "gpu", count=2)],
                        constraints=[{"distinctAttribute": f"{GPU}/root"}],
                    )
                ],
            ),
        ),
        (
            "first-available-falls-back",
            sc.scenario([_local_slice(three)], _classes(), [first_available]),
        ),
        ("untolerated-taint", sc.scenario([_local_slice(tainted)], _classes(), [_one("r0")])),
        (
            "tolerated-taint",
            sc.scenario(
                [_local_slice(tainted)],
                _classes(),
                [_one("r0", tolerations=[{"key": "maint", "operator": "Exists"}])],
            ),
        ),
        ("shared-counters-exhausted", sc.scenario(partitionable, _classes(), [_one("r0", 2)])),
        (
            "consumable-capacity-shared-by-claims",
            sc.scenario([_local_slice(shared)], _classes(), capacity_claims),
        ),
        (
            "consumable-capacity-exhausted",
            sc.scenario(
                [_local_slice(shared)],
                _classes(),
                [
                    *capacity_claims,
                    sc.claim(
                        "c2",
                        [sc.exact_request("r0", "gpu", capacity={"requests": {"memory": "3Gi"}})],
                    ),
                ],
            ),
        ),
        (
            "cel-runtime-error-is-fatal",
            sc.scenario(
                [_local_slice(three)],
                _classes(),
                [_one("r0", selectors=sc.cel_selectors(f'device.attributes["{GPU}"].nope == 1'))],
            ),
        ),
        (
            "missing-class-is-fatal",
            sc.scenario(
                [_local_slice(three)],
                _classes(),
                [sc.claim("c0", [sc.exact_request("r0", "no-such-class")])],
            ),
        ),
        (
            "incomplete-pool-exact-count",
            sc.scenario([_local_slice(three, slice_count=2)], _classes(), [_one("r0")]),
        ),
        (
            "incomplete-pool-all-mode",
            sc.scenario(
                [_local_slice(three, slice_count=2)],
                _classes(),
                [sc.claim("c0", [sc.exact_request("r0", "gpu", allocationMode="All")])],
            ),
        ),
        (
            "admin-access-on-device-in-use",
            sc.scenario(
                [_local_slice(three[1:2])],
                _classes(),
                [_one("r0", adminAccess=True)],
                allocated=[held],
            ),
        ),
        (
            "binds-to-node-pins-node",
            sc.scenario(
                [
                    sc.resource_slice(
                        "s",
                        GPU,
                        "pool-a",
                        allNodes=True,
                        devices=[
                            _gpu(
                                "gpu-0",
                                bindsToNode=True,
                                bindingConditions=["attached"],
                                bindingFailureConditions=["failed"],
                            )
                        ],
                    )
                ],
                _classes(),
                [_one("r0")],
            ),
        ),
        (
            "node-selector-slice",
            sc.scenario(
                [sc.resource_slice("s", GPU, "pool-a", nodeSelector=zone_selector, devices=three)],
                _classes(),
                [_one("r0")],
                on_node=zoned_node,
            ),
        ),
        (
            "invalid-pool-duplicate-device",
            sc.scenario(
                [
                    sc.resource_slice(
                        f"dup-{i}",
                        GPU,
                        "dup",
                        devices=[_gpu("gpu-0")],
                        slice_count=2,
                        nodeName=sc.NODE_NAME,
                    )
                    for i in range(2)
                ],
                _classes(),
                [_one("r0")],
            ),
        ),
    ]
