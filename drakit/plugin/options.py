"""The settings of a plugin a driver runs from its own program (:class:`PluginOptions`).

They are those of ``drakit node-plugin`` that are not about choosing or configuring the
backend (the program builds its backend itself), with the command's defaults and the same
environment variables (:data:`ENVIRONMENT`), so a DaemonSet written for the command fits
the program too. Every value is checked when the options are made: a bad one raises
:class:`PluginOptionsError` naming the option, its variable and the reason. What can only
be checked on the node (folders writable, the kubeconfig readable) is checked by
:meth:`KubeletPlugin.start <drakit.plugin.KubeletPlugin.start>`.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, NoReturn

from drakit.plugin.context import BackendContext
from drakit.telemetry.address import parse_address

__all__ = ["ENVIRONMENT", "PluginOptions", "PluginOptionsError"]

#: Each option's environment variable: the one ``drakit node-plugin`` reads for its flag.
ENVIRONMENT: Final[Mapping[str, str]] = {
    "driver_name": "DRIVER_NAME",
    "node_name": "NODE_NAME",
    "kubeconfig": "KUBECONFIG",
    "registrar_dir": "KUBELET_REGISTRAR_DIRECTORY_PATH",
    "plugins_dir": "KUBELET_PLUGINS_DIRECTORY_PATH",
    "cdi_root": "CDI_ROOT",
    "pod_uid": "POD_UID",
    "metrics_address": "METRICS_ADDRESS",
    "health_resend_seconds": "HEALTH_RESEND_INTERVAL",
    "unprepare_timeout_seconds": "UNPREPARE_TIMEOUT",
    "kube_api_qps": "KUBE_API_QPS",
    "kube_api_burst": "KUBE_API_BURST",
}

# resource.k8s.io: a driver name is a DNS subdomain of at most 63 characters.
_DRIVER_NAME_MAX = 63
_NODE_NAME_MAX = 253
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_POD_UID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_MAX_HEALTH_RESEND = 30.0  # the kubelet's default health timeout
# Other calls wait at most this long for the plugin's lock (drakit.node_plugin.serialize).
_MAX_UNPREPARE_TIMEOUT = 40.0
_PATHS = ("registrar_dir", "plugins_dir", "cdi_root")


class PluginOptionsError(ValueError):
    """An option is unusable; the message names it, its environment variable and why."""


@dataclass(frozen=True)
class PluginOptions:
    """How to run the plugin: which driver and node, how to reach the API, where the
    kubelet's folders are. The defaults are ``drakit node-plugin``'s.

    ``kubeconfig`` (a file) or ``api_client`` reach the API server: an API client object
    with the ``kubernetes`` package's ``ApiClient`` interface (``param_serialize`` and
    ``call_api``; an ``ApiClient`` itself, or the client ``drakit.testing``'s ``drakit_api``
    fixture yields) is used as it is, and then ``kubeconfig`` and the client limits
    (``kube_api_qps``, ``kube_api_burst``; a QPS of 0: no limit) are not read. Neither
    given: the pod's service account.

    The kubelet finds the plugin through ``registrar_dir``; the plugin keeps its sockets,
    lock and checkpoint in ``plugins_dir/<driver_name>`` and writes one CDI spec per claim
    into ``cdi_root``. ``pod_uid`` (the pod's UID, from the downward API) lets two instances
    of the plugin run side by side during a rolling update. ``metrics_address``
    (``HOST:PORT``; ``:9400`` binds ``$POD_IP``, else 127.0.0.1) serves Prometheus metrics.
    ``health_resend_seconds`` is the longest silence on a device-health stream to the
    kubelet (at most 30). ``unprepare_timeout_seconds`` is the longest an unprepare call
    waits for the backend (at most 40; the kubelet gives up after 45): a claim whose
    backend takes longer gets an error and stays prepared until the kubelet's next
    unprepare finds the backend done.
    """

    driver_name: str
    node_name: str
    kubeconfig: Path | None = None
    api_client: Any = None
    registrar_dir: Path = Path("/var/lib/kubelet/plugins_registry")
    plugins_dir: Path = Path("/var/lib/kubelet/plugins")
    cdi_root: Path = Path("/var/run/cdi")
    pod_uid: str | None = None
    metrics_address: str | None = None
    health_resend_seconds: float = 20.0
    unprepare_timeout_seconds: float = 10.0
    kube_api_qps: float = 50.0
    kube_api_burst: int = 100

    def __post_init__(self) -> None:
        for name in _PATHS:
            value = getattr(self, name)
            if not isinstance(value, Path):
                object.__setattr__(self, name, Path(value))
            if not getattr(self, name).is_absolute():
                _fail(name, value, "must be an absolute path")
        if self.kubeconfig is not None and not isinstance(self.kubeconfig, Path):
            object.__setattr__(self, "kubeconfig", Path(self.kubeconfig))
        _check_name("driver_name", self.driver_name, _DRIVER_NAME_MAX)
        _check_name("node_name", self.node_name, _NODE_NAME_MAX)
        if self.pod_uid is not None and not _POD_UID.match(self.pod_uid):
            _fail("pod_uid", self.pod_uid, "may contain only letters, digits, '.', '_' and '-'")
        if self.metrics_address is not None:
            try:
                parse_address(self.metrics_address)
            except ValueError as exc:
                _fail("metrics_address", self.metrics_address, str(exc))
        resend = self.health_resend_seconds
        if not _is_number(resend) or not 0 < resend <= _MAX_HEALTH_RESEND:
            _fail("health_resend_seconds", resend, "must be seconds in (0, 30]")
        unprepare = self.unprepare_timeout_seconds
        if not _is_number(unprepare) or not 0 < unprepare <= _MAX_UNPREPARE_TIMEOUT:
            _fail("unprepare_timeout_seconds", unprepare, "must be seconds in (0, 40]")
        if not _is_number(self.kube_api_qps) or not self.kube_api_qps >= 0:
            _fail("kube_api_qps", self.kube_api_qps, "must be a number of at least 0")
        burst = self.kube_api_burst
        if isinstance(burst, bool) or not isinstance(burst, int) or burst < 1:
            _fail("kube_api_burst", burst, "must be a whole number of at least 1")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **options: Any) -> PluginOptions:
        """The options the environment sets (:data:`ENVIRONMENT`), ``options`` winning.

        An empty variable counts as unset, as for the command's flags. Numbers are parsed;
        a malformed one raises :class:`PluginOptionsError` naming the variable. The driver
        and node names are required: from ``$DRIVER_NAME``/``$NODE_NAME`` or ``options``.
        """
        env = os.environ if environ is None else environ
        given: dict[str, Any] = {}
        for option, variable in ENVIRONMENT.items():
            text = env.get(variable, "")
            if text:
                given[option] = _parse(option, text)
        given.update(options)
        for required in ("driver_name", "node_name"):
            if not given.get(required):
                raise PluginOptionsError(
                    f"{required} is required: pass it or set ${ENVIRONMENT[required]}"
                )
        return cls(**given)

    @property
    def plugin_data_dir(self) -> Path:
        """``plugins_dir/<driver_name>``: the plugin's sockets, lock and checkpoint."""
        return self.plugins_dir / self.driver_name

    def backend_context(
        self, config: Mapping[str, Any] | None = None, config_path: Path | None = None
    ) -> BackendContext:
        """The :class:`BackendContext` a backend class is constructed with, for these options:
        their driver and node names, and the backend's own ``config`` (default: none)."""
        return BackendContext(self.driver_name, self.node_name, dict(config or {}), config_path)


def _fail(option: str, value: object, reason: str) -> NoReturn:
    variable = ENVIRONMENT.get(option)
    where = f"{option} (${variable})" if variable else option
    raise PluginOptionsError(f"{where} {value!r} {reason}")


def _is_number(value: object) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(float(value))
    )


def _check_name(option: str, name: object, longest: int) -> None:
    if not isinstance(name, str) or len(name) > longest or not _DNS_SUBDOMAIN.match(name):
        _fail(
            option,
            name,
            f"is not a DNS subdomain of at most {longest} characters (lowercase letters, "
            "digits, '-' and '.', e.g. gpu.example.com)",
        )


_NUMBERS: Final[Mapping[str, type]] = {
    "health_resend_seconds": float,
    "unprepare_timeout_seconds": float,
    "kube_api_qps": float,
    "kube_api_burst": int,
}


def _parse(option: str, text: str) -> Any:
    """The value of ``option`` written as ``text`` in its environment variable."""
    kind = _NUMBERS.get(option)
    if kind is None:
        return text
    try:
        return kind(text)
    except ValueError:
        _fail(option, text, f"is not a number ({kind.__name__})")
