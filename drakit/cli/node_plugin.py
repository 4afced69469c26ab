"""``drakit node-plugin``: run the kubelet plugin on this node.

Every flag has an environment-variable twin (shown in ``--help``) so a
DaemonSet can set them from the downward API. All validation happens before
anything listens: a bad value is one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from drakit.cli.envflags import EnvDefault
from drakit.cli.flags import (
    ConfigError,
    Subcommands,
    add_backend_flags,
    add_command,
    add_driver_name_flag,
    add_kubeconfig_flag,
    add_log_flags,
    add_metrics_address_flag,
    check_address,
    check_log_flags,
    client_limits,
)
from drakit.cli.podresources_flags import add_podresources_flags, podresources_config
from drakit.node_plugin.driver import (
    DEFAULT_UNPREPARE_TIMEOUT_SECONDS,
    CoreConfigError,
    PluginConfig,
)
from drakit.node_plugin.health.policy import (
    MAX_DWELL_SECONDS,
    HealthPolicy,
    PolicyError,
    parse_effects,
)
from drakit.node_plugin.sockets import SocketPathError, socket_paths
from drakit.telemetry.logs import configure as configure_logging

if TYPE_CHECKING:
    from drakit.node_plugin.wiring import Wiring

EXIT_INVALID = 2  # bad flags or environment: nothing was started
EXIT_FAILED = 1  # valid configuration, but start-up failed

# resource.k8s.io: a driver name is a DNS subdomain of at most 63 characters.
_DRIVER_NAME_MAX = 63
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_POD_UID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_BACKEND = re.compile(r"^([a-z][a-z0-9-]*|[A-Za-z_][\w.]*:[A-Za-z_]\w*)$")
_MAX_HEALTH_RESEND = 30.0  # the kubelet's default health timeout
# Other calls wait at most this long for the serialize lock (drakit.node_plugin.serialize).
_MAX_UNPREPARE_TIMEOUT = 40.0
CPU_HOME_MODES = ("auto", "off")
# The Go example driver's names; the kubelet's own client defaults (50/100) suffice: the
# plugin GETs only the claims the kubelet asks for.
KUBE_API_QPS_ENV = "KUBE_API_QPS"
KUBE_API_BURST_ENV = "KUBE_API_BURST"
DEFAULT_QPS = "50"
DEFAULT_BURST = "100"

DESCRIPTION = """\
Run the drakit DRA kubelet plugin on this node.

The plugin serves the kubelet's DRA gRPC API (v1 and v1beta1) and the device
health API (v1 and v1alpha1) on <plugins-dir>/<driver>/dra.sock, then
registers with the kubelet through <registrar-dir>/<driver>-reg.sock. It
prepares ResourceClaims allocated to this node by writing CDI specs, and
removes both sockets on SIGTERM/SIGINT after in-flight calls finish.

With --pod-uid (from the downward API) two plugin pods of one driver can run
side by side during a rolling update: each gets its own sockets and the two
serialize their work through <plugins-dir>/<driver>/serialize.lock.
"""

EPILOG = """\
backends:
  example           simulated GPUs (no hardware needed); see docs for its config file
  hostdev           host device nodes (/dev/fuse, /dev/kvm, ...) chosen by a config file
  module:Class      your own backend class, importable from PYTHONPATH

example:
  drakit node-plugin --driver-name gpu.example.com --node-name "$NODE_NAME" \\
    --backend example --metrics-address :9400
