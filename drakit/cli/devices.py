"""``drakit devices``: which device is where, who holds it, and how full each pool is."""

from __future__ import annotations

import argparse
import re
import sys
import threading
from typing import Any, TextIO

from drakit.cli.envflags import EnvDefault
from drakit.cli.flags import Subcommands, add_command, add_kubeconfig_flag
from drakit.telemetry.safetext import clean_lines

EXIT_OK = 0
EXIT_FAILED = 1  # the cluster could not be read
EXIT_INVALID = 2  # bad flags
SYNC_TIMEOUT = 60.0
# A namespace ends up in a URL path: only a valid name (an RFC 1123 label) is used.
NAMESPACE_NAME = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
# A DaemonSet name (an RFC 1123 subdomain) goes into a URL path too.
OBJECT_NAME = re.compile(
    r"(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
)
# The namespace of the chart's install docs (helm install drakit ... --namespace drakit-system).
DEFAULT_PLUGIN_NAMESPACE = "drakit-system"
# Events often come in bursts (a claim's allocation, then its reservation): wait this long
# after the first one so that one burst prints one table.
WATCH_SETTLE_SECONDS = 0.1

DESCRIPTION = """\
Show every device that DRA drivers publish in the cluster (any driver, not only drakit's),
where it is, what state it is in and which claim and pods hold it.

Device states (first match wins):
  shared        a multi-allocatable device held by one or more claims; shows the
                consumable capacity left, e.g. "shared (memory 12Gi/16Gi left)"
  allocated     held by a claim
  admin-access  only claims with adminAccess hold it (they do not consume it)
  unhealthy     tainted NoSchedule/NoExecute with a key ending in /unhealthy
                (drakit's node plugin sets <driver>/unhealthy for unhealthy devices)
  tainted       another NoSchedule or NoExecute taint: no new allocations
  exhausted     a partition that needs more of a shared counter than its pool has left
                after the allocated partitions, e.g. "exhausted (npu-0/memory 40Gi
                needed, 0 left)": nothing can allocate it until one is freed
  free          none of the above
  unknown       free as far as you can see, but some claims are hidden from you

--summary prints one row per node and pool: devices in total, allocated, free (neither
allocated, tainted nor exhausted), exhausted and tainted; shared counters used by allocated
devices of partitionable pools vs the counter sets' totals; consumable capacity used vs
total over the multi-allocatable devices.

With --node (table and wide output) the node's own view follows: what the kubelet's
PodResources API says each container on the node uses (claim -> pod -> container ->
device), as the drakit node plugins there last read it, with their cross-check findings
(leaked preparations, devices and claims their checkpoint does not know). It is read
through the API server's pod proxy from the plugin's own pods only: pods in
--plugin-namespace whose controller is a DaemonSet labelled
app.kubernetes.io/component=node-plugin (read from the API server: its uid, selector and
the port its pod template annotates with drakit.dev/node-view-port); any other annotated
pod is refused with a note. It needs, in that namespace, list on pods, get on
daemonsets.apps and get on pods/proxy (the API server does not proxy to loopback
addresses; then use --node-view-url).

Nothing printed is trusted: control characters and escape sequences in names, messages
and the node view are shown as '?' (line breaks and tabs as spaces), in every output
format.

Reading the cluster: ResourceSlices (and DeviceClasses for --class) are cluster-scoped and
must be readable. ResourceClaims are read in all namespaces when you may; otherwise in
--namespace (or your kubeconfig context's namespace) only, and the output says what is
hidden and why.
"""

EPILOG = """\
examples:
  drakit devices                          # every device, one row each
  drakit devices --summary                # how full each pool is, per node
  drakit devices --node node-a -o wide    # with taints, counters and slice names
  drakit devices --class gpu.example.com  # the devices a DeviceClass selects
  drakit devices --namespace team-a       # devices held by claims in team-a
  drakit devices --summary --watch        # print again whenever slices or claims change
  drakit devices -o json | jq '.items[] | select(.state == "free")'
"""


