"""``drakit node-plugin`` with the in-memory core of ``fake_core.py`` (run as a subprocess).

The flags, validation, logging and signal handling are the real command's; only the wiring
is replaced, through the same constructor argument in-process tests use.
"""

from __future__ import annotations

import sys

from fake_core import build_fake_parts

from drakit.cli import build_parser
from drakit.cli.node_plugin import run

if __name__ == "__main__":
    sys.exit(run(build_parser().parse_args(sys.argv[1:]), build=build_fake_parts))
