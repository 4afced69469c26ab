"""Leader election on a coordination.k8s.io/v1 Lease, with client-go's rules.

A candidate takes the Lease when it does not exist, has no holder, or has not been renewed for
``lease_duration`` seconds *as measured on the candidate's own clock* since it last saw the
Lease change (so clock skew between machines does not matter). Writes use the Lease's
resourceVersion, so when two candidates race only one update succeeds. The leader renews every
``retry_period``; if it cannot renew for ``renew_deadline`` it stops leading, which happens before
another candidate may take over (``renew_deadline < lease_duration``). On a clean stop the leader
releases the Lease (empty holder, 1 s duration) so a standby takes over at its next retry instead
of waiting for the Lease to expire.

After leadership ends, ``run`` returns; the process should exit and start over rather than
campaign again with state from its time as leader.
"""

from __future__ import annotations

import datetime as dt
import random
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from drakit.kubeapi.errors import AlreadyExists, ApiError, NotFound
from drakit.kubeapi.objects import KubeObject
from drakit.kubeapi.resources import LEASES, Resource
from drakit.telemetry.logs import get_logger

__all__ = ["LeaderElectionConfig", "LeaderElector", "default_identity"]

logger = get_logger(__name__)

# client-go waits retry_period * (1 + up to 1.2) between attempts to acquire.
JITTER_FACTOR = 1.2


@dataclass(frozen=True)
class LeaderElectionConfig:
    """Where the Lease lives, who we are, and the timings (seconds)."""

    lease_name: str
    namespace: str
    identity: str
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    release_on_stop: bool = True

    def __post_init__(self) -> None:
        if not self.identity:
            raise ValueError("leader election: identity must not be empty")
        if self.lease_duration <= self.renew_deadline:
            raise ValueError(
                f"leader election: lease duration ({self.lease_duration}s) must be greater "
                f"than the renew deadline ({self.renew_deadline}s)"
            )
        if self.renew_deadline <= JITTER_FACTOR * self.retry_period:
            raise ValueError(
                f"leader election: renew deadline ({self.renew_deadline}s) must be greater "
                f"than {JITTER_FACTOR} x the retry period ({self.retry_period}s)"
            )
        if self.lease_duration < 1:
            raise ValueError("leader election: lease duration must be at least 1 s")


