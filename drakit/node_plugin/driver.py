"""The contract between the node plugin's gRPC servicers and the driver core.

The servicers (``drakit/node_plugin/service/``) speak protobuf to the kubelet; the core
(``drakit/node_plugin/core.py``) does the real work: reads claims, resolves config,
calls the backend, writes CDI specs and the checkpoint. Between the two there
are only the plain, version-neutral values defined here, so the core never
sees which DRA API version (v1 or v1beta1) or which health API version the
kubelet used.

Rules every :class:`DriverCore` implementation must follow:

* ``prepare`` and ``unprepare`` return an entry for *every* claim UID they
  were given, and report per-claim failures in that entry. Raising is reserved
  for "the whole call failed"; the servicer then marks every claim failed with
  the exception text (it never turns into a gRPC error for the kubelet).
* Both are idempotent: a repeated ``prepare`` returns the same devices and CDI
  IDs without redoing work; ``unprepare`` of a claim never prepared succeeds.
* The core reads the ResourceClaims from the API server *before* it enters
  ``call.serialize``; it does all work on local state (checkpoint, CDI specs,
  backend) *inside* it. The lock serializes calls across threads and, during a
  rolling update, across the two plugin processes (see ``serialize.py``).
* ``prepare`` and ``unprepare`` may be called concurrently from many threads.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from drakit.node_plugin.health.policy import HealthPolicy
from drakit.plugin.claims import ClaimRef
from drakit.plugin.health import DeviceHealth

if TYPE_CHECKING:
    from drakit.node_plugin.crosscheck import CrossCheckConfig


class CoreConfigError(Exception):
    """The core cannot start with this configuration (bad backend, config file, ...).

    Raised by the wiring (``drakit.node_plugin.wiring.build``) with a message naming the flag or
    file and the reason; ``drakit node-plugin`` prints the message and exits non-zero.
    """


@dataclass(frozen=True)
class PreparedDevice:
    """One device of a prepared claim, as returned to the kubelet.

    ``request_names`` are the claim's request names this device satisfies
    (empty: all requests); the servicer strips any ``/subrequest`` suffix.
    ``share_id`` is set only for consumable-capacity allocations; the v1beta1
    API cannot carry it and drops it.
    """

    request_names: tuple[str, ...]
    pool_name: str
    device_name: str
    cdi_device_ids: tuple[str, ...] = ()
    share_id: str | None = None


@dataclass(frozen=True)
class PrepareResult:
    """Outcome for one claim: devices on success, or a non-empty ``error``."""

    devices: tuple[PreparedDevice, ...] = ()
    error: str = ""


class HealthSubscription(Protocol):
    """A stream of health changes for one watcher (one kubelet stream)."""

    def next_change(self, timeout: float) -> list[DeviceHealth] | None:
        """Block up to ``timeout`` seconds for the next batch of changed devices.

        Returns None when nothing changed in time or the subscription is
        closed; callers tell the two apart with ``closed``.
        """
        ...

    @property
    def closed(self) -> bool:
        """True once ``close`` was called or the publisher shut down."""
        ...

    def close(self) -> None:
        """Stop delivering changes; idempotent, callable from any thread."""
        ...


#: ``--unprepare-timeout``'s default: well below the kubelet's 45 s call timeout
#: (k8s.io/kubernetes pkg/kubelet/cm/dra/plugin, defaultClientCallTimeout) and the 40 s other
#: calls wait for the serialize lock, so a call behind a stuck one still gets its turn and
#: the kubelet hears the error.
DEFAULT_UNPREPARE_TIMEOUT_SECONDS = 10.0


def _always_active() -> bool:
    return True


#: Registers a function to run once a call's reply is sent (gRPC's
#: ``ServicerContext.add_callback``); returns False when it cannot, and the caller runs
#: the function at once.
AfterReply = Callable[[Callable[[], None]], bool]


def not_deferred(_work: Callable[[], None]) -> bool:
    """An :data:`AfterReply` that takes nothing: the work runs at once."""
    return False


def run_after_reply(after_reply: AfterReply, work: Callable[[], None]) -> None:
    """Hand ``work`` to ``after_reply``; run it now when that refuses."""
    if not after_reply(work):
        work()


@dataclass(frozen=True)
class CallContext:
    """What the servicer hands the core with every prepare/unprepare call.

    ``serialize`` is a reusable lock (a context manager) the core must hold
    while it touches local state, and must not hold while it waits on the API
    server. ``request_id`` ties the core's log lines to the servicer's.
    ``is_active`` turns False once the caller is gone (its deadline passed or
    it hung up): the core stops starting new work for the call then.
    ``deadline`` is the :func:`time.monotonic` time the caller stops waiting
    (None: it set none); the core hands it to the backend. ``after_reply`` takes
    work nobody waits for (log lines of claims done) to run once the reply is sent.
    """

    request_id: str
    serialize: AbstractContextManager[object]
    is_active: Callable[[], bool] = _always_active
    deadline: float | None = None
    after_reply: AfterReply = not_deferred


@dataclass(frozen=True)
class PluginConfig:
    """Everything the command line decided, already validated.

    ``plugin_data_dir`` (``<plugins_dir>/<driver_name>``) holds the DRA socket,
    ``serialize.lock`` and whatever state the core keeps (checkpoint).
    """

    driver_name: str
    node_name: str
    kubeconfig: str | None
    registrar_dir: Path
    plugins_dir: Path
    cdi_root: Path
    backend: str
    backend_config: Path | None = None
    pod_uid: str | None = None
    metrics_address: str | None = None
    health_resend_seconds: float = 20.0
    serialize_timeout_seconds: float = 40.0
    #: How long one unprepare call waits for the backend (``--unprepare-timeout``; see
    #: ``drakit.node_plugin.prepare.bounded``).
    unprepare_timeout_seconds: float = DEFAULT_UNPREPARE_TIMEOUT_SECONDS
    #: Client-side API limits (``$KUBE_API_QPS``, ``$KUBE_API_BURST``); a QPS of 0: no limit.
    kube_api_qps: float = 50.0
    kube_api_burst: int = 100
    #: What happens to unhealthy devices (taint effect per reason, hysteresis, NoExecute
    #: budget) and how often health is re-read for it (``drakit.node_plugin.health``).
    health_policy: HealthPolicy = field(default_factory=HealthPolicy)
    health_check_seconds: float = 10.0
    #: Keep the plugin process's threads on one home CPU (``drakit.node_plugin.cpuhome``) while it
    #: runs as a command; in-process plugins (tests, embedders) leave affinity alone.
    cpu_home: bool = False
    #: The PodResources cross-check (``drakit.node_plugin.crosscheck``); None: off.
    podresources: CrossCheckConfig | None = None

    @property
    def plugin_data_dir(self) -> Path:
        return self.plugins_dir / self.driver_name


class DriverCore(Protocol):
    """The driver behind the kubelet-facing gRPC services."""

    def start(self) -> None:
        """Begin background work (health polling, ResourceSlice publishing).

        Called once, before any gRPC server listens; must return promptly.
        """
        ...

    def stop(self) -> None:
        """Stop background work and close health subscriptions; idempotent."""
        ...

    def prepare(self, claims: Sequence[ClaimRef], call: CallContext) -> Mapping[str, PrepareResult]:
        """Prepare claims; the result is keyed by claim UID, every UID present."""
        ...

    def unprepare(self, claims: Sequence[ClaimRef], call: CallContext) -> Mapping[str, str]:
        """Unprepare claims; returns claim UID -> error text ("" on success)."""
        ...

    def supports_health(self) -> bool:
        """True when the backend reports device health (the services are advertised)."""
        ...

    def health_snapshot(self) -> list[DeviceHealth]:
        """Current health of every device this plugin reports on."""
        ...

    def watch_health(self) -> HealthSubscription:
        """Subscribe to health changes; each change batch lists only changed devices."""
        ...
