"""The guide's FPGA driver (docs/examples/fpga_driver.py, the first example of
docs/writing-a-driver.md verbatim) tested as a driver author would: through drakit.testing,
as ``drakit node-plugin`` under the kubelet's real DRA manager and a real apiserver."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from drakit.testing import Allocated, HarnessNode, StartPlugin, allocate, claim, opaque_config, pod

DRIVER = "fpga.example.com"
EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"


@pytest.fixture
def fpga_backend() -> Iterator[type]:
    """The guide's backend class, imported from the file the guide shows."""
    sys.path.insert(0, str(EXAMPLES))
    try:
        import fpga_driver  # noqa: PLC0415

        yield fpga_driver.FpgaBackend
    finally:
        sys.path.remove(str(EXAMPLES))
        sys.modules.pop("fpga_driver", None)


def test_two_claims_of_the_guide_driver_in_one_container_give_each_fpga_its_own_bitstream(
    drakit_api: Any,
    drakit_namespace: str,
    drakit_node: HarnessNode,
    drakit_plugin: StartPlugin,
    fpga_backend: type,
) -> None:
    drakit_plugin(fpga_backend, DRIVER)
    claims = [
        (
            claim(name, DRIVER, config=[opaque_config(DRIVER, {"bitstream": bitstream})]),
            [Allocated(drakit_node.name, device)],
        )
        for name, device, bitstream in (("a", "fpga-0", "crypto"), ("b", "fpga-1", "video"))
    ]
    allocate(
        drakit_api, drakit_namespace, pod("p", drakit_node.name, ["a", "b"]), claims, driver=DRIVER
    )

    prepared = drakit_node.wait_prepared(drakit_namespace, "p")
    ids = prepared["containers"]["main"]
    assert len(ids) == 2
    env = drakit_node.container_env(ids)
    assert sorted(e for e in env if e.startswith("FPGA_")) == [
        "FPGA_0_BITSTREAM=crypto",
        "FPGA_1_BITSTREAM=video",
    ]
    assert sorted(drakit_node.container_device_nodes(ids)) == ["/dev/fpga0", "/dev/fpga1"]
