"""``drakit dev``: run your driver's backend on a local cluster, in one command.

Starts, in the foreground, a local control plane (etcd, kube-apiserver and
kube-scheduler), a node driven by the kubelet harness (the kubelet's own DRA
code; the Node is made schedulable: not-ready taint lifted, allocatable set),
`drakit node-plugin` with your backend, `drakit webhook` when your backend has
a config_model of its own (with a ValidatingWebhookConfiguration: a claim whose
opaque config for your driver is invalid is refused when it is created),
`drakit controller` (it generates claims from ResourceClaimTemplates) and a
DeviceClass selecting your driver's devices. Then it prints the kubeconfig and
an example ResourceClaimTemplate and Pod to `kubectl apply`, and one line per
claim the kubelet prepares or unprepares. Ctrl-C (or SIGTERM) stops
everything and removes the folder.

The backend's module is imported from the current folder (or anything on
PYTHONPATH), as `python -m` would. Containers are not run: the kubelet
harness prepares claims exactly as a kubelet would, and the CDI specs the
plugin writes are in the node folder printed at start.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from drakit.cli.flags import (
    ConfigError,
    Subcommands,
    add_backend_flags,
    add_command,
    add_driver_name_flag,
)

if TYPE_CHECKING:
    from drakit.localcluster.devstack import DevStack

#: Printed once everything runs; tests and scripts wait for it.
READY_LINE = "drakit dev: ready"
EPILOG = """\
example:
  cd my-driver/ && drakit dev --backend fpga_driver:FpgaBackend --driver-name fpga.example.com

The first run builds the Kubernetes binaries and the kubelet harness from the
pinned Go modules (needs Go; cached in ~/.cache/drakit). Needs a drakit checkout
or `pip install drakit-localcluster` with those binaries on hand.
"""


def add_parser(sub: Subcommands) -> None:
    p = add_command(
        sub,
        "dev",
        summary="run a driver's backend on a local cluster with a simulated node (foreground)",
        description=__doc__ or "",
        epilog=EPILOG,
    )
    add_backend_flags(
        p,
        "your backend class (e.g. fpga_driver:FpgaBackend), or a built-in backend name",
        config="YAML or JSON file passed to the node plugin as --backend-config",
        env=False,
    )
    add_driver_name_flag(
        p,
        "the DRA driver name your devices are published under (e.g. fpga.example.com)",
        env=False,
    )
    p.add_argument(
        "--device-class",
        metavar="NAME",
        default="",
        help="name of the DeviceClass created for the driver (default: the driver name)",
    )

    p.add_argument(
        "--no-webhook",
        dest="webhook",
        action="store_false",
        help="do not run drakit webhook (default: run it when the backend has a config_model "
        "of its own)",
    )
    p.add_argument("--node-name", default="dev-node", help="the node's name (default: dev-node)")
    p.add_argument(
        "--kube-version",
        metavar="VERSION",
        help="Kubernetes version of the control plane and kubelet harness (default: drakit's)",
    )
    p.add_argument(
        "--dir",
        type=Path,
        metavar="DIR",
        help="folder for the cluster, node and logs (default: a new short folder under /tmp, "
        "removed at exit; a folder given here is kept)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from drakit.localcluster.devstack import DevSettings, DevStack, python_path_of  # noqa: PLC0415

    cwd = Path.cwd()
    try:
        backend = _check_backend(args.backend, cwd)
        settings = DevSettings(
            backend=args.backend,
            webhook=args.webhook and has_config_model(backend),
            driver=_check_name("--driver-name", args.driver_name),
            device_class=args.device_class and _check_name("--device-class", args.device_class),
            node=_check_name("--node-name", args.node_name),
            backend_config=_check_file(args.backend_config and Path(args.backend_config)),
            python_path=python_path_of(args.backend, cwd),
            kube_version=args.kube_version,
        )
    except ConfigError as err:
        print(f"drakit dev: {err}", file=sys.stderr)
        return 2
    root = args.dir or Path(tempfile.mkdtemp(prefix="dk-dev-", dir="/tmp"))
    root.mkdir(parents=True, exist_ok=True)
    dev = DevStack(settings, root.resolve(), say=lambda line: _out(f"  ok  {line}"))
    _catch_sigterm()
    return _serve(dev, remove_root=args.dir is None)


def _serve(dev: DevStack, *, remove_root: bool) -> int:
    """Start, print the recipe, follow the kubelet's events until Ctrl-C; always clean up."""
    from drakit.localcluster import MissingBinaryError, StartError  # noqa: PLC0415

    code = 0
    try:
        _out(f"drakit dev: starting {dev.settings.backend} as {dev.settings.driver} in {dev.root}")
        dev.start()
        _out(recipe(dev))
        _out(READY_LINE)
        _follow(dev)
    except KeyboardInterrupt:
        _out("drakit dev: stopping")
    except (StartError, MissingBinaryError, OSError) as err:
        print(f"drakit dev: {err}", file=sys.stderr)
        print(f"drakit dev: logs kept in {dev.logs}", file=sys.stderr)
        remove_root, code = False, 1
    finally:
        dev.stop()
    if remove_root:
        shutil.rmtree(dev.root, ignore_errors=True)
    _out("drakit dev: stopped" + ("" if remove_root else f" (files kept in {dev.root})"))
    return code


