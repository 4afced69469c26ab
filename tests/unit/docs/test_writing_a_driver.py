"""The drivers in docs/writing-a-driver.md and the README load, publish and prepare."""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import drakit.plugin
from drakit.node_plugin.backend_loader import load_backend
from drakit.plugin import (
    BackendConfigError,
    BackendError,
    ClaimRef,
    ClaimToPrepare,
    DeviceToPrepare,
    RequestContext,
)

DOC = Path(__file__).parents[3] / "docs" / "writing-a-driver.md"
#: The guide's example as a file, which the integration test runs through drakit.testing
#: (tests/integration/test_guide_fpga_driver.py).
EXAMPLE = Path(__file__).parents[3] / "docs" / "examples" / "fpga_driver.py"
README = Path(__file__).parents[3] / "README.md"


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
    context = RequestContext("r1", deadline=time.monotonic() + 45)
    prepared = backend.prepare(claim, context)
    assert prepared.device_edits[0].env == ("FPGA_1_BITSTREAM=crypto",)
    assert prepared.device_edits[0].device_nodes[0].path == "/dev/fpga1"
    backend.unprepare(claim.ref, prepared.state, context)
    backend.unprepare(ClaimRef("ns", "never-prepared", "c2"), {}, context)


def test_the_guide_example_file_is_the_guides_snippet_verbatim() -> None:
    code = re.search(r"```python\n(.*?)```", DOC.read_text(), re.S)
    assert code is not None, "the doc has no python example"
    assert code.group(1) == EXAMPLE.read_text(), (
        f"{EXAMPLE} and the first python block of {DOC} differ: change both together"
    )


def test_the_documented_driver_refuses_a_prepare_it_cannot_finish_before_the_deadline(
    driver_module: str,
) -> None:
    backend = load_backend(driver_module, driver_name="fpga.example.com", node_name="n1")
    claim = ClaimToPrepare("u1", "ns", "c", (DeviceToPrepare("fpga", "n1", "fpga-0"),))
    with pytest.raises(BackendError, match=r"fpga-0: .* s left, loading takes 5 s"):
        backend.prepare(claim, RequestContext("r1", deadline=time.monotonic() + 1))


def test_the_readme_driver_publishes_and_prepares(tmp_path: Path) -> None:
    code = re.search(r"```python\n(from typing import ClassVar.*?)```", README.read_text(), re.S)
    assert code is not None, "the README has no driver example"
    (tmp_path / "readme_driver.py").write_text(code.group(1))
    sys.path.insert(0, str(tmp_path))
    try:
        backend = load_backend("readme_driver:MyBackend", driver_name="acc.example.com",
                               node_name="n1")  # fmt: skip
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("readme_driver", None)
    (pool,) = backend.discover()
    assert [d.name for d in pool.devices] == ["acc-0"]
    config = backend.config_model.model_validate({"mode": "turbo"})
    claim = ClaimToPrepare("u1", "ns", "c", (DeviceToPrepare("acc", "n1", "acc-0", config),))
    prepared = backend.prepare(claim, RequestContext("r1"))
    assert prepared.device_edits[0].env == ("ACC_MODE=turbo",)
    backend.unprepare(claim.ref, prepared.state, RequestContext("r2"))


def test_a_backend_whose_discover_returns_dicts_is_one_clear_error(tmp_path: Path) -> None:
    (tmp_path / "dict_driver.py").write_text(
        "from drakit.plugin import BackendBase, PoolDescription\n"
        "class Bad(BackendBase):\n"
        "    name = 'bad'\n"
        "    def discover(self):\n"
        "        return (PoolDescription('p', ({'name': 'gpu-0'},)),)\n"
        "    def prepare(self, claim, context): ...\n"
        "    def unprepare(self, claim, state, context): ...\n"
    )
    sys.path.insert(0, str(tmp_path))
    try:
        with pytest.raises(BackendConfigError) as err:
            load_backend("dict_driver:Bad", driver_name="d.example.com", node_name="n1")
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("dict_driver", None)
    assert "pool 'p': devices[0] is dict, not drakit.plugin.Device" in str(err.value)


def test_the_public_api_lists_every_name_it_exports_in_order() -> None:
    exported = drakit.plugin.__all__
    # ruff's order (RUF022): constants, then classes, then functions and modules, each sorted
    kinds = [0 if name.isupper() else 1 if name[0].isupper() else 2 for name in exported]
    assert exported == [name for _, name in sorted(zip(kinds, exported, strict=True))]
    assert all(hasattr(drakit.plugin, name) for name in exported)
