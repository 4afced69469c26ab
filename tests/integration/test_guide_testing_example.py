"""The guide's tests of its FPGA driver (docs/examples/test_fpga_driver.py, shown in
docs/writing-a-driver.md, "Test it") run as written, with drakit.testing's fixtures: pytest
collects the functions imported here as this module's tests."""

from __future__ import annotations

import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"
# The guide's folder, as on a driver's PYTHONPATH: fpga_driver.py and its tests.
if str(EXAMPLES) not in sys.path:
    sys.path.append(str(EXAMPLES))

from test_fpga_driver import (  # noqa: E402
    test_a_claim_gets_its_fpga_and_bitstream,
    test_a_config_with_a_misspelt_field_is_refused_naming_it,
)

__all__ = [
    "test_a_claim_gets_its_fpga_and_bitstream",
    "test_a_config_with_a_misspelt_field_is_refused_naming_it",
]