"""


def add_parser(sub: Subcommands) -> None:
    p = add_command(
        sub,
        "node-plugin",
        summary="run the kubelet plugin on this node",
        description=DESCRIPTION,
        epilog=EPILOG,
    )
    env = EnvDefault
    add_driver_name_flag(p, "DRA driver name, a DNS subdomain such as gpu.example.com")
    p.add_argument(
        "--node-name",
        metavar="NAME",
        action=env,
        env="NODE_NAME",
        required=True,
        help="name of this Kubernetes node",
    )
    add_kubeconfig_flag(p, "in-cluster service account")
    p.add_argument(
        "--kubelet-registrar-dir",
        metavar="DIR",
        action=env,
        env="KUBELET_REGISTRAR_DIRECTORY_PATH",
        default="/var/lib/kubelet/plugins_registry",
        help="the kubelet's plugin registration directory (default: %(default)s)",
    )
    p.add_argument(
        "--kubelet-plugins-dir",
        metavar="DIR",
        action=env,
        env="KUBELET_PLUGINS_DIRECTORY_PATH",
        default="/var/lib/kubelet/plugins",
        help="parent of the plugin's data directory <dir>/<driver> (default: %(default)s)",
    )
    p.add_argument(
        "--cdi-root",
        metavar="DIR",
        action=env,
        env="CDI_ROOT",
        default="/var/run/cdi",
        help="directory for the per-claim CDI specs (default: %(default)s)",
    )
    add_backend_flags(
        p,
        "device backend: example, hostdev or module:Class (default: %(default)s)",
        default="example",
        config="backend configuration file (YAML or JSON)",
    )
    p.add_argument(
        "--pod-uid",
        metavar="UID",
        action=env,
        env="POD_UID",
        help="UID of this plugin pod; enables per-instance sockets for rolling updates",
    )
    add_metrics_address_flag(p, 9400)
    p.add_argument(
        "--health-resend-interval",
        action=env,
        env="HEALTH_RESEND_INTERVAL",
        default="20",
        metavar="SECONDS",
        help="longest silence on a device-health stream, at most 30 (default: %(default)s)",
    )
    p.add_argument(
        "--unprepare-timeout",
        action=env,
        env="UNPREPARE_TIMEOUT",
        default=f"{DEFAULT_UNPREPARE_TIMEOUT_SECONDS:g}",
        metavar="SECONDS",
        help="longest an unprepare call waits for the backend, for all its claims "
        f"together, at most {_MAX_UNPREPARE_TIMEOUT:g} (the kubelet gives up at 45); a claim "
        "whose backend takes longer gets an error naming the timeout and stays prepared, the "
        "backend goes on, and the kubelet's next unprepare completes it (default: %(default)s)",
    )
    _add_health_policy_flags(p)
    p.add_argument(
        "--cpu-home",
        action=env,
        env="CPU_HOME",
        default="auto",
        metavar="MODE",
        help="auto: keep the plugin's threads on one CPU, the least busy one it may use, "
        "re-chosen every 10 s (a gRPC call is then about a third faster: its threads hand "
        "over without cross-CPU wake-ups); off: let the kernel place them (default: "
        "%(default)s)",
    )
    add_podresources_flags(p)
    add_log_flags(p)
    p.set_defaults(func=run)


def _add_health_policy_flags(p: argparse.ArgumentParser) -> None:
    """Flags of the health policy (drakit.node_plugin.health; docs/health.md)."""
    env = EnvDefault
    g = p.add_argument_group(
        "device health policy",
        "what happens to devices the backend reports Unhealthy: a <driver>/unhealthy taint in "
        "the ResourceSlice (value: the health reason), lifted when they recover; an Event on "
        "the Node and a metric per transition (see docs/health.md)",
    )
    g.add_argument(
        "--health-taint-effect",
        action=env,
        env="HEALTH_TAINT_EFFECT",
        default="NoSchedule",
        metavar="[EFFECT,]REASON=EFFECT,...",
        help="taint effect per health reason, a bare EFFECT for every other reason; EFFECT "
        "is None (report only), NoSchedule (new claims avoid the device) or NoExecute (NoSchedule, "
        "and a request that drakit's controller grants within its eviction budget, which evicts "
        "pods whose claims do not tolerate it); hostdev "
        "reports DeviceNodeMissing, e.g. NoSchedule,DeviceNodeMissing=NoExecute "
        "(default: %(default)s)",
    )
    g.add_argument(
        "--health-unhealthy-for",
        action=env,
        env="HEALTH_UNHEALTHY_FOR",
        default=_dwell_default("unhealthy"),
        metavar="SECONDS",
        help="a device is tainted once it has been reported Unhealthy for SECONDS with no "
        "Healthy report in between; 0: at the first Unhealthy report (default: %(default)s)",
    )
    g.add_argument(
        "--health-healthy-for",
        action=env,
        env="HEALTH_HEALTHY_FOR",
        default=_dwell_default("healthy"),
        metavar="SECONDS",
        help="its taint is lifted once it has been reported Healthy for SECONDS with no "
        "Unhealthy report in between, doubled for every flap (default: %(default)s)",
    )
    g.add_argument(
        "--health-flap-window",
        action=env,
        env="HEALTH_FLAP_WINDOW",
        default="600",
        metavar="SECONDS",
        help="a device that fails again within SECONDS of its recovery flaps: its next "
        "recovery waits twice as long (at most SECONDS), and its taint keeps its timeAdded, "
        "so tolerationSeconds do not start over; 0: no flap damping (default: %(default)s)",
    )
    for old, new in (("unhealthy", "unhealthy-for"), ("healthy", "healthy-for")):
        g.add_argument(
            f"--health-{old}-after",
            action=env,
            env=f"HEALTH_{old.upper()}_AFTER",
            metavar="N",
            help=f"deprecated in 0.2, removed in 0.3: use --health-{new}; N consecutive "
            f"reports are taken as (N-1) check intervals of --health-{new}",
        )
    for old, new, metavar in _MOVED_BUDGET_FLAGS:
        g.add_argument(
            old,
            action=env,
            env=_env_twin(old),
            metavar=metavar,
            help=f"deprecated in 0.2, removed in 0.3, ignored: the NoExecute budget is drakit "
            f"controller's {new} (chart: controller.noExecuteBudget)",
        )
    g.add_argument(
        "--health-check-interval",
        action=env,
        env="HEALTH_CHECK_INTERVAL",
        default="10",
        metavar="SECONDS",
        help="a health report is read every SECONDS, whenever the backend announces a "
        "change and when a dwell above ends; the dwells count seconds, not reports "
        "(default: %(default)s)",
    )


#: 0.1's node plugin budget flags (the old flag, the controller's flag that replaced it,
#: metavar): kept so that 0.1's command lines and environments still start the plugin.
_MOVED_BUDGET_FLAGS = (
    ("--health-noexecute-per-node", "--noexecute-per-node", "N"),
    ("--health-noexecute-cluster-percent", "--noexecute-cluster-percent", "PERCENT"),
)


def _env_twin(flag: str) -> str:
    return flag.removeprefix("--").replace("-", "_").upper()


def _warn_moved_budget_flags(args: argparse.Namespace) -> None:
    """One line on standard error naming the given 0.1 budget flags, which the plugin
    ignores, and the controller's flags and chart value that replaced them."""
    given = [
        (old, new)
        for old, new, _ in _MOVED_BUDGET_FLAGS
        if getattr(args, old.removeprefix("--").replace("-", "_"), None) not in (None, "")
    ]
    if not given:
        return
    olds = " and ".join(old for old, _ in given)
    news = " and ".join(new for _, new in given)
    print(
        f"drakit node-plugin: {olds} {'is' if len(given) == 1 else 'are'} deprecated, no "
        f"longer used by the node plugin and removed in 0.3: the NoExecute budget is drakit "
        f"controller's ({news}; chart value controller.noExecuteBudget)",
        file=sys.stderr,
    )


