"""The soak's command line (``python -m soak``, ``make soak``)."""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path

from soak.faults import KINDS, REAL_KINDS, plan
from soak.stack import node_names

DESCRIPTION = """\
Run drakit's chaos soak: a real control plane (etcd, kube-apiserver, kube-scheduler,
kube-controller-manager), two leader-elected drakit controller replicas and simulated nodes
(kubelet harness + node plugin) and, with --real-node, a real node, each component behind
a TCP chaos proxy of its own. A
seeded workload churns pods while a seeded fault schedule kills, pauses and cuts off
components and compacts etcd; an independent checker asserts the invariants every second,
then liveness once the faults stopped, then the quiet-state invariants.

The last line is the summary: pods churned, faults injected by kind, N violations. The
exit code is 1 when anything was violated (a reproduction folder is saved and named), 2 on
bad arguments or a stack that did not start, 0 otherwise. The same --seed and --duration
replay the same fault schedule (--print-schedule shows it without running anything).
"""

EPILOG = (
    """\
examples:
  make soak DURATION=30m SEED=7
  python -m soak --duration 3m --seed 1 --print-schedule
  make soak DURATION=10m SEED=5 SOAK_ARGS=--real-node
fault kinds: """
    + ", ".join(k for k, _ in KINDS)
    + "; with --real-node also "
    + ", ".join(k for k, _ in REAL_KINDS if k != "proxy")
)


def parse_duration(text: str) -> float:
    """``90``, ``90s``, ``5m``, ``1h`` -> seconds; ValueError naming the text otherwise."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", text)
    if not match:
        raise argparse.ArgumentTypeError(
            f"duration {text!r}: expected a number of seconds, or a number with s, m or h"
        )
    value = float(match.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[match.group(2)]
    if not 10 <= value <= 24 * 3600:
        raise argparse.ArgumentTypeError(f"duration {text!r}: must be between 10s and 24h")
    return value


def _positive(kind: type[int] | type[float], low: float, high: float) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a {kind.__name__}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{text!r} must be between {low:g} and {high:g}")
        return value

    return parse


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m soak",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--duration",
        type=parse_duration,
        default=parse_duration("3m"),
        help="how long pods churn and faults fire, e.g. 90s, 30m (default: 3m); "
        "liveness and clean-up checks follow",
    )
    p.add_argument(
        "--seed",
        type=_positive(int, 0, 2**31),
        default=1,
        help="picks the workload and the fault schedule (default: 1)",
    )
    p.add_argument(
        "--nodes",
        type=_positive(int, 2, 6),
        default=3,
        help="simulated nodes, 2-6; soak-a/b take kube-scheduler's pods, the "
        "others drakit's (default: 3)",
    )
    p.add_argument(
        "--fault-interval",
        type=_positive(float, 2, 3600),
        default=15.0,
        help="mean seconds between two faults (default: 15)",
    )
    p.add_argument(
        "--real-node",
        action="store_true",
        help="also run a real node (containerd, runc, the real kubelet and the Helm chart's "
        "plugin DaemonSet; root only, one per machine: waits while another runs) with pods "
        "of both schedulers and faults of its own: plugin container, kubelet and containerd "
        "SIGKILLed, rolling updates of the DaemonSet, proxy faults",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="folder for reproduction folders of failed runs (default: $TMPDIR/drakit-soak)",
    )
    p.add_argument(
        "--print-schedule",
        action="store_true",
        help="print the fault schedule for --seed/--duration and exit",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.print_schedule:
        nodes = node_names(args.nodes)
        schedule = plan(
            args.seed, args.duration, nodes, args.fault_interval, real_node=args.real_node
        )
        for fault in schedule:
            print(fault.describe())
        return 0
    if args.real_node and os.geteuid() != 0:
        print(
            "soak: --real-node needs root (the kubelet, containerd and runc manage cgroups "
            "and mounts)",
            file=sys.stderr,
        )
        return 2
    from drakit.demo.real_node import RealNodeError  # noqa: PLC0415
    from drakit.localcluster.assets import MissingBinaryError  # noqa: PLC0415
    from drakit.localcluster.process import StartError  # noqa: PLC0415
    from soak.run import SoakOptions, exit_code, run  # noqa: PLC0415

    options = SoakOptions(
        seed=args.seed,
        duration=args.duration,
        nodes=args.nodes,
        fault_interval=args.fault_interval,
        real_node=args.real_node,
        out_dir=args.out,
        log=lambda line: print(line, flush=True),
    )
    try:
        result = run(options)
    except (StartError, RealNodeError, MissingBinaryError) as err:
        print(f"soak: the stack did not start: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("soak: interrupted; everything it started was stopped", file=sys.stderr)
        return 130
    if result.repro_dir is not None:
        print(f"soak: reproduction saved in {result.repro_dir}")
    print(result.summary_line())
    return exit_code(result)