class LeaderElector:
    """Campaigns for a Lease and runs ``on_started_leading`` while it holds it.

    ``on_started_leading(stop)`` runs on its own thread once we lead; ``stop`` (an Event) is set
    when leadership ends, and the callback should then return promptly.
    ``on_stopped_leading()`` runs when leadership ends (lost or released); it is not called if
    we never led. ``on_new_leader(identity)`` is told about every change of holder we observe.
    """

    def __init__(
        self,
        api: Any,
        config: LeaderElectionConfig,
        *,
        on_started_leading: Callable[[threading.Event], None],
        on_stopped_leading: Callable[[], None] | None = None,
        on_new_leader: Callable[[str], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self._log = logger.bind(
            lease=f"{config.namespace}/{config.lease_name}", identity=config.identity
        )
        # A renew must not hang longer than the deadline it is racing against.
        timeout = (config.retry_period, max(1.0, config.renew_deadline / 2))
        self._leases = Resource(api, LEASES, request_timeout=timeout)
        self._on_started = on_started_leading
        self._on_stopped = on_stopped_leading
        self._on_new_leader = on_new_leader
        self._clock = clock
        self._stop = threading.Event()  # stop() was called
        self._leading_stopped = threading.Event()  # given to on_started_leading
        self._lock = threading.Lock()
        self._lease: KubeObject | None = None  # the Lease as last read or written
        self._observed_spec: dict[str, Any] | None = None
        self._observed_at = 0.0
        self._last_read: float | None = None  # when we last read the Lease (monotonic)
        self._leader = ""
        self._is_leader = False
        self._renewed_at: float | None = None  # last successful acquire or renew (monotonic)
        self._thread: threading.Thread | None = None
        self._worker: threading.Thread | None = None

    # -- public --------------------------------------------------------------------------------

    def start(self) -> None:
        """Run the election on a background thread."""
        self._thread = threading.Thread(
            target=self.run, name=f"leader-election-{self.config.lease_name}", daemon=True
        )
        self._thread.start()

    def run(self) -> None:
        """Campaign until we lead, lead until we can't renew or ``stop()``, then return."""
        if not self._acquire():
            return
        self._mark_renewed()
        self._leading_stopped.clear()
        self._worker = threading.Thread(
            target=self._run_leader_callback, name="leader", daemon=True
        )
        self._worker.start()
        try:
            self._renew_until_lost()
        finally:
            self._step_down()

    def stop(self, timeout: float | None = 10.0) -> None:
        """Stop campaigning or leading; releases the Lease if we hold it. Idempotent."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def is_running(self) -> bool:
        """True from ``start()`` until the election thread returned: after ``stop()``, after
        leadership was lost, or because it died of an unexpected exception."""
        return self._thread is not None and self._thread.is_alive()

    def is_leader(self) -> bool:
        with self._lock:
            return self._is_leader

    def holds_lease(self) -> bool:
        """True while leading and the last successful renew is younger than the renew
        deadline, on our monotonic clock.

        ``is_leader()`` stays True until the renew loop notices a missed deadline; a process
        paused past it (SIGSTOP, a stalled VM) wakes with all its threads at once, and a
        standby may already lead. Work that must not run twice checks this first.
        """
        with self._lock:
            renewed, leading = self._renewed_at, self._is_leader
        return (
            leading
            and renewed is not None
            and (self._clock() - renewed < self.config.renew_deadline)
        )

    @property
    def leader(self) -> str:
        """The holder we last observed ("" if none)."""
        with self._lock:
            return self._leader

    # -- campaign ------------------------------------------------------------------------------

    def _acquire(self) -> bool:
        self._log.info("Campaigning for leadership")
        while not self._stop.is_set():
            if self._try_acquire_or_renew():
                self._log.info("Became leader")
                return True
            self._stop.wait(self._next_attempt_in())
        return False

    def _next_attempt_in(self) -> float:
        """A jittered retry period, but no later than just after the observed lease expires:
        polling blindly would add up to 2.2 retry periods to every failover."""
        delay = self.config.retry_period * (1 + random.random() * JITTER_FACTOR)
        with self._lock:
            duration = float((self._observed_spec or {}).get("leaseDurationSeconds") or 0)
            until_expiry = self._observed_at + duration - self._clock()
        if self._observed_spec is not None and 0 < until_expiry < delay:
            return until_expiry + 0.05
        return delay

    def _renew_until_lost(self) -> None:
        last_renew = self._clock()
        while not self._stop.wait(self.config.retry_period):
            # Requests must not outlive the deadline: a standby may take over soon after it.
            remaining = self.config.renew_deadline - (self._clock() - last_renew)
            per_request = max(0.2, remaining / 3)  # an attempt makes up to three requests
            self._leases.request_timeout = (min(per_request, self.config.retry_period), per_request)
            if self._try_acquire_or_renew():
                last_renew = self._clock()
                self._mark_renewed()
            elif self._clock() - last_renew >= self.config.renew_deadline:
                self._log.warning("Could not renew the lease in time: leadership lost")
                return

    def _mark_renewed(self) -> None:
        with self._lock:
            self._renewed_at = self._clock()

    def _try_acquire_or_renew(self) -> bool:
        """One attempt; True if we hold the Lease afterwards."""
        now = _now()
        if self.is_leader() and self._lease is not None and self._lease_valid():
            # Fast path: renew from our own last write; a Conflict means someone else wrote.
            spec = self._spec(now, acquire_time=self._observed_spec_value("acquireTime", now))
            spec["leaseTransitions"] = self._observed_spec_value("leaseTransitions", 0)
            if self._write(spec):
                return True
        try:
            lease = self._leases.get(self.config.lease_name, self.config.namespace)
        except NotFound:
            return self._create(self._spec(now, acquire_time=now))
        except ApiError as err:
            self._log.warning("Could not read the lease", cause=str(err))
            return False
        self._lease = lease
        spec = dict(lease.get("spec") or {})
        previous_read, self._last_read = self._last_read, self._clock()
        if spec != self._observed_spec:
            self._observe(spec, changed_after=previous_read)
        holder = spec.get("holderIdentity") or ""
        if holder and holder != self.config.identity and self._lease_valid():
            return False
        wanted = self._spec(now, acquire_time=now)
        if holder == self.config.identity:
            wanted["acquireTime"] = spec.get("acquireTime") or now
            wanted["leaseTransitions"] = spec.get("leaseTransitions") or 0
        else:
            wanted["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
        return self._write(wanted)

    def _create(self, spec: dict[str, Any]) -> bool:
        lease = {
            "metadata": {"name": self.config.lease_name, "namespace": self.config.namespace},
            "spec": spec,
        }
        try:
            self._lease = self._leases.create(lease)
        except AlreadyExists:
            return False
        except ApiError as err:
            self._log.warning("Could not create the lease", cause=str(err))
            return False
        self._observe(spec)
        return True

    def _write(self, spec: dict[str, Any]) -> bool:
        assert self._lease is not None
        lease = {**self._lease, "spec": spec}
        try:
            self._lease = self._leases.update(lease)
        except ApiError as err:
            self._log.debug("Could not update the lease", cause=str(err))
            return False
        self._observe(spec)
        return True

    def _observe(self, spec: dict[str, Any], *, changed_after: float | None = None) -> None:
        """Remember the Lease as seen now.

        Expiry is measured from when *we* saw the Lease change, on our monotonic clock, so
        wall-clock skew cannot make us take a Lease early. client-go uses the time of the read
        that noticed the change, which adds up to a polling interval to every failover. When we
        also read the Lease before (``changed_after``), the change happened between that read
        and now; within that window we trust the Lease's renewTime to say when.
        """
        now = self._clock()
        observed_at = now
        age = _age_seconds(spec.get("renewTime"))
        if changed_after is not None and age is not None:
            observed_at = now - min(max(age, 0.0), now - changed_after)
        holder = spec.get("holderIdentity") or ""
        with self._lock:
            self._observed_spec = spec
            self._observed_at = observed_at
            self._is_leader = holder == self.config.identity
            changed = holder != self._leader
            self._leader = holder
        if changed and self._on_new_leader is not None:
            self._safe(self._on_new_leader, holder)

    def _lease_valid(self) -> bool:
        with self._lock:
            duration = float((self._observed_spec or {}).get("leaseDurationSeconds") or 0)
            return self._clock() < self._observed_at + duration

    def _observed_spec_value(self, field: str, default: Any) -> Any:
        with self._lock:
            return (self._observed_spec or {}).get(field) or default

    def _spec(self, now: str, *, acquire_time: str) -> dict[str, Any]:
        return {
            "holderIdentity": self.config.identity,
            "leaseDurationSeconds": int(self.config.lease_duration),
            "acquireTime": acquire_time,
            "renewTime": now,
        }

    # -- stepping down -------------------------------------------------------------------------

    def _run_leader_callback(self) -> None:
        try:
            self._on_started(self._leading_stopped)
        except Exception:
            self._log.exception("Leader callback failed; stepping down")
            self._stop.set()

    def _step_down(self) -> None:
        with self._lock:
            self._is_leader = False
            self._renewed_at = None
        self._leading_stopped.set()
        if self._stop.is_set() and self.config.release_on_stop:
            self._release()
        if self._worker is not None and self._worker is not threading.current_thread():
            self._worker.join(self.config.renew_deadline)
        self._log.info("Stopped leading")
        if self._on_stopped is not None:
            self._safe(self._on_stopped)

    def _release(self) -> None:
        """Hand the Lease back so a standby need not wait for it to expire."""
        if self._lease is None:
            return
        holder = (self._lease.get("spec") or {}).get("holderIdentity")
        if holder != self.config.identity:
            return
        now = _now()
        spec = {
            "leaseDurationSeconds": 1,
            "acquireTime": now,
            "renewTime": now,
            "leaseTransitions": self._observed_spec_value("leaseTransitions", 0),
        }
        try:
            self._lease = self._leases.update({**self._lease, "spec": spec})
        except ApiError as err:
            self._log.warning("Could not release the lease", cause=str(err))
            return
        self._log.info("Released the lease")

    def _safe(self, fn: Callable[..., None], *args: Any) -> None:
        try:
            fn(*args)
        except Exception:
            self._log.exception("Leader election callback failed")


def _age_seconds(micro_time: Any) -> float | None:
    """Seconds since a MicroTime by our wall clock; None when absent or unparsable."""
    if not isinstance(micro_time, str) or not micro_time:
        return None
    try:
        then = dt.datetime.fromisoformat(micro_time.replace("Z", "+00:00"))
    except ValueError:
        return None
    return (dt.datetime.now(dt.UTC) - then).total_seconds()


def _now() -> str:
    """A MicroTime: RFC 3339 with microseconds, UTC."""
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def default_identity() -> str:
    """A unique candidate name: the host (the pod name in a cluster) plus a random suffix, so
    that a restarted process never mistakes its predecessor's Lease for its own."""
    return f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"
