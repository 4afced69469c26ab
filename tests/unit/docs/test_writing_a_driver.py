"""The one-file driver in docs/writing-a-driver.md loads, publishes and prepares."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import drakit.plugin
from node_plugin.backends.base import BackendConfigError, ClaimToPrepare, DeviceToPrepare
from node_plugin.backends.registry import load_backend

DOC = Path(__file__).parents[3] / "docs" / "writing-a-driver.md"


@pytest.fixture
def driver_module(tmp_path: Path) -> Iterator[str]:
    code = re.search(r"```python\n(.*?)```", DOC.read_text(), re.S)
    assert code is not None, "the doc has no python example"
    (tmp_path / "fpga_driver.py").write_text(code.group(1))
    sys.path.insert(0, str(tmp_path))  # what PYTHONPATH does for a real driver
    yield "fpga_driver:FpgaBackend"
    sys.path.remove(str(tmp_path))
    sys.modules.pop("fpga_driver", None)


def test_the_documented_driver_publishes_two_fpgas_and_prepares_with_its_config(
    driver_module: str,
) -> None:
    backend = load_backend(driver_module, driver_name="fpga.example.com", node_name="n1")
    (pool,) = backend.discover()
    assert [d.name for d in pool.devices] == ["fpga-0", "fpga-1"]
    config = backend.config_model.model_validate({"bitstream": "crypto"})
    claim = ClaimToPrepare("u1", "ns", "c", (DeviceToPrepare("fpga", "n1", "fpga-1", config),))
    prepared = backend.prepare(claim)
    assert prepared.device_edits[0].env == ("FPGA_BITSTREAM=crypto",)
    assert prepared.device_edits[0].device_nodes[0].path == "/dev/fpga1"
    backend.unprepare("u1", prepared.state)
    backend.unprepare("never-prepared", {})


def test_a_backend_whose_discover_returns_dicts_is_one_clear_error(tmp_path: Path) -> None:
    (tmp_path / "dict_driver.py").write_text(
        "from drakit.plugin import BackendBase, PoolDescription\n"
        "class Bad(BackendBase):\n"
        "    name = 'bad'\n"
        "    def discover(self):\n"
        "        return (PoolDescription('p', ({'name': 'gpu-0'},)),)\n"
        "    def prepare(self, claim): ...\n"
        "    def unprepare(self, uid, state): ...\n"
    )
    sys.path.insert(0, str(tmp_path))
    try:
        with pytest.raises(BackendConfigError) as err:
            load_backend("dict_driver:Bad", driver_name="d.example.com", node_name="n1")
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("dict_driver", None)
    assert "pool 'p': devices[0] is dict, not allocator.model.Device" in str(err.value)


def test_the_public_api_lists_every_name_it_exports_in_order() -> None:
    exported = drakit.plugin.__all__
    assert exported == sorted(exported)
    assert all(hasattr(drakit.plugin, name) for name in exported)
