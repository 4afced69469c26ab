"""``drakit allocate``: allocate claims offline from YAML/JSON files."""

from __future__ import annotations

import argparse
import sys


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "allocate",
        help="allocate claims offline from YAML/JSON files",
        description="allocate claims offline from YAML/JSON files.",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    print("drakit allocate: not available in this build yet", file=sys.stderr)
    return 2