def _positive_int(flag: str, value: str, minimum: int) -> int:
    try:
        number = int(value)
    except ValueError:
        number = minimum - 1
    if number < minimum:
        raise ConfigError(f"{flag} {value!r} must be a whole number of at least {minimum}")
    return number


def _check_health_interval(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not 0 < seconds <= 3600:
        raise ConfigError(f"--health-check-interval {value!r} must be seconds in (0, 3600]")
    return seconds


def _dwell(args: argparse.Namespace, state: str) -> float:
    """``--health-STATE-for``, or the deprecated ``--health-STATE-after N`` (a count of
    reports, which 0.1 had) as the N-1 check intervals those reports spanned, with a warning.
    Both given: ConfigError, as the two would disagree."""
    flag = f"--health-{state}-for"
    seconds = _seconds(flag, getattr(args, f"health_{state}_for"))
    count = getattr(args, f"health_{state}_after", None)
    if count in (None, ""):
        return seconds
    old = f"--health-{state}-after"
    if seconds != float(_dwell_default(state)):
        raise ConfigError(f"{old} (deprecated) and {flag} are both set: keep {flag} only")
    reports = _positive_int(old, count, 1)
    print(
        f"drakit node-plugin: {old} is deprecated and is removed in 0.3: use {flag} "
        f"(taken as {flag} {(reports - 1) * float(args.health_check_interval):g})",
        file=sys.stderr,
    )
    return (reports - 1) * _check_health_interval(args.health_check_interval)


def _dwell_default(state: str) -> str:
    """The default of ``--health-STATE-for`` (the flags' own, from one place)."""
    return {"unhealthy": "0", "healthy": "30"}[state]


def _seconds(flag: str, value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds <= MAX_DWELL_SECONDS:  # also refuses nan
        raise ConfigError(f"{flag} {value!r} must be seconds in [0, {MAX_DWELL_SECONDS}]")
    return seconds


def health_policy(args: argparse.Namespace) -> HealthPolicy:
    """The health policy of the flags; ConfigError names the flag, value and reason."""
    _warn_moved_budget_flags(args)
    try:
        default, effects = parse_effects(args.health_taint_effect)
    except PolicyError as exc:
        raise ConfigError(str(exc)) from exc
    return HealthPolicy(
        default_effect=default,
        effects=effects,
        unhealthy_for=_dwell(args, "unhealthy"),
        healthy_for=_dwell(args, "healthy"),
        flap_window=_seconds("--health-flap-window", args.health_flap_window),
    )


def _check_driver_name(name: str) -> str:
    if len(name) > _DRIVER_NAME_MAX or not _DNS_SUBDOMAIN.match(name):
        raise ConfigError(
            f"--driver-name {name!r} is not a DNS subdomain of at most {_DRIVER_NAME_MAX} "
            "characters (lowercase letters, digits, '-' and '.', e.g. gpu.example.com)"
        )
    return name


def _check_node_name(name: str) -> str:
    if len(name) > 253 or not _DNS_SUBDOMAIN.match(name):
        raise ConfigError(f"--node-name {name!r} is not a valid Kubernetes node name")
    return name


def _absolute(flag: str, value: str) -> Path:
    path = Path(value)
    if not path.is_absolute():
        raise ConfigError(f"{flag} {value!r} must be an absolute path")
    return path


def _writable_dir(flag: str, value: str) -> Path:
    """Create ``value`` if needed and prove it is writable by writing a probe file."""
    path = _absolute(flag, value)
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".drakit-probe-"):
            pass
    except OSError as exc:
        raise ConfigError(
            f"{flag} {value!r} is not a writable directory: {exc.strerror or exc}"
        ) from exc
    return path


def _readable_file(flag: str, value: str | None) -> Path | None:
    if value is None:
        return None
    path = Path(value)
    if not path.is_file() or not os.access(path, os.R_OK):
        raise ConfigError(f"{flag} {value!r} is not a readable file")
    return path


def _check_pod_uid(uid: str | None) -> str | None:
    if uid is not None and not _POD_UID.match(uid):
        raise ConfigError(f"--pod-uid {uid!r} may contain only letters, digits, '.', '_' and '-'")
    return uid


def _check_backend(backend: str) -> str:
    if not _BACKEND.match(backend):
        raise ConfigError(
            f"--backend {backend!r} is neither a backend name (example, hostdev) nor module:Class"
        )
    return backend


def _check_resend(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not 0 < seconds <= _MAX_HEALTH_RESEND:
        limit = f"{_MAX_HEALTH_RESEND:g}"
        raise ConfigError(f"--health-resend-interval {value!r} must be seconds in (0, {limit}]")
    return seconds


def _check_unprepare_timeout(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not 0 < seconds <= _MAX_UNPREPARE_TIMEOUT:  # also refuses nan
        limit = f"{_MAX_UNPREPARE_TIMEOUT:g}"
        raise ConfigError(
            f"--unprepare-timeout {value!r} must be seconds in (0, {limit}]: other calls wait "
            f"at most {limit}s for the one holding the node's lock"
        )
    return seconds


def _check_cpu_home(value: str) -> bool:
    if value not in CPU_HOME_MODES:
        raise ConfigError(f"--cpu-home {value!r} must be one of {', '.join(CPU_HOME_MODES)}")
    return value == "auto"


def _check_metrics_address(address: str | None) -> str | None:
    check_address("--metrics-address", address)
    return address


def build_config(args: argparse.Namespace) -> PluginConfig:
    """Validate the flags into a ``PluginConfig``; raises ConfigError naming the flag."""
    driver = _check_driver_name(args.driver_name)
    kubeconfig = _readable_file("--kubeconfig", args.kubeconfig)
    check_log_flags(args)
    pod_uid = _check_pod_uid(args.pod_uid)
    qps, burst = client_limits(
        f"${KUBE_API_QPS_ENV}", os.environ.get(KUBE_API_QPS_ENV, DEFAULT_QPS),
        f"${KUBE_API_BURST_ENV}", os.environ.get(KUBE_API_BURST_ENV, DEFAULT_BURST),
    )  # fmt: skip
    registrar_dir = _writable_dir("--kubelet-registrar-dir", args.kubelet_registrar_dir)
    # Only <plugins dir>/<driver> is the plugin's (the chart mounts just that folder): the
    # parent need not be writable.
    plugins_dir = _absolute("--kubelet-plugins-dir", args.kubelet_plugins_dir)
    _writable_dir("--kubelet-plugins-dir", str(plugins_dir / driver))
    config = PluginConfig(
        driver_name=driver,
        node_name=_check_node_name(args.node_name),
        kubeconfig=str(kubeconfig) if kubeconfig else None,
        registrar_dir=registrar_dir,
        plugins_dir=plugins_dir,
        cdi_root=_writable_dir("--cdi-root", args.cdi_root),
        backend=_check_backend(args.backend),
        backend_config=_readable_file("--backend-config", args.backend_config),
        pod_uid=pod_uid,
        metrics_address=_check_metrics_address(args.metrics_address),
        health_resend_seconds=_check_resend(args.health_resend_interval),
        unprepare_timeout_seconds=_check_unprepare_timeout(args.unprepare_timeout),
        health_policy=health_policy(args),
        health_check_seconds=_check_health_interval(args.health_check_interval),
        kube_api_qps=qps,
        kube_api_burst=burst,
        cpu_home=_check_cpu_home(args.cpu_home),
        podresources=podresources_config(args),
    )
    try:
        socket_paths(registrar_dir, config.plugin_data_dir, driver, pod_uid)
    except SocketPathError as exc:
        raise ConfigError(str(exc)) from exc
    return config


def _fail(message: str, code: int) -> int:
    print(f"drakit node-plugin: error: {message}", file=sys.stderr)
    return code


def run(args: argparse.Namespace, build: Wiring | None = None) -> int:
    """Validate, configure logging, run until a signal: the plugin runs on the runtime an
    embedding program's ``drakit.plugin.KubeletPlugin`` runs on. ``build`` replaces the real
    wiring (``drakit.node_plugin.wiring.build``), for tests that run the command with an
    in-memory core."""
    # gRPC and protobuf load only when the plugin runs; prometheus_client only with a /metrics
    # endpoint (node_plugin.metrics.serve_metrics).
    from drakit.node_plugin.embedded import command_runtime, run_until_signal  # noqa: PLC0415

    try:
        config = build_config(args)
    except ConfigError as exc:
        return _fail(str(exc), EXIT_INVALID)
    configure_logging(args.log_format, args.log_level)
    try:
        return run_until_signal(command_runtime(config, build))
    except CoreConfigError as exc:
        return _fail(str(exc), EXIT_INVALID)
    except (OSError, SocketPathError) as exc:
        return _fail(f"cannot start: {exc}", EXIT_FAILED)