def recipe(dev: DevStack) -> str:
    """What to run next: the kubeconfig and an example to ``kubectl apply``."""
    example = dev.root / "example.yaml"
    example.write_text(example_yaml(dev.settings.class_name, dev.settings.driver))
    assert dev.folders is not None
    return "\n".join(
        [
            "",
            f"  export KUBECONFIG={dev.kubeconfig}",
            f"  kubectl apply -f {example}",
            "",
            f"{example} (a claim template for one device of class "
            f"{dev.settings.class_name}, and a pod using it):",
            "",
            example.read_text(),
            *_webhook_lines(dev),
            f"logs: {dev.logs}   CDI specs: {dev.folders.cdi}",
            "Pods are not run: each claim the kubelet prepares or unprepares is shown below.",
            "Ctrl-C stops everything.",
        ]
    )


def _webhook_lines(dev: DevStack) -> list[str]:
    if not dev.settings.webhook:
        return []
    return [
        f"Opaque config for {dev.settings.driver} is checked when a claim or template is "
        f"created: drakit webhook (ValidatingWebhookConfiguration "
        f"{dev.settings.webhook_configuration}) refuses invalid parameters with the reason.",
    ]


def example_yaml(device_class: str, driver: str) -> str:
    """A ResourceClaimTemplate for one device of ``device_class`` and a Pod using it."""
    return f"""\
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  name: one-device
  namespace: default
spec:
  spec:
    devices:
      requests:
      - name: dev
        exactly:
          deviceClassName: {device_class}
      # Your backend's opaque parameters (its config_model) go here:
      # config:
      # - requests: [dev]
      #   opaque:
      #     driver: {driver}
      #     parameters: {{}}
---
apiVersion: v1
kind: Pod
metadata:
  name: dev-pod
  namespace: default
spec:
  resourceClaims:
  - name: dev
    resourceClaimTemplateName: one-device
  containers:
  - name: main
    image: registry.k8s.io/pause:3.10
    resources:
      claims:
      - name: dev
"""


def _follow(dev: DevStack) -> None:
    """Print the kubelet's prepare/unprepare events until interrupted; a component that
    exits ends the session with its log tail."""
    from drakit.localcluster import StartError  # noqa: PLC0415

    assert dev.events is not None
    seen = 0
    while True:
        events = dev.events.since(seen)
        seen += len(events)
        for event in events:
            line = describe_event(event)
            if line:
                _out(line)
        for component in dev.components:
            if not component.running():
                raise StartError(
                    f"{component.name} exited (code {component.returncode}); last log lines "
                    f"({component.log_path}):\n{component.log_tail(15)}"
                )
        time.sleep(0.2)


def describe_event(event: dict[str, object]) -> str:
    """One line for a harness event a driver author cares about ('' for the others)."""
    kind = event.get("event")
    pod = event.get("pod", "")
    if kind == "prepared":
        containers = event.get("containers") or {}
        assert isinstance(containers, dict)
        devices = "; ".join(f"{c}: {', '.join(ids)}" for c, ids in sorted(containers.items()))
        return f"prepared: pod {pod}: {devices or 'no CDI devices'}"
    if kind == "prepare-failed":
        return f"prepare failed: pod {pod}: {event.get('error', '')}"
    if kind == "unprepared":
        return f"unprepared: pod {pod}"
    if kind == "unprepare-failed":
        return f"unprepare failed: pod {pod}: {event.get('error', '')}"
    return ""


def _check_backend(spec: str, cwd: Path) -> type:
    """``spec``'s class, imported (from ``cwd`` too), with its ``config_model`` read;
    ConfigError naming the problem."""
    from drakit.node_plugin.backend_loader import resolve_backend_class  # noqa: PLC0415
    from drakit.plugin.errors import BackendConfigError  # noqa: PLC0415

    sys.path.insert(0, str(cwd))
    try:
        cls = resolve_backend_class(spec)
        getattr(cls, "config_model", None)  # a lazy model is imported here, from cwd too
    except BackendConfigError as err:
        raise ConfigError(str(err)) from None
    except Exception as err:  # a LazyConfigModel whose module fails to import, ...
        raise ConfigError(
            f"--backend {spec!r}: cannot read config_model: {type(err).__name__}: {err}"
        ) from None
    finally:
        sys.path.remove(str(cwd))
    return cls


def has_config_model(backend: type) -> bool:
    """Whether ``backend`` takes opaque config: its ``config_model`` is a pydantic model of
    its own (not drakit's ``EmptyConfig``, which refuses every parameter)."""
    import pydantic  # noqa: PLC0415

    from drakit.plugin import EmptyConfig  # noqa: PLC0415

    model = getattr(backend, "config_model", None)
    if not (isinstance(model, type) and issubclass(model, pydantic.BaseModel)):
        return False
    return model is not EmptyConfig


def _check_name(flag: str, value: str) -> str:
    from drakit.allocator.validation import dns_subdomain_problem  # noqa: PLC0415

    problem = dns_subdomain_problem(value)
    if problem:
        raise ConfigError(f"{flag} {value!r}: {problem}")
    return value


def _check_file(path: Path | None) -> Path | None:
    if path is not None and not path.is_file():
        raise ConfigError(f"--backend-config {str(path)!r}: no such file")
    return path.resolve() if path is not None else None


def _catch_sigterm() -> None:
    """SIGTERM stops the session as Ctrl-C does; SIGINT is set explicitly because a shell
    starts background jobs with it ignored."""

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, interrupt)


def _out(text: str) -> None:
    print(text, flush=True)
