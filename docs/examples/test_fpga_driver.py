"""Tests of the guide's FPGA driver with drakit's test kit (docs/writing-a-driver.md, "Test it").

Run from the folder holding fpga_driver.py, with `pytest_plugins = ["drakit.testing"]` in
its conftest.py.
"""

from __future__ import annotations

import pytest
from fpga_driver import FpgaBackend

from drakit.testing import (
    Allocated,
    HarnessNode,
    InvalidConfigError,
    KubeAPI,
    StartPlugin,
    admission_verdict,
    allocate,
    claim,
    eventually,
    opaque_config,
    pod,
    validate_config,
)

DRIVER = "fpga.example.com"


def test_a_claim_gets_its_fpga_and_bitstream(
    drakit_api: KubeAPI, drakit_namespace: str, drakit_node: HarnessNode, drakit_plugin: StartPlugin
) -> None:
    drakit_plugin(FpgaBackend, DRIVER)
    node = drakit_node.name
    devices = eventually(lambda: drakit_api.published_devices(DRIVER, node), "FPGAs published")
    assert devices["fpga-1"]["attributes"]["family"] == {"string": "agilex"}

    config = opaque_config(DRIVER, {"bitstream": "crypto"})
    claims = [(claim("a", DRIVER, config=[config]), [Allocated(node, "fpga-1")])]
    allocate(drakit_api, drakit_namespace, pod("p", node, ["a"]), claims, driver=DRIVER)
    ids = drakit_node.wait_prepared(drakit_namespace, "p")["containers"]["main"]
    container = drakit_node.container(ids)  # what the runtime gives the container
    assert container.environ["FPGA_1_BITSTREAM"] == "crypto"
    assert container.device_nodes == ("/dev/fpga1",)


def test_a_config_with_a_misspelt_field_is_refused_naming_it() -> None:
    assert validate_config(FpgaBackend, {"bitstream": "crypto"}).bitstream == "crypto"
    with pytest.raises(InvalidConfigError, match="bitstreem: Extra inputs are not permitted"):
        validate_config(FpgaBackend, {"bitstreem": "crypto"})
    bad = claim("b", DRIVER, config=[opaque_config(DRIVER, {"bitstream": 7})])
    bad["metadata"]["namespace"] = "ns"
    assert admission_verdict(FpgaBackend, DRIVER, bad) == (
        "ResourceClaim ns/b: 1 opaque config(s) of driver fpga.example.com are invalid: "
        "spec.devices.config[0].opaque.parameters: bitstream: Input should be a valid string"
    )
