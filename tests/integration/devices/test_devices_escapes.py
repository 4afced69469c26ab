"""``drakit devices`` against the real apiserver never prints a terminal control sequence
that someone else stored in the cluster: a claim's ``status.reservedFor`` name is free text
to the apiserver (it only requires it to be non-empty), and the node view is another
program's answer."""

from __future__ import annotations

import unicodedata
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from helpers.nodeviews import serving_view, view

from drakit.cli import main
from drakit.kubeapi.client import RateLimitedApiClient
from drakit.kubeapi.resources import RESOURCE_CLAIMS, RESOURCE_SLICES, Resource
from drakit.localcluster import LocalCluster

pytestmark = pytest.mark.integration

# One of each: CSI that erases the line above, an OSC title write, an OSC 8 link, an 8-bit
# CSI, a bidi override, a carriage return and a newline that would forge a row.
HOSTILE = (
    "pod\x1b[1A\x1b[2K-a"
    "\x1b]0;owned\x07"
    "\x1b]8;;https://evil.example\x1b\\x\x1b]8;;\x1b\\"
    "\x9b2J"
    "\u202egnp"
    "\rEVIL"
    "\nnode-z   fake-driver   fake-pool   gpu-9   free"
)


def _controls(text: str) -> list[str]:
    return [
        hex(ord(c))
        for c in text
        if c != "\n" and unicodedata.category(c) in ("Cc", "Cf", "Cs", "Zl", "Zp")
    ]


@pytest.fixture
def hostile_claim(admin_api: RateLimitedApiClient, namespace: str) -> Iterator[str]:
    """A device of a fresh driver on node ``esc-node``, allocated to a claim reserved for a
    "pod" whose name is :data:`HOSTILE`; yields the driver."""
    driver = f"esc-{uuid.uuid4().hex[:6]}.example.com"
    slices = Resource(admin_api, RESOURCE_SLICES)
    created = slices.create(
        {
            "metadata": {"name": driver},
            "spec": {
                "driver": driver,
                "nodeName": "esc-node",
                "pool": {"name": "esc-node", "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": "gpu-0", "attributes": {"note": {"string": "x\x1b[5m"}}}],
            },
        }
    )
    claims = Resource(admin_api, RESOURCE_CLAIMS)
    claim = claims.create(
        {
            "metadata": {"name": "esc", "namespace": namespace},
            "spec": {
                "devices": {"requests": [{"name": "req", "exactly": {"deviceClassName": "any"}}]}
            },
        }
    )
    result = {"request": "req", "driver": driver, "pool": "esc-node", "device": "gpu-0"}
    claim["status"] = {
        "allocation": {"devices": {"results": [result]}},
        "reservedFor": [{"resource": "pods", "name": HOSTILE, "uid": str(uuid.uuid4())}],
    }
    stored = claims.update_status(claim)
    assert stored["status"]["reservedFor"][0]["name"] == HOSTILE  # the apiserver kept it
    yield driver
    claims.delete("esc", namespace)
    slices.delete(created["metadata"]["name"])


@pytest.mark.parametrize(
    "extra",
    [[], ["-o", "wide"], ["-o", "json"], ["-o", "yaml"], ["--summary"]],
    ids=["table", "wide", "json", "yaml", "summary"],
)
def test_a_hostile_pod_name_in_a_claim_reaches_no_output_raw(
    cluster: LocalCluster,
    hostile_claim: str,
    capsys: pytest.CaptureFixture[str],
    extra: list[str],
) -> None:
    args = ["devices", "--kubeconfig", cluster.kubeconfig, "--driver", hostile_claim]
    assert main([*args, *extra]) == 0
    captured = capsys.readouterr()
    assert _controls(captured.out) == []
    assert _controls(captured.err) == []
    if not extra or extra == ["-o", "wide"]:
        lines = captured.out.splitlines()
        assert len(lines) == 2  # the header and the one device: no forged row
        assert "pod?" in lines[1]  # the name is shown, marked where it was tampered with


def test_a_hostile_node_view_reaches_no_output_raw(
    cluster: LocalCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    document: dict[str, Any] = view("esc-node", f"claim{HOSTILE}", detail=HOSTILE)
    document["error"] = HOSTILE
    document["claims"][0]["containers"][0]["pod"] = HOSTILE
    with serving_view("127.0.0.1", document) as port:
        args = ["devices", "--kubeconfig", cluster.kubeconfig, "--node", "esc-node"]
        assert main([*args, "--node-view-url", f"http://127.0.0.1:{port}"]) == 0
    out = capsys.readouterr().out
    assert _controls(out) == []
    assert "fake-driver" not in [line.split("   ")[0] for line in out.splitlines()]
    view_lines = out[out.index("Node view of") :].splitlines()
    assert len(view_lines) == 5  # title, header, one row, error, one finding