def add_parser(sub: Subcommands) -> None:
    p = add_command(
        sub,
        "devices",
        summary="show devices, who holds them, and how full each pool is",
        description=DESCRIPTION,
        epilog=EPILOG,
    )
    add_kubeconfig_flag(p, "in-cluster service account, then ~/.kube/config")
    p.add_argument("--context", metavar="NAME", help="kubeconfig context (default: current)")
    p.add_argument(
        "--summary", action="store_true", help="one row per node and pool instead of per device"
    )
    p.add_argument("--node", metavar="NAME", help="only devices (and pools) of node NAME")
    p.add_argument("--driver", metavar="NAME", help="only devices of DRA driver NAME")
    p.add_argument(
        "--class",
        dest="device_class",
        metavar="NAME",
        help="only devices that DeviceClass NAME selects (its CEL selectors, evaluated by "
        "drakit's allocator)",
    )
    p.add_argument(
        "--namespace",
        "-n",
        metavar="NS",
        help="only devices held by claims in NS; also the namespace whose claims are read "
        "when you may not list claims in all namespaces (default: the context's namespace)",
    )
    p.add_argument(
        "--node-view-url",
        metavar="URL",
        help="with --node: read the node view from URL (a node plugin's metrics address, e.g. "
        "http://127.0.0.1:9400 on the node or through kubectl port-forward) instead of "
        "through the API server's pod proxy",
    )
    p.add_argument(
        "--plugin-namespace",
        metavar="NS",
        action=EnvDefault,
        env="DRAKIT_PLUGIN_NAMESPACE",
        default=DEFAULT_PLUGIN_NAMESPACE,
        help="with --node: the namespace of drakit's node plugin DaemonSet, the only one whose "
        "pods' node views are read (default: %(default)s)",
    )
    p.add_argument(
        "--plugin-daemonset",
        metavar="NAME",
        action=EnvDefault,
        env="DRAKIT_PLUGIN_DAEMONSET",
        help="with --node: read node views only from pods of this DaemonSet (default: any "
        "DaemonSet of --plugin-namespace labelled app.kubernetes.io/component=node-plugin)",
    )
    p.add_argument(
        "--output",
        "-o",
        metavar="FORMAT",
        default="table",
        help="table, wide, json or yaml (default: %(default)s)",
    )
    p.add_argument(
        "--watch",
        "-w",
        action="store_true",
        help="keep watching (list+watch informers, no polling) and print again after every "
        "change; stop with Ctrl-C",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from drakit.devices.render import FORMATS  # noqa: PLC0415

    if args.output not in FORMATS:
        _error(f"--output: {args.output!r} is not one of {', '.join(FORMATS)}")
        return EXIT_INVALID
    for flag in ("node", "driver", "device_class", "namespace"):
        value = getattr(args, flag)
        if value is not None and (not value.strip() or len(value) > 253):
            name = "--class" if flag == "device_class" else f"--{flag}"
            _error(f"{name}: must be 1 to 253 characters")
            return EXIT_INVALID
    if args.node_view_url and not args.node:
        _error("--node-view-url: needs --node")
        return EXIT_INVALID
    for flag, value, kind, pattern in (
        ("--namespace", args.namespace, "a namespace name", NAMESPACE_NAME),
        ("--plugin-namespace", args.plugin_namespace, "a namespace name", NAMESPACE_NAME),
        ("--plugin-daemonset", args.plugin_daemonset, "a DaemonSet name", OBJECT_NAME),
    ):
        if value is not None and not pattern.fullmatch(value):
            limit = 63 if pattern is NAMESPACE_NAME else 253
            dots = "" if pattern is NAMESPACE_NAME else ", '.'"
            _error(
                f"{flag}: {value!r} is not {kind} "
                f"(lower-case letters, digits{dots} and '-', at most {limit})"
            )
            return EXIT_INVALID
    return _run(args, sys.stdout)


def _error(message: str) -> None:
    """``message`` on stderr, terminal-safe (it may quote the API server or a flag)."""
    print(clean_lines(f"drakit devices: {message}"), file=sys.stderr)


def _write(out: TextIO, text: str) -> None:
    """Every table, document and note goes out here: the renderers clean what they print,
    and this last pass keeps anything they missed from reaching the terminal."""
    out.write(clean_lines(text))


def _run(args: argparse.Namespace, out: TextIO) -> int:
    from drakit.devices.source import ClusterReader  # noqa: PLC0415
    from drakit.devices.view import FilterError, Filters  # noqa: PLC0415
    from drakit.kubeapi.errors import ApiError, ConfigError, Forbidden  # noqa: PLC0415

    filters = Filters(args.node, args.driver, args.device_class, args.namespace)
    try:
        # Inside the try: without the kubernetes extra this import is a ConfigError naming it.
        from drakit.kubeapi.client import context_namespace, load_client  # noqa: PLC0415

        api = load_client(args.kubeconfig, context=args.context, user_agent="drakit-devices")
        fallback = args.namespace or context_namespace(args.kubeconfig, args.context)
        if not NAMESPACE_NAME.fullmatch(fallback):
            raise ConfigError(
                f"the kubeconfig context's namespace {fallback!r} is not a valid name"
            )
        reader = ClusterReader(api, fallback)
        scope = reader.probe_claim_scope()
        if args.watch:
            return _watch(reader, scope, filters, args, out)
        snapshot = reader.snapshot(scope, with_classes=bool(args.device_class))
        _write(out, _text(snapshot, filters, args))
        if args.node and not args.summary and args.output in ("table", "wide"):
            _write(out, _node_views(api, args))
    except ConfigError as err:
        _error(str(err))
        return EXIT_FAILED
    except Forbidden as err:
        _error(
            f"{err}\nReading ResourceSlices (and DeviceClasses for --class) "
            "needs get/list/watch on them cluster-wide; ask your cluster admin for a "
            "ClusterRole that grants it."
        )
        return EXIT_FAILED
    except FilterError as err:
        _error(f"--class: {err}")
        return EXIT_FAILED
    except ApiError as err:
        _error(f"reading the cluster failed: {err}")
        return EXIT_FAILED
    return EXIT_OK


def _node_views(api: Any, args: argparse.Namespace) -> str:
    from drakit.devices.nodeview import read_node_view_url, read_node_views  # noqa: PLC0415
    from drakit.devices.render import render_node_views  # noqa: PLC0415

    if args.node_view_url:
        return render_node_views(read_node_view_url(args.node_view_url))
    views = read_node_views(api, args.node, args.plugin_namespace, args.plugin_daemonset)
    return render_node_views(views)


def _text(snapshot: Any, filters: Any, args: argparse.Namespace) -> str:
    from drakit.devices.render import render  # noqa: PLC0415
    from drakit.devices.view import device_view  # noqa: PLC0415

    return render(device_view(snapshot, filters), summary=args.summary, output=args.output)


def _watch(reader: Any, scope: Any, filters: Any, args: argparse.Namespace, out: TextIO) -> int:
    """Print the view, then again after each burst of changes, until interrupted."""
    from drakit.devices.source import Watcher  # noqa: PLC0415

    watcher = Watcher(reader, scope, with_classes=bool(args.device_class))
    stop = threading.Event()
    try:
        if not watcher.start(SYNC_TIMEOUT):
            _error("--watch: the initial list did not finish")
            return EXIT_FAILED
        last = ""
        while not stop.is_set():
            text = _text(watcher.snapshot(), filters, args)
            if text != last:
                if last and out.isatty():
                    out.write("\033[H\033[2J")  # clear the screen between tables
                elif last:
                    out.write("\n")
                _write(out, text)
                out.flush()
                last = text
            watcher.changed.wait()
            stop.wait(WATCH_SETTLE_SECONDS)
            watcher.changed.clear()
    finally:
        watcher.stop()
    return EXIT_OK
