"""The ``drakit`` console script: one entry point, one subcommand per program.

Each subcommand lives in its own module and registers its flags through
``add_parser``; this module only dispatches. Subcommand modules import their
heavy dependencies (gRPC, the Kubernetes client) inside ``run`` so that
``drakit --help`` and ``drakit version`` stay fast.
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys
import threading
from collections.abc import Sequence
from typing import Protocol

from drakit.flags import Subcommands


class _Subcommand(Protocol):
    def add_parser(self, sub: Subcommands) -> None: ...


# name -> module that defines add_parser(subparsers); the parser it adds sets
# `func(args) -> int` as its default.
SUBCOMMANDS: dict[str, str] = {
    "node-plugin": "drakit.cmd_node_plugin",
    "controller": "drakit.cmd_controller",
    "driver-controller": "drakit.cmd_driver_controller",
    "allocate": "drakit.cmd_allocate",
    "devices": "drakit.cmd_devices",
    "local-cluster": "drakit.cmd_local_cluster",
    "local-node": "drakit.cmd_local_node",
    "webhook": "drakit.cmd_webhook",
    "version": "drakit.cmd_version",
}

DESCRIPTION = """\
drakit is a Kubernetes Dynamic Resource Allocation (DRA) driver kit.

  node-plugin    run the kubelet plugin on a node (DaemonSet)
  controller     run the companion controller (Deployment)
  driver-controller
                 run a driver's controller: binding conditions of its devices
  allocate       allocate claims offline from YAML/JSON files and explain refusals
  devices        show devices, who holds them, and how full each pool is
  local-cluster  start or stop a local kube-apiserver + etcd for development
  local-node     start or stop a real kubelet + containerd node (root)
  webhook        validate a driver's opaque device config at admission
  version        print drakit's version and the Kubernetes APIs it speaks

Every flag has an environment-variable twin; see `drakit SUBCOMMAND --help`.
"""


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The command line; with ``only`` (a subcommand name), just that subcommand's parser.

    A running program then carries neither the other subcommands' modules nor their
    parsers (the node plugin runs on every node, where memory counts).
    """
    parser = argparse.ArgumentParser(
        prog="drakit",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="SUBCOMMAND", required=True)
    names = [only] if only in SUBCOMMANDS else list(SUBCOMMANDS)
    for name in names:
        module: _Subcommand = importlib.import_module(SUBCOMMANDS[name])
        module.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the drakit command line; returns the process exit code."""
    words = list(sys.argv[1:] if argv is None else argv)
    # The first word names the subcommand; anything else (--help, a typo) gets them all.
    args = build_parser(words[0] if words else None).parse_args(words)
    previous = _exit_cleanly_on_sigterm()
    try:
        code: int = args.func(args)
    except KeyboardInterrupt:
        return 130
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    return code


def _exit_cleanly_on_sigterm() -> signal.Handlers | None:
    """Make SIGTERM end the command as an exit (status 143) would, unless a handler is set.

    Python's default SIGTERM action ends the process at once, without ``atexit``: the
    kubernetes client copies a kubeconfig's inline key and certificates to temp files
    and deletes them only at exit, so a terminated ``drakit devices --watch`` left the
    user's private key in the temp folder. Commands that serve (controller, node plugin)
    install their own handler. Returns the handler to restore (None: nothing changed).
    """
    if threading.current_thread() is not threading.main_thread():
        return None
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return None

    def leave(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, leave)
    return signal.SIG_DFL


if __name__ == "__main__":
    sys.exit(main())
