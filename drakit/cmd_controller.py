"""``drakit controller``: run the companion controller."""

from __future__ import annotations

import argparse
import sys


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "controller",
        help="run the companion controller",
        description="run the companion controller.",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    print("drakit controller: not available in this build yet", file=sys.stderr)
    return 2
