"""The ``drakit`` console script: one entry point, one subcommand per program.

Each subcommand lives in its own module and registers its flags through
``add_parser``; this module only dispatches. Subcommand modules import their
heavy dependencies (gRPC, the Kubernetes client) inside ``run`` so that
``drakit --help`` and ``drakit version`` stay fast.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import signal
import sys
import threading
from collections.abc import Sequence
from pkgutil import extend_path
from typing import Protocol

from drakit.cli.flags import Subcommands

# The development commands (local-cluster, local-node, dev) are modules of this package too,
# from the drakit-localcluster distribution's source root; see drakit/__init__.py.
__path__ = extend_path(__path__, __name__)


class _Subcommand(Protocol):
    def add_parser(self, sub: Subcommands) -> None: ...


# name -> module that defines add_parser(subparsers); the parser it adds sets
# `func(args) -> int` as its default. These run anywhere drakit is installed, the image too.
SUBCOMMANDS: dict[str, str] = {
    "node-plugin": "drakit.cli.node_plugin",
    "controller": "drakit.cli.controller",
    "driver-controller": "drakit.cli.driver_controller",
    "allocate": "drakit.cli.allocate",
    "devices": "drakit.cli.devices",
    "webhook": "drakit.cli.webhook",
    "version": "drakit.cli.version",
}

# Development commands. Their modules (drakit.localcluster, with drakit.demo) change the host
# they run on, so they are not in the drakit wheel or its image: the drakit-localcluster
# distribution, built from this repository at drakit's own version, adds them (and a source
# checkout's editable install has them). Without it they are neither shown nor run.
DEV_SUBCOMMANDS: dict[str, str] = {
    "local-cluster": "drakit.cli.local_cluster",
    "local-node": "drakit.cli.local_node",
    "dev": "drakit.cli.dev",
}
DEV_PACKAGE = "drakit.localcluster"
DEV_DISTRIBUTION = "drakit-localcluster"

DESCRIPTION = """\
drakit is a Kubernetes Dynamic Resource Allocation (DRA) driver kit.

  node-plugin    run the kubelet plugin on a node (DaemonSet)
  controller     run the companion controller (Deployment)
  driver-controller
                 run a driver's controller: binding conditions of its devices
  allocate       allocate claims offline from YAML/JSON files and explain refusals
  devices        show devices, who holds them, and how full each pool is
  webhook        validate a driver's opaque device config at admission
  version        print drakit's version and the Kubernetes APIs it speaks
"""

DEV_DESCRIPTION = """\
  local-cluster  start or stop a local kube-apiserver + etcd for development
  local-node     start or stop a real kubelet + containerd node (root)
  dev            run a driver's backend on a local cluster with a simulated node
"""

DEV_MISSING = f"""\
Development commands (local-cluster, local-node, dev) come with the {DEV_DISTRIBUTION}
distribution: pip install {DEV_DISTRIBUTION}
"""

EPILOGUE = """
Every flag has an environment-variable twin; see `drakit SUBCOMMAND --help`.
"""


def dev_commands_installed() -> bool:
    """Whether the development commands' modules (drakit-localcluster) can be imported."""
    return importlib.util.find_spec(DEV_PACKAGE) is not None


def missing_dev_command(name: str) -> str:
    """The one line for a development command this installation lacks."""
    return (
        f"drakit: {name!r} is a development command that this installation lacks "
        f"(drakit's image never has it): install the {DEV_DISTRIBUTION} distribution "
        f"(pip install {DEV_DISTRIBUTION}) at drakit's version"
    )


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The command line; with ``only`` (a subcommand name), just that subcommand's parser.

    A running program then carries neither the other subcommands' modules nor their
    parsers (the node plugin runs on every node, where memory counts). The development
    commands are there only when :func:`dev_commands_installed`; the help says otherwise
    what to install.
    """
    commands = dict(SUBCOMMANDS)
    dev = dev_commands_installed()
    if dev:
        commands.update(DEV_SUBCOMMANDS)
    parser = argparse.ArgumentParser(
        prog="drakit",
        description=DESCRIPTION + (DEV_DESCRIPTION if dev else "\n" + DEV_MISSING) + EPILOGUE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="SUBCOMMAND", required=True)
    names = [only] if only in commands else list(commands)
    for name in names:
        module: _Subcommand = importlib.import_module(commands[name])
        module.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the drakit command line; returns the process exit code."""
    words = list(sys.argv[1:] if argv is None else argv)
    if words and words[0] in DEV_SUBCOMMANDS and not dev_commands_installed():
        print(missing_dev_command(words[0]), file=sys.stderr)
        return 2
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
