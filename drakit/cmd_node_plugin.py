"""``drakit node-plugin``: run the kubelet plugin on this node."""

from __future__ import annotations

import argparse
import sys


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "node-plugin",
        help="run the kubelet plugin on this node",
        description="run the kubelet plugin on this node.",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    print("drakit node-plugin: not available in this build yet", file=sys.stderr)
    return 2
