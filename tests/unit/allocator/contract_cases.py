"""The allocator contract table: named scenarios with the outcome Kubernetes 1.37 gives.

``CASES`` is a list of scenario dicts in the Go oracle's input shape (``hack/oracle``) plus
``name``, ``covers`` (the rule or allocator-semantics.md §5 item exercised) and ``expect``:
``{"outcome": "allocated"|"unschedulable"|"error", "devices": [[...], ...] | None,
"check": {...}}``. ``devices`` lists, per claim, ``request=pool/device`` (``driver:`` prefix
when the driver is not the default). The differential suite sends the same dicts to the
oracle; the expectations were cross-checked against it.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

# tests/ is not a package: make the sibling builders importable when this file is loaded
# by path (the differential suite does that).
if str(Path(__file__).parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).parent))

from alloc_builders import (
    DRIVER,
    allocated,
    attrs,
    claim,
    consumes,
    counter_slice,
    dclass,
    device,
    distinct,
    first,
    gpus,
    match,
    node,
    opaque,
    req,
    result,
    rslice,
    scenario,
    sub,
)

CASES: list[dict[str, Any]] = []


def add(case: dict[str, Any]) -> None:
    CASES.append(case)


GPU4 = [rslice("node-1-gpus", gpus(4))]

# ----------------------------------------------------------------------------- basics
add(
    scenario(
        "one device from a class",
        slices=GPU4,
        claims=[claim("c", req())],
        devices=[["r=node-1/gpu-0"]],
        covers="ExactCount default count 1",
    )
)
add(
    scenario(
        "two devices in device order",
        slices=GPU4,
        claims=[claim("c", req(count=2))],
        devices=[["r=node-1/gpu-0", "r=node-1/gpu-1"]],
        covers="deterministic order",
    )
)
add(
    scenario(
        "count larger than devices does not fit",
        slices=GPU4,
        claims=[claim("c", req(count=5))],
        expect="unschedulable",
    )
)
add(
    scenario(
        "all four devices exactly",
        slices=GPU4,
        claims=[claim("c", req(count=4))],
        devices=[[f"r=node-1/gpu-{i}" for i in range(4)]],
    )
)
add(
    scenario(
        "no slices does not fit", slices=[], claims=[claim("c", req())], expect="unschedulable"
    )
)
add(
    scenario(
        "empty claim allocates with no results",
        slices=GPU4,
        claims=[claim("c")],
        devices=[[]],
        covers="§5.28 empty claim",
    )
)
add(
    scenario(
        "empty claim with no slices allocates",
        slices=[],
        claims=[claim("c")],
        devices=[[]],
        covers="§5.28",
    )
)
add(scenario("no claims allocates nothing", slices=GPU4, claims=[], devices=[]))
add(
    scenario(
        "two claims get different devices",
        slices=GPU4,
        claims=[claim("a", req()), claim("b", req())],
        devices=[["r=node-1/gpu-0"], ["r=node-1/gpu-1"]],
    )
)
add(
    scenario(
        "two requests in one claim",
        slices=GPU4,
        claims=[claim("c", req("a"), req("b", count=2))],
        devices=[["a=node-1/gpu-0", "b=node-1/gpu-1", "b=node-1/gpu-2"]],
    )
)
add(
    scenario(
        "second claim does not fit",
        slices=GPU4,
        claims=[claim("a", req(count=3)), claim("b", req(count=2))],
        expect="unschedulable",
    )
)
add(
    scenario(
        "unknown class is fatal",
        slices=GPU4,
        claims=[claim("c", req(cls="missing"))],
        expect="error",
        covers="class lookup failure",
    )
)
add(
    scenario(
        "unknown class is fatal even with no devices",
        slices=[],
        claims=[claim("c", req(cls="missing"))],
        expect="error",
    )
)
add(
    scenario(
        "class selector filters devices",
        slices=[rslice("s", [device("a", attrs(model="x")), device("b", attrs(model="y"))])],
        classes=[dclass("gpu", 'device.attributes["gpu.example.com"].model == "y"')],
        claims=[claim("c", req())],
        devices=[["r=node-1/b"]],
    )
)
add(
    scenario(
        "request selector filters devices",
        slices=[rslice("s", [device("a", attrs(model="x")), device("b", attrs(model="y"))])],
        claims=[claim("c", req("r", "gpu", 'device.attributes["gpu.example.com"].model == "y"'))],
        devices=[["r=node-1/b"]],
    )
)
add(
    scenario(
        "class with no selectors matches every device",
        slices=[
            rslice("s", gpus(1)),
            rslice("t", [device("x")], driver="other.example.com", pool="other"),
        ],
        classes=[dclass("any", driver_selector=False)],
        claims=[claim("c", req(cls="any", count=2))],
        devices=[["r=node-1/gpu-0", "r=other.example.com:other/x"]],
    )
)
add(
    scenario(
        "other driver not selected by class",
        slices=[rslice("s", [device("x")], driver="other.example.com")],
        claims=[claim("c", req())],
        expect="unschedulable",
    )
)
add(
    scenario(
        "count zero allocates nothing for the request",
        slices=GPU4,
        claims=[
            claim(
                "c",
                {
                    "name": "r",
                    "exactly": {
                        "deviceClassName": "gpu",
                        "allocationMode": "ExactCount",
                        "count": 0,
                    },
                },
            )
        ],
        devices=[["r=node-1/gpu-0"]],
        covers="§5.26 defaulting: count 0 becomes 1",
    )
)
add(
    scenario(
        "33 devices in one request is fatal",
        slices=[rslice("s", gpus(40))],
        claims=[claim("c", req(count=33))],
        expect="error",
        covers="32-result limit",
    )
)
add(
    scenario(
        "32 devices in one request fit",
        slices=[rslice("s", gpus(40))],
        claims=[claim("c", req(count=32))],
        devices=[[f"r=node-1/gpu-{i}" for i in range(32)]],
        covers="32-result limit",
    )
)
add(
    scenario(
        "two requests over 32 devices are fatal",
        slices=[rslice("s", gpus(40))],
        claims=[claim("c", req("a", count=20), req("b", count=13))],
        expect="error",
        covers="32-result limit per claim",
    )
)
add(
    scenario(
        "32 per claim is per claim, not per call",
        slices=[rslice("s", gpus(40))],
        claims=[claim("a", req(count=20)), claim("b", req(count=20))],
        devices=[
            [f"r=node-1/gpu-{i}" for i in range(20)],
            [f"r=node-1/gpu-{i}" for i in range(20, 40)],
        ],
    )
)

# ----------------------------------------------------------------------------- node selection
two_nodes = [rslice("n1", gpus(1, "a"), node="node-1"), rslice("n2", gpus(1, "b"), node="node-2")]
add(
    scenario(
        "slice of another node is invisible",
        slices=two_nodes,
        claims=[claim("c", req(count=2))],
        expect="unschedulable",
        covers="nodeName",
    )
)
add(
    scenario(
        "slice of this node is used",
        slices=two_nodes,
        node_obj=node("node-2"),
        claims=[claim("c", req())],
        devices=[["r=node-2/b-0"]],
    )
)
add(
    scenario(
        "allNodes slice is visible everywhere",
        slices=[rslice("net", gpus(1), node=None, pool="net", allNodes=True)],
        node_obj=node("node-9"),
        claims=[claim("c", req())],
        devices=[["r=net/gpu-0"]],
        check={"nodeSelector": None},
        covers="allNodes, nil nodeSelector",
    )
)
sel_slice = rslice(
    "zone",
    gpus(2),
    node=None,
    pool="zone-a",
    nodeSelector={
        "nodeSelectorTerms": [
            {
                "matchExpressions": [
                    {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a"]}
                ]
            }
        ]
    },
)
add(
    scenario(
        "nodeSelector slice matches node labels",
        slices=[sel_slice],
        node_obj=node("node-1", **{"topology.kubernetes.io/zone": "a"}),
        claims=[claim("c", req())],
        devices=[["r=zone-a/gpu-0"]],
        check={
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {
                                "key": "topology.kubernetes.io/zone",
                                "operator": "In",
                                "values": ["a"],
                            }
                        ]
                    }
                ]
            }
        },
        covers="nodeSelector relevance and result nodeSelector",
    )
)
add(
    scenario(
        "nodeSelector slice does not match other labels",
        slices=[sel_slice],
        node_obj=node("node-1", **{"topology.kubernetes.io/zone": "b"}),
        claims=[claim("c", req())],
        expect="unschedulable",
    )
)
add(
    scenario(
        "nodeSelector slice does not match unlabeled node",
        slices=[sel_slice],
        claims=[claim("c", req())],
        expect="unschedulable",
    )
)
add(
    scenario(
        "nodeSelector with matchFields on metadata.name",
        slices=[
            rslice(
                "f",
                gpus(1),
                node=None,
                pool="f",
                nodeSelector={
                    "nodeSelectorTerms": [
                        {
                            "matchFields": [
                                {"key": "metadata.name", "operator": "In", "values": ["node-1"]}
                            ]
                        }
                    ]
                },
            )
        ],
        claims=[claim("c", req())],
        devices=[["r=f/gpu-0"]],
    )
)
add(
    scenario(
        "nodeSelector NotIn matches absent label",
        slices=[
            rslice(
                "f",
                gpus(1),
                node=None,
                pool="f",
                nodeSelector={
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "gpu", "operator": "NotIn", "values": ["no"]}
                            ]
                        }
                    ]
                },
            )
        ],
        claims=[claim("c", req())],
        devices=[["r=f/gpu-0"]],
    )
)
add(
    scenario(
        "node name and selector results merge into nodeName pin",
        slices=[sel_slice, rslice("local", gpus(1, "l"))],
        node_obj=node("node-1", **{"topology.kubernetes.io/zone": "a"}),
        claims=[claim("c", req(count=2))],
        devices=[["r=node-1/l-0", "r=zone-a/gpu-0"]],
        check={
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {
                        "matchFields": [
                            {"key": "metadata.name", "operator": "In", "values": ["node-1"]}
                        ]
                    }
                ]
            }
        },
        covers="§5.23 node-local device pins the claim",
    )
)
add(
    scenario(
        "two selector slices merge requirements",
        slices=[
            rslice(
                "za",
                gpus(1, "a"),
                node=None,
                pool="pa",
                nodeSelector={
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
                    ]
                },
            ),
            rslice(
                "ra",
                gpus(1, "b"),
                node=None,
                pool="pb",
                nodeSelector={
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "rack", "operator": "In", "values": ["1"]},
                                {"key": "zone", "operator": "In", "values": ["a"]},
                            ]
                        }
                    ]
                },
            ),
        ],
        node_obj=node("node-1", zone="a", rack="1"),
        claims=[claim("c", req(count=2))],
        devices=[["r=pa/a-0", "r=pb/b-0"]],
        check={
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "zone", "operator": "In", "values": ["a"]},
                            {"key": "rack", "operator": "In", "values": ["1"]},
                        ]
                    }
                ]
            }
        },
        covers="§5.23 merge and de-duplicate",
    )
)
per_dev = rslice(
    "pd",
    [device("a", nodeName="node-2"), device("b", nodeName="node-1"), device("c", allNodes=True)],
    node=None,
    pool="pd",
    perDeviceNodeSelection=True,
)
add(
    scenario(
        "per-device node selection filters devices",
        slices=[per_dev],
        claims=[claim("c", req())],
        devices=[["r=pd/b"]],
        check={
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {
                        "matchFields": [
                            {"key": "metadata.name", "operator": "In", "values": ["node-1"]}
                        ]
                    }
                ]
            }
        },
        covers="§5.27 per-device node selection",
    )
)
add(
    scenario(
        "per-device allNodes device has no node selector",
        slices=[per_dev],
        node_obj=node("node-3"),
        claims=[claim("c", req())],
        devices=[["r=pd/c"]],
        check={"nodeSelector": None},
    )
)
add(
    scenario(
        "per-device slice irrelevant when no device matches",
        slices=[
            rslice(
                "pd",
                [device("a", nodeName="node-2")],
                node=None,
                pool="pd",
                perDeviceNodeSelection=True,
            )
        ],
        claims=[claim("c", req())],
        expect="unschedulable",
    )
)
add(
    scenario(
        "bad node selector operator is fatal",
        slices=[
            rslice(
                "f",
                gpus(1),
                node=None,
                pool="f",
                nodeSelector={
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "zone", "operator": "Near", "values": ["a"]}]}
                    ]
                },
            )
        ],
        claims=[claim("c", req())],
        expect="error",
        covers="node selector parse error",
    )
)
add(
    scenario(
        "slice without node selection is skipped",
        slices=[rslice("none", gpus(1), node=None, pool="none")],
        claims=[claim("c", req())],
        expect="unschedulable",
    )
)

# ----------------------------------------------------------------------------- pools
add(
    scenario(
        "pools ordered by driver then pool name",
        slices=[rslice("z", gpus(1, "z"), pool="zz"), rslice("a", gpus(1, "a"), pool="aa")],
        claims=[claim("c", req())],
        devices=[["r=aa/a-0"]],
        covers="§5.2 pool order",
    )
)
add(
    scenario(
        "slices ordered by name within a pool",
        slices=[
            rslice("s2", gpus(1, "late"), pool="p", count=2),
            rslice("s1", gpus(1, "early"), pool="p", count=2),
        ],
        claims=[claim("c", req())],
        devices=[["r=p/early-0"]],
        covers="§5.2 slice order",
    )
)
add(
    scenario(
        "incomplete pool is skipped in ExactCount",
        slices=[rslice("s1", gpus(2), pool="p", count=2)],
        claims=[claim("c", req())],
        expect="unschedulable",
        covers="§5.3",
    )
)
add(
    scenario(
        "incomplete pool skipped but others used",
        slices=[rslice("s1", gpus(2, "x"), pool="inc", count=2), rslice("ok", gpus(1), pool="ok")],
        claims=[claim("c", req())],
        devices=[["r=ok/gpu-0"]],
    )
)
add(
    scenario(
        "incomplete pool makes All mode fatal",
        slices=[rslice("s1", gpus(2), pool="p", count=2)],
        claims=[claim("c", req(mode="All"))],
        expect="error",
        covers="§5.3, §5.6",
    )
)
add(
    scenario(
        "incomplete pool of unrelated driver makes All fatal",
        slices=[
            rslice("s1", gpus(2)),
            rslice("o", [device("x")], driver="other.example.com", pool="o", count=2),
        ],
        claims=[claim("c", req(mode="All"))],
        expect="error",
        covers="§5.6",
    )
)
add(
    scenario(
        "only highest generation counts",
        slices=[
            rslice("old", gpus(1, "old"), pool="p", generation=1),
            rslice("new", gpus(1, "new"), pool="p", generation=2),
        ],
        claims=[claim("c", req(count=2))],
        expect="unschedulable",
    )
)
add(
    scenario(
        "highest generation used",
        slices=[
            rslice("old", gpus(1, "old"), pool="p", generation=1),
            rslice("new", gpus(1, "new"), pool="p", generation=2),
        ],
        claims=[claim("c", req())],
        devices=[["r=p/new-0"]],
    )
)
add(
    scenario(
        "newer generation elsewhere makes pool obsolete",
        slices=[
            rslice("mine", gpus(1), pool="shared", count=2, generation=1),
            rslice("theirs", gpus(1, "t"), node="node-2", pool="shared", count=2, generation=2),
        ],
        claims=[claim("c", req())],
        expect="unschedulable",
        covers="§5.4 obsolete",
    )
)
add(
    scenario(
        "pool complete across nodes",
        slices=[
            rslice("mine", gpus(1), pool="shared", count=2),
            rslice("theirs", gpus(1, "t"), node="node-2", pool="shared", count=2),
        ],
        claims=[claim("c", req())],
        devices=[["r=shared/gpu-0"]],
        covers="§5.4",
    )
)
add(
    scenario(
        "duplicate device names make pool invalid",
        slices=[rslice("s1", gpus(1), pool="p", count=2), rslice("s2", gpus(1), pool="p", count=2)],
        claims=[claim("c", req())],
        expect="unschedulable",
        covers="§5.5 invalid pools surface as node failure",
    )
)
add(
    scenario(
        "invalid pool ignored when others fit",
        slices=[
            rslice("s1", gpus(1), pool="bad", count=2),
            rslice("s2", gpus(1), pool="bad", count=2),
            rslice("ok", gpus(1, "ok"), pool="ok"),
        ],
        claims=[claim("c", req())],
        devices=[["r=ok/ok-0"]],
        covers="§5.5",
    )
)
add(
    scenario(
        "invalid pool makes All fatal",
        slices=[
            rslice("s1", gpus(1), pool="bad", count=2),
            rslice("s2", gpus(1), pool="bad", count=2),
        ],
        claims=[claim("c", req(mode="All"))],
        expect="error",
    )
)
add(
    scenario(
        "unknown counter set makes pool invalid",
        slices=[rslice("s", [device("a", consumesCounters=consumes("nope", mem="1"))])],
        claims=[claim("c", req())],
        expect="unschedulable",
    )
)

# ----------------------------------------------------------------------------- All mode
add(
    scenario(
        "All takes every matching device",
        slices=GPU4,
        claims=[claim("c", req(mode="All"))],
        devices=[[f"r=node-1/gpu-{i}" for i in range(4)]],
        covers="All mode",
    )
)
add(
    scenario(
        "All with selector",
        slices=GPU4,
        claims=[
            claim(
                "c",
                req("r", "gpu", 'device.attributes["gpu.example.com"].index % 2 == 0', mode="All"),
            )
        ],
        devices=[["r=node-1/gpu-0", "r=node-1/gpu-2"]],
    )
)
add(
    scenario(
        "All with no matching device does not fit",
        slices=GPU4,
        claims=[claim("c", req("r", "gpu", "false", mode="All"))],
        expect="unschedulable",
        covers="§5.6 All needs at least one",
    )
)
add(
    scenario(
        "All with one device in use does not fit",
        slices=GPU4,
        allocated_claims=[allocated("other", result("gpu-1"))],
        claims=[claim("c", req(mode="All"))],
        expect="unschedulable",
        covers="§5.6",
    )
)
add(
    scenario(
        "All constraint violation is fatal",
        slices=[rslice("s", [device("a", attrs(numa=0)), device("b", attrs(numa=1))])],
        claims=[claim("c", req(mode="All"), constraints=[match(f"{DRIVER}/numa")])],
        expect="error",
        covers="§5.6 must=true",
    )
)
add(
    scenario(
        "All over 32 devices is fatal",
        slices=[rslice("s", gpus(33))],
        claims=[claim("c", req(mode="All"))],
        expect="error",
    )
)
add(
    scenario(
        "All then ExactCount conflict",
        slices=GPU4,
        claims=[claim("c", req("a", mode="All"), req("b"))],
        expect="unschedulable",
    )
)
add(
    scenario(
        "ExactCount then All conflict",
        slices=GPU4,
        claims=[claim("c", req("a"), req("b", mode="All"))],
        expect="unschedulable",
    )
)
add(
    scenario(
        "unknown allocation mode is fatal",
        slices=GPU4,
        claims=[claim("c", req(mode="Some"))],
        expect="error",
        covers="unsupported mode",
    )
)

# ----------------------------------------------------------------------------- in use
add(
    scenario(
        "allocated device is skipped",
        slices=GPU4,
        allocated_claims=[allocated("other", result("gpu-0"))],
        claims=[claim("c", req())],
        devices=[["r=node-1/gpu-1"]],
    )
)
add(
    scenario(
        "all devices allocated does not fit",
        slices=[rslice("s", gpus(2))],
        allocated_claims=[allocated("o", result("gpu-0"), result("gpu-1"))],
        claims=[claim("c", req())],
        expect="unschedulable",
    )
)
add(
    scenario(
        "admin access may use an allocated device",
        slices=[rslice("s", gpus(1))],
        allocated_claims=[allocated("o", result("gpu-0"))],
        claims=[claim("c", req(adminAccess=True))],
        devices=[["r=node-1/gpu-0"]],
        check={"adminAccess": True},
        covers="§5.21 admin access",
    )
)
add(
    scenario(
        "admin access result does not block others",
        slices=[rslice("s", gpus(1))],
        allocated_claims=[allocated("o", result("gpu-0", adminAccess=True))],
        claims=[claim("c", req())],
        devices=[["r=node-1/gpu-0"]],
        covers="§5.21",
    )
)
add(
    scenario(
        "admin access cannot take a device twice in one claim",
        slices=[rslice("s", gpus(1))],
        claims=[claim("c", req(count=2, adminAccess=True))],
        expect="unschedulable",
    )
)
add(
    scenario(
        "admin pick blocks a later normal request in the same call",
        slices=[rslice("s", gpus(1))],
        claims=[claim("a", req(adminAccess=True)), claim("b", req())],
        expect="unschedulable",
        covers="§5.21 allocatingDevices quirk",
    )
)
add(
    scenario(
        "admin access false behaves normally",
        slices=[rslice("s", gpus(1))],
        allocated_claims=[allocated("o", result("gpu-0"))],
        claims=[claim("c", req(adminAccess=False))],
        expect="unschedulable",
    )
)
add(
    scenario(
        "admin access with feature off is fatal",
        slices=GPU4,
        features={"adminAccess": False},
        claims=[claim("c", req(adminAccess=False))],
        expect="error",
        covers="§5.24",
    )
)
add(
    scenario(
        "allocated device of other driver does not block",
        slices=[rslice("s", gpus(1))],
        allocated_claims=[allocated("o", result("gpu-0", driver="other.example.com"))],
        claims=[claim("c", req())],
        devices=[["r=node-1/gpu-0"]],
    )
)

# ----------------------------------------------------------------------------- firstAvailable
add(
    scenario(
        "first subrequest wins",
        slices=GPU4,
        claims=[claim("c", first("r", sub("big", count=2), sub("small")))],
        devices=[["r/big=node-1/gpu-0", "r/big=node-1/gpu-1"]],
        covers="firstAvailable",
    )
)
add(
    scenario(
        "falls back to second subrequest",
        slices=GPU4,
        claims=[claim("c", first("r", sub("big", count=8), sub("small", count=2)))],
        devices=[["r/small=node-1/gpu-0", "r/small=node-1/gpu-1"]],
    )
)
add(
    scenario(
        "no subrequest fits",
        slices=GPU4,
        claims=[claim("c", first("r", sub("a", count=8), sub("b", count=5)))],
        expect="unschedulable",
    )
)
add(
    scenario(
        "backtracking across claims picks the next subrequest",
        slices=GPU4,
        claims=[
            claim("a", first("r", sub("big", count=3), sub("small", count=1))),
            claim("b", req(count=3)),
        ],
        devices=[["r/small=node-1/gpu-0"], ["r=node-1/gpu-1", "r=node-1/gpu-2", "r=node-1/gpu-3"]],
        covers="§5.7 backtracking across claims",
    )
)
add(
    scenario(
        "subrequest with selector",
        slices=[rslice("s", [device("a", attrs(model="x")), device("b", attrs(model="y"))])],
        claims=[
            claim(
                "c",
                first(
                    "r",
                    sub("y", "gpu", 'device.attributes["gpu.example.com"].model == "z"'),
                    sub("any"),
                ),
            )
        ],
        devices=[["r/any=node-1/a"]],
    )
)
add(
    scenario(
        "subrequests with feature off are fatal",
        slices=GPU4,
        features={"prioritizedList": False},
        claims=[claim("c", first("r", sub("a")))],
        expect="error",
        covers="§5.24",
    )
)
add(
    scenario(
        "subrequest with unknown class is fatal",
        slices=GPU4,
        claims=[claim("c", first("r", sub("a"), sub("b", cls="missing")))],
        expect="error",
    )
)
add(
    scenario(
        "subrequest All mode",
        slices=GPU4,
        claims=[claim("c", first("r", sub("all", mode="All")))],
        devices=[[f"r/all=node-1/gpu-{i}" for i in range(4)]],
    )
)
add(
    scenario(
        "subrequest pruning at the 32 limit",
        slices=[rslice("s", gpus(40))],
        claims=[
            claim("c", first("r", sub("many", count=30), sub("few", count=2)), req("b", count=10))
        ],
        devices=[
            ["r/few=node-1/gpu-0", "r/few=node-1/gpu-1"]
            + [f"b=node-1/gpu-{i}" for i in range(2, 12)]
        ],
        covers="§5.8 result-size pruning",
    )
)
add(
    scenario(
        "subrequest size sentinel does not leak across claims",
        slices=[rslice("s", gpus(40))],
        claims=[
            claim("a", req(count=1)),
            claim("b", first("r", sub("many", count=30), sub("few", count=2)), req("x", count=10)),
        ],
        devices=[
            ["r=node-1/gpu-0"],
            ["r/few=node-1/gpu-1", "r/few=node-1/gpu-2"]
            + [f"x=node-1/gpu-{i}" for i in range(3, 13)],
        ],
        covers="§5.8",
    )
)
add(
    scenario(
        "all subrequests exceeding 32 in the first claim is fatal",
        slices=[rslice("s", gpus(40))],
        claims=[claim("c", first("r", sub("a", count=30), sub("b", count=25)), req("x", count=10))],
        expect="error",
        covers="§5.8 sentinel at top level",
    )
)
add(
    scenario(
        "constraint naming parent covers the chosen subrequest",
        slices=[
            rslice(
                "s",
                [
                    device("a", attrs(numa=0)),
                    device("b", attrs(numa=1)),
                    device("c", attrs(numa=1)),
                ],
            )
        ],
        claims=[
            claim(
                "c",
                req("x", "gpu", 'device.attributes["gpu.example.com"].numa == 1'),
                first("r", sub("s1")),
                constraints=[match(f"{DRIVER}/numa", "x", "r")],
            )
        ],
        devices=[["x=node-1/b", "r/s1=node-1/c"]],
    )
)
add(
    scenario(
        "constraint naming a subrequest",
        slices=[rslice("s", [device("a", attrs(numa=0)), device("b", attrs(numa=1))])],
        claims=[
            claim(
                "c",
                req("x", "gpu", 'device.attributes["gpu.example.com"].numa == 1'),
                first("r", sub("s1")),
                constraints=[match(f"{DRIVER}/numa", "x", "r/s1")],
            )
        ],
        devices=[["x=node-1/b"]],
        expect="unschedulable",
    )
)

# ----------------------------------------------------------------------------- constraints
numa = [
    rslice(
        "s",
        [
            device("a", attrs(numa=0)),
            device("b", attrs(numa=1)),
            device("c", attrs(numa=1)),
            device("d", attrs(numa=0)),
        ],
    )
]
add(
    scenario(
        "matchAttribute picks matching pair",
        slices=numa,
        claims=[claim("c", req(count=2), constraints=[match(f"{DRIVER}/numa")])],
        devices=[["r=node-1/a", "r=node-1/d"]],
        covers="matchAttribute",
    )
)
add(
    scenario(
        "matchAttribute across requests",
        slices=numa,
        claims=[
            claim(
                "c",
                req("x", "gpu", 'device.attributes["gpu.example.com"].numa == 1'),
                req("y"),
                constraints=[match(f"{DRIVER}/numa")],
            )
        ],
        devices=[["x=node-1/b", "y=node-1/c"]],
    )
)
add(
    scenario(
        "matchAttribute limited to listed requests",
        slices=numa,
        claims=[
            claim(
                "c",
                req("x", "gpu", 'device.attributes["gpu.example.com"].numa == 1'),
                req("y"),
                req("z"),
                constraints=[match(f"{DRIVER}/numa", "x", "z")],
            )
        ],
        devices=[["x=node-1/b", "y=node-1/a", "z=node-1/c"]],
    )
)
add(
    scenario(
        "matchAttribute impossible",
        slices=numa,
        claims=[claim("c", req(count=3), constraints=[match(f"{DRIVER}/numa")])],
        expect="unschedulable",
    )
)
add(
    scenario(
        "matchAttribute missing attribute refuses",
        slices=[rslice("s", [device("a"), device("b", attrs(numa=1)), device("c", attrs(numa=1))])],
        claims=[claim("c", req(count=2), constraints=[match(f"{DRIVER}/numa")])],
        devices=[["r=node-1/b", "r=node-1/c"]],
    )
)
add(
    scenario(
        "matchAttribute type mismatch refuses",
        slices=[rslice("s", [device("a", attrs(numa=1)), device("b", attrs(numa="1"))])],
        claims=[claim("c", req(count=2), constraints=[match(f"{DRIVER}/numa")])],
        expect="unschedulable",
        covers="§5.13 type and value",
    )
)
add(
    scenario(
        "matchAttribute on qualified attribute of another domain",
        slices=[
            rslice(
                "s",
                [
                    device("a", attrs(**{"topo.io/pci": "x"})),
                    device("b", attrs(**{"topo.io/pci": "y"})),
                    device("c", attrs(**{"topo.io/pci": "y"})),
                ],
            )
        ],
        claims=[claim("c", req(count=2), constraints=[match("topo.io/pci")])],
        devices=[["r=node-1/b", "r=node-1/c"]],
        covers="§5.12",
    )
)
# Kubernetes' standard PCI attributes (resource.kubernetes.io/..., as the hostdev backend
# publishes them): the domain is not the driver's, so only the fully qualified name matches.
PCIE_ROOT = "resource.kubernetes.io/pcieRoot"
pcie = [
    rslice(
        "pcie",
        [
            device(
                "gpu-0", attrs(**{PCIE_ROOT: "pci0000:00", "resource.kubernetes.io/numaNode": 0})
            ),
            device(
                "gpu-1", attrs(**{PCIE_ROOT: "pci0000:3a", "resource.kubernetes.io/numaNode": 1})
            ),
            device(
                "gpu-2", attrs(**{PCIE_ROOT: "pci0000:3a", "resource.kubernetes.io/numaNode": 1})
            ),
            device("gpu-3"),
        ],
    )
]
add(
    scenario(
        "matchAttribute pcieRoot keeps two devices on one PCIe root",
        slices=pcie,
        claims=[claim("c", req(count=2), constraints=[match(PCIE_ROOT)])],
        devices=[["r=node-1/gpu-1", "r=node-1/gpu-2"]],
        covers="§5.12 standard attribute pcieRoot",
    )
)
add(
    scenario(
        "matchAttribute pcieRoot across two requests",
        slices=pcie,
        claims=[claim("c", req("a"), req("b"), constraints=[match(PCIE_ROOT)])],
        devices=[["a=node-1/gpu-1", "b=node-1/gpu-2"]],
        covers="§5.12 standard attribute pcieRoot",
    )
)
add(
    scenario(
        "matchAttribute pcieRoot with no root holding three devices",
        slices=pcie,
        claims=[claim("c", req(count=3), constraints=[match(PCIE_ROOT)])],
        expect="unschedulable",
        covers="§5.12 standard attribute pcieRoot",
    )
)
add(
    scenario(
        "matchAttribute unqualified name belongs to the driver domain",
        slices=[rslice("s", [device("a", attrs(numa=0)), device("b", attrs(numa=0))])],
        claims=[claim("c", req(count=2), constraints=[match("other.io/numa")])],
        expect="unschedulable",
        covers="§5.12 domain must match driver",
    )
)
add(
    scenario(
        "matchAttribute on versions compares strings",
        slices=[
            rslice(
                "s",
                [
                    device("a", attrs(fw=("version", "1.0.0"))),
                    device("b", attrs(fw=("version", "1.0.1"))),
                    device("c", attrs(fw=("version", "1.0.1"))),
                ],
            )
        ],
        claims=[claim("c", req(count=2), constraints=[match(f"{DRIVER}/fw")])],
        devices=[["r=node-1/b", "r=node-1/c"]],
        covers="§5.13 versions",
    )
)
add(
    scenario(
        "matchAttribute list intersection",
        slices=[
            rslice(
                "s",
                [
                    device("a", attrs(links=[1, 2])),
                    device("b", attrs(links=[3])),
                    device("c", attrs(links=[2, 3])),
                ],
            )
        ],
        claims=[claim("c", req(count=2), constraints=[match(f"{DRIVER}/links")])],
        devices=[["r=node-1/a", "r=node-1/c"]],
        covers="§5.13 list mode",
    )
)
add(
    scenario(
        "matchAttribute list intersection must stay non-empty",
        slices=[
            rslice(
                "s",
                [
                    device("a", attrs(links=[1, 2])),
                    device("b", attrs(links=[2, 3])),
                    device("c", attrs(links=[3, 4])),
                ],
            )
        ],
        claims=[claim("c", req(count=3), constraints=[match(f"{DRIVER}/links")])],
        expect="unschedulable",
    )
)
add(
    scenario(
        "matchAttribute list and scalar",
        slices=[rslice("s", [device("a", attrs(links=2)), device("b", attrs(links=[1, 2]))])],
        claims=[claim("c", req(count=2), constraints=[match(f"{DRIVER}/links")])],
        devices=[["r=node-1/a", "r=node-1/b"]],
    )
)
add(
    scenario(
        "matchAttribute list intersection restored on backtrack",
        slices=[
            rslice(
                "s",
                [
                    device("a", attrs(links=[1, 2])),
                    device("b", attrs(links=[1])),
                    device("c", attrs(links=[2])),
                    device("d", attrs(links=[2])),
                ],
            )
        ],
        claims=[claim("c", req(count=3), constraints=[match(f"{DRIVER}/links")])],
        devices=[["r=node-1/a", "r=node-1/c", "r=node-1/d"]],
        covers="§5.13 undo stack",
    )
)
add(
    scenario(
        "distinctAttribute picks different values",
        slices=numa,
        claims=[claim("c", req(count=2), constraints=[distinct(f"{DRIVER}/numa")])],
        devices=[["r=node-1/a", "r=node-1/b"]],
        covers="distinctAttribute",
    )
)
add(
    scenario(
        "distinctAttribute impossible",
        slices=numa,
        claims=[claim("c", req(count=3), constraints=[distinct(f"{DRIVER}/numa")])],
        expect="unschedulable",
    )
)
add(
    scenario(
        "distinctAttribute compares with every earlier device",
        slices=[
            rslice(
                "s",
                [
                    device("a", attrs(numa=0)),
                    device("b", attrs(numa=1)),
                    device("c", attrs(numa=0)),
                    device("d", attrs(numa=2)),
                ],
            )
        ],
        claims=[claim("c", req("x", count=2), req("y"), constraints=[distinct(f"{DRIVER}/numa")])],
        devices=[["x=node-1/a", "x=node-1/b", "y=node-1/d"]],
        covers="§5.14 stack",
    )
)
add(
    scenario(
        "distinctAttribute lists must be disjoint",
        slices=[
            rslice(
                "s",
                [
                    device("a", attrs(links=[1, 2])),
                    device("b", attrs(links=[2, 3])),
                    device("c", attrs(links=[3, 4])),
                ],
            )
        ],
        claims=[claim("c", req(count=2), constraints=[distinct(f"{DRIVER}/links")])],
        devices=[["r=node-1/a", "r=node-1/c"]],
    )
)
add(
    scenario(
        "distinctAttribute missing attribute refuses",
        slices=[rslice("s", [device("a"), device("b", attrs(numa=1))])],
        claims=[claim("c", req(count=2), constraints=[distinct(f"{DRIVER}/numa")])],
        expect="unschedulable",
    )
)
add(
    scenario(
        "two constraints together",
        slices=[
            rslice(
                "s",
                [
                    device("a", attrs(numa=0, pci="x")),
                    device("b", attrs(numa=0, pci="x")),
                    device("c", attrs(numa=0, pci="y")),
                ],
            )
        ],
        claims=[
            claim(
                "c", req(count=2), constraints=[match(f"{DRIVER}/numa"), distinct(f"{DRIVER}/pci")]
            )
        ],
        devices=[["r=node-1/a", "r=node-1/c"]],
    )
)
add(
    scenario(
        "constraints are per claim",
        slices=numa,
        claims=[
            claim("a", req(), constraints=[match(f"{DRIVER}/numa")]),
            claim("b", req(), constraints=[match(f"{DRIVER}/numa")]),
        ],
        devices=[["r=node-1/a"], ["r=node-1/b"]],
    )
)
add(
    scenario(
        "matchAttribute with lists off compares scalars",
        features={"listTypeAttributes": False},
        slices=numa,
        claims=[claim("c", req(count=2), constraints=[match(f"{DRIVER}/numa")])],
        devices=[["r=node-1/a", "r=node-1/d"]],
    )
)
add(
    scenario(
        "matchAttribute bool values",
        slices=[
            rslice(
                "s",
                [
                    device("a", attrs(nv=True)),
                    device("b", attrs(nv=False)),
                    device("c", attrs(nv=False)),
                ],
            )
        ],
        claims=[claim("c", req(count=2), constraints=[match(f"{DRIVER}/nv")])],
        devices=[["r=node-1/b", "r=node-1/c"]],
    )
)

# ----------------------------------------------------------------------------- taints
tainted = [
    rslice(
        "s",
        [
            device("a", taints=[{"key": "broken", "effect": "NoSchedule"}]),
            device("b", taints=[{"key": "slow", "value": "yes", "effect": "NoExecute"}]),
            device("c", taints=[{"key": "info", "effect": "None"}]),
        ],
    )
]
add(
    scenario(
        "NoSchedule and NoExecute taints block",
        slices=tainted,
        claims=[claim("c", req())],
        devices=[["r=node-1/c"]],
        covers="§5.15 None ignored",
    )
)
add(
    scenario(
        "taints block all devices",
        slices=tainted,
        claims=[claim("c", req(count=2))],
        expect="unschedulable",
    )
)
add(
    scenario(
        "Exists toleration",
        slices=tainted,
        claims=[claim("c", req(count=2, tolerations=[{"key": "broken", "operator": "Exists"}]))],
        devices=[["r=node-1/a", "r=node-1/c"]],
        covers="toleration Exists",
        check={"tolerations": [{"key": "broken", "operator": "Exists"}]},
    )
)
add(
    scenario(
        "Equal toleration with value",
        slices=tainted,
        claims=[claim("c", req(count=2, tolerations=[{"key": "slow", "value": "yes"}]))],
        devices=[["r=node-1/b", "r=node-1/c"]],
        covers="§5.15 operator defaults to Equal",
    )
)
add(
    scenario(
        "Equal toleration with wrong value",
        slices=tainted,
        claims=[claim("c", req(count=2, tolerations=[{"key": "slow", "value": "no"}]))],
        expect="unschedulable",
    )
)
add(
    scenario(
        "toleration with other effect does not tolerate",
        slices=tainted,
        claims=[
            claim(
                "c",
                req(
                    count=2,
                    tolerations=[{"key": "broken", "operator": "Exists", "effect": "NoExecute"}],
                ),
            )
        ],
        expect="unschedulable",
    )
)
add(
    scenario(
        "empty key Exists tolerates everything",
        slices=tainted,
        claims=[claim("c", req(count=3, tolerations=[{"operator": "Exists"}]))],
        devices=[["r=node-1/a", "r=node-1/b", "r=node-1/c"]],
    )
)
add(
    scenario(
        "unknown taint effect is ignored",
        slices=[rslice("s", [device("a", taints=[{"key": "x", "effect": "Whatever"}])])],
        claims=[claim("c", req())],
        devices=[["r=node-1/a"]],
        covers="§5.15 unknown effect",
    )
)
add(
    scenario(
        "taints ignored with feature off",
        slices=tainted,
        features={"deviceTaints": False},
        claims=[claim("c", req(count=3))],
        devices=[["r=node-1/a", "r=node-1/b", "r=node-1/c"]],
    )
)
add(
    scenario(
        "subrequest tolerations apply",
        slices=tainted,
        claims=[
            claim(
                "c",
                first(
                    "r", sub("s", count=2, tolerations=[{"key": "broken", "operator": "Exists"}])
                ),
            )
        ],
        devices=[["r/s=node-1/a", "r/s=node-1/c"]],
    )
)

# ----------------------------------------------------------------------------- counters
part = [
    counter_slice("counters", {"mem": {"memory": "40Gi"}}),
    rslice(
        "devs",
        [
            device("full", consumesCounters=consumes("mem", memory="40Gi")),
            device("half-0", consumesCounters=consumes("mem", memory="20Gi")),
            device("half-1", consumesCounters=consumes("mem", memory="20Gi")),
        ],
        pool="node-1",
        count=2,
    ),
]
part[0]["spec"]["pool"]["resourceSliceCount"] = 2
add(
    scenario(
        "partition consumes shared counters",
        slices=part,
        claims=[claim("c", req())],
        devices=[["r=node-1/full"]],
        covers="counters",
    )
)
add(
    scenario(
        "counters prevent overlapping partitions",
        slices=part,
        claims=[claim("c", req(count=2))],
        devices=[["r=node-1/half-0", "r=node-1/half-1"]],
        covers="§5.16",
    )
)
add(
    scenario(
        "counters exhausted", slices=part, claims=[claim("c", req(count=3))], expect="unschedulable"
    )
)
add(
    scenario(
        "counters consumed by allocated devices",
        slices=part,
        allocated_claims=[allocated("o", result("half-0"))],
        claims=[claim("c", req())],
        devices=[["r=node-1/half-1"]],
        covers="§5.16 persisted",
    )
)
add(
    scenario(
        "counters consumed by allocated devices block full",
        slices=part,
        allocated_claims=[allocated("o", result("half-0"))],
        claims=[
            claim(
                "c", req("r", "gpu", 'device.attributes["gpu.example.com"].?index.orValue(9) == 9')
            )
        ],
        devices=[["r=node-1/half-1"]],
    )
)
add(
    scenario(
        "counters across claims in one call backtrack",
        slices=part,
        claims=[claim("a", req()), claim("b", req())],
        devices=[["r=node-1/half-0"], ["r=node-1/half-1"]],
        covers="§5.16 in-flight counters",
    )
)
add(
    scenario(
        "counters with partitionable off makes devices invisible",
        slices=part,
        features={"partitionableDevices": False},
        claims=[claim("c", req())],
        expect="unschedulable",
        covers="§5.24",
    )
)
add(
    scenario(
        "counters from a device slice not targeting this node",
        slices=[
            counter_slice(
                "counters",
                {"mem": {"memory": "40Gi"}},
                node=None,
                pool="shared",
                count=3,
                allNodes=True,
            ),
            rslice(
                "mine",
                [device("p0", consumesCounters=consumes("mem", memory="30Gi"))],
                pool="shared",
                count=3,
            ),
            rslice(
                "theirs",
                [device("p1", consumesCounters=consumes("mem", memory="30Gi"))],
                node="node-2",
                pool="shared",
                count=3,
            ),
        ],
        allocated_claims=[allocated("o", result("p1", pool="shared"))],
        claims=[claim("c", req())],
        expect="unschedulable",
        covers="§5.27 non-targeting",
    )
)
add(
    scenario(
        "two counter sets",
        slices=[
            counter_slice("cs", {"a": {"x": "2"}, "b": {"y": "1"}}, count=2),
            rslice(
                "d",
                [
                    device("d0", consumesCounters=consumes("a", x="1") + consumes("b", y="1")),
                    device("d1", consumesCounters=consumes("a", x="1")),
                ],
                pool="node-1",
                count=2,
            ),
        ],
        claims=[claim("c", req(count=2))],
        devices=[["r=node-1/d0", "r=node-1/d1"]],
    )
)
add(
    scenario(
        "second counter set exhausted",
        slices=[
            counter_slice("cs", {"a": {"x": "2"}, "b": {"y": "1"}}, count=2),
            rslice(
                "d",
                [
                    device("d0", consumesCounters=consumes("a", x="1") + consumes("b", y="1")),
                    device("d1", consumesCounters=consumes("b", y="1")),
                ],
                pool="node-1",
                count=2,
            ),
        ],
        claims=[claim("c", req(count=2))],
        expect="unschedulable",
    )
)
add(
    scenario(
        "duplicate counter set names make the pool invalid",
        slices=[
            counter_slice("cs1", {"a": {"x": "2"}}, count=3),
            counter_slice("cs2", {"a": {"x": "2"}}, count=3),
            rslice(
                "d", [device("d0", consumesCounters=consumes("a", x="1"))], pool="node-1", count=3
            ),
        ],
        claims=[claim("c", req())],
        expect="unschedulable",
    )
)
add(
    scenario(
        "counters released when a later candidate fails",
        slices=[
            counter_slice("cs", {"a": {"x": "2"}}, count=2),
            rslice(
                "d",
                [
                    device("d0", attrs(numa=0), consumesCounters=consumes("a", x="1")),
                    device("d1", attrs(numa=1), consumesCounters=consumes("a", x="1")),
                    device("d2", attrs(numa=1), consumesCounters=consumes("a", x="1")),
                ],
                pool="node-1",
                count=2,
            ),
        ],
        claims=[claim("c", req(count=2), constraints=[match(f"{DRIVER}/numa")])],
        devices=[["r=node-1/d1", "r=node-1/d2"]],
        covers="§5.16 undo on rejection",
    )
)


# ----------------------------------------------------------------------------- consumable capacity
def shared_dev(name: str = "nic", value: str = "10Gi", **policy: Any) -> dict[str, Any]:
    cap: dict[str, Any] = {"value": value}
    if policy:
        cap["requestPolicy"] = policy
    return device(name, allowMultipleAllocations=True, capacity={"bandwidth": cap})


def cap_req(amount: str, **kw: Any) -> dict[str, Any]:
    return req(capacity={"requests": {"bandwidth": amount}}, **kw)


add(
    scenario(
        "multi-allocatable device shared by two claims",
        slices=[rslice("s", [shared_dev()])],
        claims=[claim("a", cap_req("4Gi")), claim("b", cap_req("4Gi"))],
        devices=[["r=node-1/nic"], ["r=node-1/nic"]],
        check={"consumedCapacity": {"bandwidth": "4Gi"}, "shareID": True},
        covers="§5.20 shareID and consumedCapacity",
    )
)
add(
    scenario(
        "shared capacity exhausted",
        slices=[rslice("s", [shared_dev()])],
        claims=[claim("a", cap_req("6Gi")), claim("b", cap_req("6Gi"))],
        expect="unschedulable",
    )
)
add(
    scenario(
        "persisted consumption counts",
        slices=[rslice("s", [shared_dev()])],
        allocated_claims=[
            allocated(
                "o",
                result(
                    "nic",
                    shareID="11111111-1111-1111-1111-111111111111",
                    consumedCapacity={"bandwidth": "8Gi"},
                ),
            )
        ],
        claims=[claim("c", cap_req("4Gi"))],
        expect="unschedulable",
    )
)
add(
    scenario(
        "persisted consumption leaves room",
        slices=[rslice("s", [shared_dev()])],
        allocated_claims=[
            allocated(
                "o",
                result(
                    "nic",
                    shareID="11111111-1111-1111-1111-111111111111",
                    consumedCapacity={"bandwidth": "4Gi"},
                ),
            )
        ],
        claims=[claim("c", cap_req("4Gi"))],
        devices=[["r=node-1/nic"]],
    )
)
add(
    scenario(
        "no request consumes the whole capacity",
        slices=[rslice("s", [shared_dev()])],
        claims=[claim("a", req()), claim("b", req())],
        expect="unschedulable",
        covers="§5.18 full capacity default",
    )
)
add(
    scenario(
        "policy default used when not requested",
        slices=[rslice("s", [shared_dev(default="2Gi", validRange={"min": "1Gi"})])],
        claims=[claim("a", req()), claim("b", req())],
        devices=[["r=node-1/nic"], ["r=node-1/nic"]],
        check={"consumedCapacity": {"bandwidth": "2Gi"}},
        covers="§5.18 policy default",
    )
)
add(
    scenario(
        "request below min rounds up to min",
        slices=[rslice("s", [shared_dev(default="2Gi", validRange={"min": "1Gi"})])],
        claims=[claim("c", cap_req("100Mi"))],
        devices=[["r=node-1/nic"]],
        check={"consumedCapacity": {"bandwidth": "1Gi"}},
    )
)
add(
    scenario(
        "request rounds up to step",
        slices=[rslice("s", [shared_dev(default="1Gi", validRange={"min": "1Gi", "step": "1Gi"})])],
        claims=[claim("c", cap_req("1500Mi"))],
        devices=[["r=node-1/nic"]],
        check={"consumedCapacity": {"bandwidth": "2Gi"}},
        covers="§5.18 step rounding",
    )
)
add(
    scenario(
        "request above max does not fit",
        slices=[rslice("s", [shared_dev(default="1Gi", validRange={"min": "1Gi", "max": "4Gi"})])],
        claims=[claim("c", cap_req("5Gi"))],
        expect="unschedulable",
    )
)
add(
    scenario(
        "request rounds up to valid value",
        slices=[rslice("s", [shared_dev(default="1Gi", validValues=["1Gi", "4Gi", "8Gi"])])],
        claims=[claim("c", cap_req("3Gi"))],
        devices=[["r=node-1/nic"]],
        check={"consumedCapacity": {"bandwidth": "4Gi"}},
    )
)
add(
    scenario(
        "request above all valid values does not fit",
        slices=[rslice("s", [shared_dev(default="1Gi", validValues=["1Gi", "4Gi"])])],
        claims=[claim("c", cap_req("5Gi"))],
        expect="unschedulable",
    )
)
add(
    scenario(
        "requested capacity missing on device skips it",
        slices=[rslice("s", [shared_dev()])],
        claims=[claim("c", req(capacity={"requests": {"memory": "1Gi"}}))],
        expect="unschedulable",
        covers="§5.19",
    )
)
add(
    scenario(
        "capacity request on single-allocation device",
        slices=[rslice("s", [device("a", capacity={"memory": {"value": "8Gi"}})])],
        claims=[claim("c", req(capacity={"requests": {"memory": "4Gi"}}))],
        devices=[["r=node-1/a"]],
    )
)
add(
    scenario(
        "capacity request too big for single-allocation device",
        slices=[rslice("s", [device("a", capacity={"memory": {"value": "8Gi"}})])],
        claims=[claim("c", req(capacity={"requests": {"memory": "16Gi"}}))],
        expect="unschedulable",
    )
)
add(
    scenario(
        "capacity requests with feature off are fatal",
        slices=[rslice("s", [shared_dev()])],
        features={"consumableCapacity": False},
        claims=[claim("c", cap_req("1Gi"))],
        expect="error",
        covers="§5.24",
    )
)
add(
    scenario(
        "multi-allocatable device twice in one request not possible",
        slices=[rslice("s", [shared_dev()])],
        claims=[claim("c", cap_req("1Gi", count=2))],
        expect="unschedulable",
        covers="combination cursor",
    )
)
add(
    scenario(
        "multi-allocatable device for two requests of one claim",
        slices=[rslice("s", [shared_dev()])],
        claims=[
            claim(
                "c",
                req("a", capacity={"requests": {"bandwidth": "1Gi"}}),
                req("b", capacity={"requests": {"bandwidth": "1Gi"}}),
            )
        ],
        devices=[["a=node-1/nic", "b=node-1/nic"]],
    )
)
add(
    scenario(
        "distinctAttribute forces different shared devices",
        slices=[
            rslice(
                "s",
                [
                    dict(shared_dev("n0"), attributes=attrs(id=0)),
                    dict(shared_dev("n1"), attributes=attrs(id=1)),
                ],
            )
        ],
        claims=[
            claim(
                "c",
                req("a", capacity={"requests": {"bandwidth": "1Gi"}}),
                req("b", capacity={"requests": {"bandwidth": "1Gi"}}),
                constraints=[distinct(f"{DRIVER}/id")],
            )
        ],
        devices=[["a=node-1/n0", "b=node-1/n1"]],
    )
)
add(
    scenario(
        "shared device charges counters once",
        slices=[
            counter_slice("cs", {"a": {"x": "1"}}, count=2),
            rslice(
                "d",
                [dict(shared_dev("n0"), consumesCounters=consumes("a", x="1"))],
                pool="node-1",
                count=2,
            ),
        ],
        claims=[claim("a", cap_req("1Gi")), claim("b", cap_req("1Gi"))],
        devices=[["r=node-1/n0"], ["r=node-1/n0"]],
        covers="counters charged once",
    )
)
add(
    scenario(
        "multi-allocatable with feature off is dedicated",
        slices=[rslice("s", [device("nic", allowMultipleAllocations=True)])],
        features={"consumableCapacity": False},
        claims=[claim("a", req()), claim("b", req())],
        expect="unschedulable",
    )
)

# ----------------------------------------------------------------------------- binding conditions
bc_slices = [
    rslice(
        "bc",
        [
            device(
                "late",
                bindingConditions=["ready"],
                bindingFailureConditions=["failed"],
                bindsToNode=True,
            )
        ],
        node=None,
        pool="aaa-bc",
        allNodes=True,
    ),
    rslice("plain", gpus(1), pool="zzz"),
]
add(
    scenario(
        "pools with binding conditions are tried last",
        slices=bc_slices,
        claims=[claim("c", req())],
        devices=[["r=zzz/gpu-0"]],
        covers="binding conditions order",
    )
)
add(
    scenario(
        "binding conditions copied into results",
        slices=bc_slices,
        claims=[claim("c", req(count=2))],
        devices=[["r=zzz/gpu-0", "r=aaa-bc/late"]],
        check={
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {
                        "matchFields": [
                            {"key": "metadata.name", "operator": "In", "values": ["node-1"]}
                        ]
                    }
                ]
            }
        },
    )
)
add(
    scenario(
        "bindsToNode pins the claim to the node",
        slices=bc_slices[:1],
        claims=[claim("c", req())],
        devices=[["r=aaa-bc/late"]],
        check={
            "bindingConditions": ["ready"],
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {
                        "matchFields": [
                            {"key": "metadata.name", "operator": "In", "values": ["node-1"]}
                        ]
                    }
                ]
            },
        },
    )
)
add(
    scenario(
        "binding conditions with feature off make devices unusable",
        slices=bc_slices[:1],
        features={"deviceBindingConditions": False},
        claims=[claim("c", req())],
        expect="unschedulable",
        covers="§5.24",
    )
)

# ----------------------------------------------------------------------------- config
add(
    scenario(
        "class config marked FromClass",
        slices=GPU4,
        classes=[dclass("gpu", config=[opaque("class")])],
        claims=[claim("c", req())],
        devices=[["r=node-1/gpu-0"]],
        check={"config": [{"source": "FromClass", "opaque": opaque("class")}]},
        covers="§5.22 config covering every request has requests cleared",
    )
)
add(
    scenario(
        "class config lists the requests that use the class",
        slices=GPU4,
        classes=[dclass("gpu", config=[opaque("class")]), dclass("other")],
        claims=[claim("c", req("a"), req("b", cls="other"), req("d"))],
        devices=[["a=node-1/gpu-0", "b=node-1/gpu-1", "d=node-1/gpu-2"]],
        check={
            "config": [{"source": "FromClass", "requests": ["a", "d"], "opaque": opaque("class")}]
        },
    )
)
add(
    scenario(
        "claim config for all requests",
        slices=GPU4,
        claims=[claim("c", req("a"), config=[{"opaque": opaque("claim")}])],
        devices=[["a=node-1/gpu-0"]],
        check={"config": [{"source": "FromClaim", "opaque": opaque("claim")}]},
    )
)
add(
    scenario(
        "claim config naming one of two requests keeps its list",
        slices=GPU4,
        claims=[
            claim("c", req("a"), req("b"), config=[{"requests": ["b"], "opaque": opaque("b")}])
        ],
        devices=[["a=node-1/gpu-0", "b=node-1/gpu-1"]],
        check={"config": [{"source": "FromClaim", "requests": ["b"], "opaque": opaque("b")}]},
    )
)
add(
    scenario(
        "claim config naming every request is cleared",
        slices=GPU4,
        claims=[
            claim(
                "c", req("a"), req("b"), config=[{"requests": ["a", "b"], "opaque": opaque("ab")}]
            )
        ],
        devices=[["a=node-1/gpu-0", "b=node-1/gpu-1"]],
        check={"config": [{"source": "FromClaim", "opaque": opaque("ab")}]},
    )
)
add(
    scenario(
        "claim config for unselected subrequest is dropped",
        slices=GPU4,
        claims=[
            claim(
                "c",
                first("r", sub("big", count=8), sub("small")),
                config=[
                    {"requests": ["r/big"], "opaque": opaque("big")},
                    {"requests": ["r/small"], "opaque": opaque("small")},
                ],
            )
        ],
        devices=[["r/small=node-1/gpu-0"]],
        check={"config": [{"source": "FromClaim", "opaque": opaque("small")}]},
        covers="§5.22 subrequest filtering",
    )
)
add(
    scenario(
        "class config of the chosen subrequest's class",
        slices=GPU4,
        classes=[dclass("gpu", config=[opaque("gpu")]), dclass("big", config=[opaque("big")])],
        claims=[claim("c", first("r", sub("b", cls="big", count=8), sub("s")), req("x"))],
        devices=[["r/s=node-1/gpu-0", "x=node-1/gpu-1"]],
        check={"config": [{"source": "FromClass", "opaque": opaque("gpu")}]},
    )
)
add(
    scenario(
        "class config of an unchosen subrequest's class stays out",
        slices=GPU4,
        classes=[dclass("gpu"), dclass("big", config=[opaque("big")])],
        claims=[claim("c", first("r", sub("b", cls="big", count=8), sub("s")))],
        devices=[["r/s=node-1/gpu-0"]],
        check={"config": []},
    )
)
add(
    scenario(
        "class configs before claim configs",
        slices=GPU4,
        classes=[dclass("gpu", config=[opaque("c1"), opaque("c2")])],
        claims=[
            claim("c", req("a"), req("b"), config=[{"requests": ["a"], "opaque": opaque("claim")}])
        ],
        devices=[["a=node-1/gpu-0", "b=node-1/gpu-1"]],
        check={
            "config": [
                {"source": "FromClass", "opaque": opaque("c1")},
                {"source": "FromClass", "opaque": opaque("c2")},
                {"source": "FromClaim", "requests": ["a"], "opaque": opaque("claim")},
            ]
        },
    )
)

# ----------------------------------------------------------------------------- CEL
cel_dev = [
    rslice(
        "s",
        [
            device(
                "gpu-0",
                {
                    "model": {"string": "a100"},
                    "memory_gb": {"int": 80},
                    "nvlink": {"bool": True},
                    "driverVersion": {"version": "1.2.3"},
                    "numas": {"ints": [0, 1]},
                    "tags": {"strings": ["fast", "big"]},
                    "cidr": {"string": "10.0.0.0/8"},
                    "addr": {"string": "10.1.2.3"},
                    "url": {"string": "https://example.com:8443/a?b=c"},
                    "topo.example.io/pcie": {"string": "0000:3b"},
                },
                capacity={"memory": {"value": "80Gi"}},
            )
        ],
    )
]

CEL_TRUE = [
    ('device.driver == "gpu.example.com"', "driver"),
    ('device.attributes["gpu.example.com"].model == "a100"', "string attribute"),
    ('device.attributes["gpu.example.com"].memory_gb >= 40', "int attribute"),
    ('device.attributes["gpu.example.com"].nvlink', "bool attribute"),
    ('device.attributes["topo.example.io"].pcie.startsWith("0000")', "qualified attribute"),
    ('device.attributes["unknown.example.com"].size() == 0', "§5.11 unknown domain is empty"),
    ('!("x" in device.attributes["unknown.example.com"])', "unknown domain membership"),
    ('device.attributes["gpu.example.com"].?missing.orValue(7) == 7', "optional field"),
    ('!device.attributes["gpu.example.com"].?missing.hasValue()', "optional hasValue"),
    ('device.attributes["gpu.example.com"][?"model"].orValue("") == "a100"', "optional index"),
    ('has(device.attributes["gpu.example.com"].model)', "has()"),
    ('!has(device.attributes["gpu.example.com"].missing)', "has() false"),
    (
        'device.driver == "gpu.example.com" || device.attributes["gpu.example.com"].missing',
        "|| absorbs",
    ),
    (
        'device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) > 0',
        "quantity compareTo",
    ),
    ('device.capacity["gpu.example.com"].memory == quantity("81920Mi")', "quantity equality"),
    ('device.capacity["gpu.example.com"].memory.isGreaterThan(quantity("1Gi"))', "isGreaterThan"),
    ('quantity("1.5").isLessThan(quantity("2"))', "isLessThan"),
    ('quantity("1Ki").asInteger() == 1024', "asInteger"),
    ('quantity("500m").asApproximateFloat() == 0.5', "asApproximateFloat"),
    ('quantity("1Gi").add(quantity("1Gi")) == quantity("2Gi")', "quantity add"),
    ('quantity("1Gi").sub(1073741823) == quantity("1")', "quantity sub int"),
    ('sign(quantity("-1")) == -1', "quantity sign"),
    ('quantity("1.5").isInteger() == false', "isInteger"),
    ('isQuantity("1Gi") && !isQuantity("1GG")', "isQuantity"),
    ('device.attributes["gpu.example.com"].driverVersion.isGreaterThan(semver("1.2.0"))', "semver"),
    ('device.attributes["gpu.example.com"].driverVersion.major() == 1', "semver major"),
    ('device.attributes["gpu.example.com"].driverVersion.minor() == 2', "semver minor"),
    ('device.attributes["gpu.example.com"].driverVersion.patch() == 3', "semver patch"),
    ('semver("1.0.0-alpha").isLessThan(semver("1.0.0"))', "pre-release ordering"),
    ('semver("1.0.0+build") == semver("1.0.0")', "semver equality ignores build"),
    ('semver("v1.2", true) == semver("1.2.0")', "semver normalize"),
    ('isSemver("1.2.3") && !isSemver("1.2")', "isSemver"),
    ('device.attributes["gpu.example.com"].numas.includes(1)', "includes on list"),
    ('device.attributes["gpu.example.com"].model.includes("a100")', "includes on scalar"),
    ('device.attributes["gpu.example.com"].numas.sum() == 1', "lists sum"),
    ('device.attributes["gpu.example.com"].numas.max() == 1', "lists max"),
    ('device.attributes["gpu.example.com"].numas.min() == 0', "lists min"),
    ('device.attributes["gpu.example.com"].numas.isSorted()', "lists isSorted"),
    ('device.attributes["gpu.example.com"].tags.indexOf("big") == 1', "lists indexOf"),
    ("[1, 2, 1].lastIndexOf(1) == 2", "lists lastIndexOf"),
    ('device.attributes["gpu.example.com"].model.find("[0-9]+") == "100"', "regex find"),
    ('"a1b22".findAll("[0-9]+") == ["1", "22"]', "regex findAll"),
    ('device.attributes["gpu.example.com"].model.matches("^a[0-9]+$")', "matches"),
    ('device.attributes["gpu.example.com"].model.upperAscii() == "A100"', "strings upperAscii"),
    ('"A-B".lowerAscii() == "a-b"', "strings lowerAscii"),
    ('"a,b,c".split(",").size() == 3', "strings split"),
    ('["a", "b"].join("-") == "a-b"', "strings join"),
    ('"hello".charAt(1) == "e"', "strings charAt"),
    ('"hello".indexOf("l") == 2 && "hello".lastIndexOf("l") == 3', "strings indexOf"),
    ('"hello".substring(1, 3) == "el"', "strings substring"),
    ('"  x ".trim() == "x"', "strings trim"),
    ('"aaa".replace("a", "b", 2) == "bba"', "strings replace"),
    ('"%s-%d".format(["a", 1]) == "a-1"', "strings format"),
    ('strings.quote("a\\"b") == "\\"a\\\\\\"b\\""', "strings quote"),
    ('sets.contains(device.attributes["gpu.example.com"].tags, ["fast"])', "sets.contains"),
    ("sets.intersects([1, 2], [2, 3]) && sets.equivalent([1, 2], [2, 1])", "sets"),
    ("[[1], [2, 3]].flatten() == [1, 2, 3]", "lists flatten"),
    ("[1, 2, 3].slice(1, 2) == [2]", "lists slice"),
    ("lists.range(3) == [0, 1, 2]", "lists.range"),
    ("[1, 1, 2].distinct() == [1, 2]", "lists distinct"),
    ("[3, 1, 2].sort() == [1, 2, 3]", "lists sort"),
    ("[1, 2].reverse() == [2, 1]", "lists reverse"),
    (
        'cel.bind(a, device.attributes["gpu.example.com"], a.model == "a100" && a.memory_gb == 80)',
        "cel.bind",
    ),
    ('device.attributes["gpu.example.com"].tags.exists(t, t == "fast")', "exists macro"),
    ('device.attributes["gpu.example.com"].numas.all(n, n < 2)', "all macro"),
    ('device.attributes["gpu.example.com"].numas.map(n, n * 2) == [0, 2]', "map macro"),
    ('device.attributes["gpu.example.com"].numas.filter(n, n > 0) == [1]', "filter macro"),
    (
        'cidr(device.attributes["gpu.example.com"].cidr).containsIP(ip(device.attributes["gpu.example.com"].addr))',
        "cidr/ip",
    ),
    ('isIP("10.0.0.1") && !isIP("10.0.0.256") && isCIDR("10.0.0.0/8")', "isIP/isCIDR"),
    ('ip("10.0.0.1").family() == 4 && ip("::1").isLoopback()', "ip members"),
    (
        'url(device.attributes["gpu.example.com"].url).getHost() == "example.com:8443"',
        "url getHost",
    ),
    ('url("https://example.com:8443/a").getPort() == "8443"', "url getPort"),
    ('isURL("https://example.com") && !isURL("not a url")', "isURL"),
    ("device.allowMultipleAllocations == false", "allowMultipleAllocations"),
    ("1 < 1.5 && 2u > 1", "cross-type numeric comparison"),
    ("optional.of(1).orValue(2) == 1 && optional.none().orValue(3) == 3", "optional library"),
    ('!format.dns1123Label().validate("abc").hasValue()', "format dns1123Label"),
    ('format.named("uuid").value().validate("x").hasValue()', "format named"),
    ('!format.labelValue().validate("a.b_c").hasValue()', "format labelValue"),
]
for expr, what in CEL_TRUE:
    add(
        scenario(
            f"cel true: {what}",
            slices=cel_dev,
            claims=[claim("c", req("r", "gpu", expr))],
            devices=[["r=node-1/gpu-0"]],
            covers=f"CEL {what}",
        )
    )

CEL_FALSE = [
    ('device.attributes["gpu.example.com"].model == "h100"', "string mismatch"),
    ('device.capacity["gpu.example.com"].memory.isLessThan(quantity("1Gi"))', "quantity false"),
    ('device.attributes["unknown.example.com"].size() > 0', "unknown domain empty"),
    ('device.attributes["gpu.example.com"].numas.includes(5)', "includes false"),
    (
        'device.driver == "other" && device.attributes["gpu.example.com"].missing',
        "§5.11 && absorbs",
    ),
]
for expr, what in CEL_FALSE:
    add(
        scenario(
            f"cel false: {what}",
            slices=cel_dev,
            claims=[claim("c", req("r", "gpu", expr))],
            expect="unschedulable",
        )
    )

CEL_ERRORS = [
    ('device.attributes["gpu.example.com"].missing == 1', "§5.11 unknown id is fatal"),
    ('device.attributes["gpu.example.com"].model +', "syntax error"),
    ('device.attributes["gpu.example.com"].model', "non-bool result"),
    ('quantity("bad") == quantity("1")', "invalid quantity"),
    ('semver("1.2") == semver("1.2.0")', "invalid semver"),
    ("[].min() == 1", "min of empty list"),
    ("1 / 0 == 1", "division by zero"),
]
for expr, what in CEL_ERRORS:
    add(
        scenario(
            f"cel error: {what}",
            slices=cel_dev,
            claims=[claim("c", req("r", "gpu", expr))],
            expect="error",
            covers=f"CEL {what}",
        )
    )
add(
    scenario(
        "cel error in class selector is fatal",
        slices=cel_dev,
        classes=[dclass("gpu", 'device.attributes["gpu.example.com"].nope')],
        claims=[claim("c", req())],
        expect="error",
    )
)
add(
    scenario(
        "cel compile error only surfaces with a candidate",
        slices=[],
        claims=[claim("c", req("r", "gpu", "this is not cel"))],
        expect="unschedulable",
        covers="selectors compile lazily",
    )
)
add(
    scenario(
        "class selectors are evaluated before request selectors",
        slices=cel_dev,
        classes=[dclass("gpu", "false")],
        claims=[claim("c", req("r", "gpu", 'device.attributes["gpu.example.com"].nope'))],
        expect="unschedulable",
        covers="§5.10 selector order",
    )
)
add(
    scenario(
        "selector error on a device in use is not evaluated",
        slices=[rslice("s", gpus(1))],
        allocated_claims=[allocated("o", result("gpu-0"))],
        claims=[claim("c", req("r", "gpu", 'device.attributes["gpu.example.com"].nope'))],
        expect="unschedulable",
        covers="in-use check before selectors",
    )
)
add(
    scenario(
        "selector without cel is fatal",
        slices=GPU4,
        claims=[
            claim("c", {"name": "r", "exactly": {"deviceClassName": "gpu", "selectors": [{}]}})
        ],
        expect="error",
    )
)

# ----------------------------------------------------------------------------- misc
add(
    scenario(
        "devices of several pools combined",
        slices=[rslice("a", gpus(1, "a"), pool="pa"), rslice("b", gpus(1, "b"), pool="pb")],
        claims=[claim("c", req(count=2))],
        devices=[["r=pa/a-0", "r=pb/b-0"]],
    )
)
add(
    scenario(
        "devices of another driver with prefix in results",
        slices=[rslice("a", [device("x")], driver="net.example.com", pool="p")],
        classes=[dclass("net", 'device.driver == "net.example.com"', driver_selector=False)],
        claims=[claim("c", req(cls="net"))],
        devices=[["r=net.example.com:p/x"]],
    )
)
add(
    scenario(
        "combinations only within a request",
        slices=[
            rslice("s", [device("a", attrs(g=1)), device("b", attrs(g=2)), device("c", attrs(g=2))])
        ],
        claims=[claim("c", req(count=2), constraints=[match(f"{DRIVER}/g")])],
        devices=[["r=node-1/b", "r=node-1/c"]],
        covers="§5.9 combination cursor",
    )
)
add(
    scenario(
        "new request starts at the beginning",
        slices=GPU4,
        claims=[
            claim("c", req("a", "gpu", 'device.attributes["gpu.example.com"].index == 2'), req("b"))
        ],
        devices=[["a=node-1/gpu-2", "b=node-1/gpu-0"]],
        covers="§5.9",
    )
)
add(
    scenario(
        "skipNodeOperations slice unusable without the feature",
        slices=[rslice("s", gpus(1), skipNodeOperations=["*"])],
        claims=[claim("c", req())],
        expect="unschedulable",
    )
)
add(
    scenario(
        "unknown feature key is an invalid scenario",
        slices=GPU4,
        features={"teleportation": True},
        claims=[claim("c", req())],
        expect="error",
    )
)
add(
    scenario(
        "tolerations copied to results",
        slices=GPU4,
        claims=[claim("c", req(tolerations=[{"key": "k", "operator": "Exists"}]))],
        devices=[["r=node-1/gpu-0"]],
        check={"tolerations": [{"key": "k", "operator": "Exists"}]},
    )
)
add(
    scenario(
        "class with every device but request wants a model",
        slices=[
            rslice(
                "s",
                [
                    device("a", attrs(model="x")),
                    device("b", attrs(model="x")),
                    device("c", attrs(model="y")),
                ],
            )
        ],
        claims=[
            claim(
                "c",
                req("r", "gpu", 'device.attributes["gpu.example.com"].model == "x"', count=2),
                req("s"),
            )
        ],
        devices=[["r=node-1/a", "r=node-1/b", "s=node-1/c"]],
    )
)
add(
    scenario(
        "exhaustive search finds the only solution",
        slices=[rslice("s", [device(f"d{i}", attrs(g=i // 3)) for i in range(9)])],
        claims=[
            claim("c", req(count=3), constraints=[match(f"{DRIVER}/g")]),
            claim("d", req(count=3), constraints=[match(f"{DRIVER}/g")]),
            claim("e", req(count=3), constraints=[match(f"{DRIVER}/g")]),
        ],
        devices=[
            ["r=node-1/d0", "r=node-1/d1", "r=node-1/d2"],
            ["r=node-1/d3", "r=node-1/d4", "r=node-1/d5"],
            ["r=node-1/d6", "r=node-1/d7", "r=node-1/d8"],
        ],
    )
)

NAMES = [c["name"] for c in CASES]
assert len(NAMES) == len(set(NAMES)), "contract case names must be unique"
