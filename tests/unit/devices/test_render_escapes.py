"""``drakit devices`` prints other people's strings: no control character of any kind, in any
field, in any output format, reaches the terminal, and no value can add a line of its own."""

from __future__ import annotations

import json
import unicodedata

import pytest
import yaml

from drakit.allocator.quantity import Quantity
from drakit.allocator.usage import CapacityUse, DeviceUsage, Holder, PoolSummary, UsageView
from drakit.devices.render import render
from drakit.devices.view import Rendered

HOSTILE = {
    "CSI": "\x1b[2K\x1b[1Aowned\x1b[0m",
    "OSC title": "\x1b]0;pwned\x07",
    "OSC 8 link": "\x1b]8;;https://evil.example\x1b\\x\x1b]8;;\x1b\\",
    "OSC 52 unterminated": "\x1b]52;c;Y3VybCBldmls",
    "8-bit CSI and OSC": "\x9b2J\x9d0;t\x9c",
    "DCS": "\x1bPq\x1b\\",
    "C0": "a\x00\x07\x08b",
    "CR": "ok\rEVIL",
    "newline": "x\nnode-z   fake-driver   fake-row",
    "DEL and C1": "a\x7f\x85\x9fb",
    "bidi": "abc\u202egnp\u2066x\u2069",
    "zero width and tags": "gpu\u200b\ufeff\U000e0041",
    "separators": "a\u2028b\u2029c",
    "lone surrogate": "a\udc80b",
}
FORMATS = ("table", "wide", "json", "yaml")


def _controls(text: str) -> list[str]:
    return [
        hex(ord(c))
        for c in text
        if c != "\n" and unicodedata.category(c) in ("Cc", "Cf", "Cs", "Zl", "Zp")
    ]


def _rendered(bad: str) -> Rendered:
    q = Quantity.parse("1")
    holder = Holder(
        namespace=f"ns{bad}",
        name=f"claim{bad}",
        pods=(f"pod{bad}",),
        admin_access=False,
        share_id=f"share{bad}",
        consumed={f"mem{bad}": q},
    )
    device = DeviceUsage(
        node=f"node{bad}",
        driver=f"driver{bad}",
        pool=f"pool{bad}",
        device=f"gpu{bad}",
        state="shared",
        holders=(holder,),
        taints=(f"key=value{bad}:NoSchedule",),
        blocked=False,
        capacity=(CapacityUse(f"memory{bad}", q, q),),
        counters=((f"set/counter{bad}", q),),
        slice=f"slice{bad}",
    )
    pool = PoolSummary(
        node=f"node{bad}",
        driver=f"driver{bad}",
        pool=f"pool{bad}",
        total=1,
        allocated=1,
        tainted=0,
        free=0,
        unknown=0,
        counters=(CapacityUse(f"set/c{bad}", q, q),),
        capacity=(CapacityUse(f"cap{bad}", q, q),),
        slices=1,
        incomplete=False,
    )
    notes = (f"skipped ResourceClaim ns/x: spec: {bad!s} is not valid", f"Event: {bad}")
    return Rendered(UsageView((device,), (pool,)), notes)


@pytest.mark.parametrize("output", FORMATS)
@pytest.mark.parametrize("summary", [False, True], ids=["devices", "summary"])
@pytest.mark.parametrize("bad", HOSTILE.values(), ids=HOSTILE.keys())
def test_no_control_character_reaches_the_output(bad: str, summary: bool, output: str) -> None:
    text = render(_rendered(bad), summary=summary, output=output)
    assert _controls(text) == []
    text.encode("utf-8")  # a lone surrogate would make print() raise
    if output == "json":
        json.loads(text)
    elif output == "yaml":
        yaml.safe_load(text)
    else:
        # One header, one row, two notes: a newline in a value made no line of its own.
        assert len(text.splitlines()) == 4


@pytest.mark.parametrize("bad", HOSTILE.values(), ids=HOSTILE.keys())
def test_no_control_character_of_a_node_view_reaches_the_output(bad: str) -> None:
    from drakit.devices.nodeview import NodeViews, parse_view  # noqa: PLC0415
    from drakit.devices.render import render_node_views  # noqa: PLC0415

    doc = {
        "node": f"node-a{bad}",
        "driver": f"gpu{bad}",
        "checkedAt": bad,
        "error": f"kubelet said {bad}",
        "claims": [
            {
                "namespace": f"ns{bad}",
                "name": f"c{bad}",
                "prepared": bad,
                "devices": [f"d{bad}"],
                "containers": [{"pod": f"p{bad}", "container": bad, "devices": [bad]}],
            },
            {"namespace": "ns", "name": "no-containers", "devices": [bad]},
        ],
        "findings": [
            {
                "kind": bad,
                "claim": bad,
                "pods": [bad],
                "devices": [bad],
                "seconds": bad,
                "detail": bad,
            },
        ],
    }
    view = parse_view(doc, f"pod{bad}")
    assert view is not None
    text = render_node_views(NodeViews((view,), (f"node view: pod x: {bad}",)))
    assert _controls(text) == []
    # title, header, two rows, error, finding, note (the leading blank line aside)
    assert len(text.strip("\n").splitlines()) == 7
