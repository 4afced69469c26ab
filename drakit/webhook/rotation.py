"""Keeping the served certificate fresh and trusted, from any number of replicas.

Every :meth:`Rotator.step` (each ``resync`` seconds, sooner when something is due):

1. read the CA state from the store (create it with a fresh CA when there is none; replace
   it when its content is unusable);
2. publish its bundle (:meth:`CAState.bundle`) in the ValidatingWebhookConfiguration and
   note for how long each CA has been there (:class:`TrustClock`);
3. stage a rotation when the served certificate reached two thirds of its life or a user
   asked for one (the ``webhook.drakit.dev/rotate`` annotation): a fresh CA and certificate
   are written as ``next``, trusted from the next publication on but not served; or
   promote the staged certificate once its CA has been in the configuration for
   ``propagation`` seconds (the apiserver's informer has seen it): it becomes ``current``,
   and the CA before it stays trusted as ``previous`` until it expires;
4. serve ``current``, switching only once its CA has been trusted for ``propagation``
   seconds (or at start, or when the certificate served so far is no longer trusted at all:
   the Secret was deleted to revoke it).

Replicas share the store, so they serve the same certificate; every write to it is
optimistic (a lost race is read again), so two replicas never stage two rotations, and
the bundle's canonical order means replicas one read apart publish the same bytes.

``/readyz`` (``ready``) is set once the served certificate's CA has been in the
configuration for ``propagation`` seconds, and it stays set while the apiserver is
unreachable: the trust it has cannot be lost by failing to reach the apiserver, and a
replica that is unready for API trouble would only take capacity away. It is cleared when
the served certificate expires.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from drakit.kubeapi.errors import ApiError, Conflict
from drakit.telemetry.logs import get_logger
from drakit.webhook.cabundle import BundleError, Publication
from drakit.webhook.castate import CAState, StateError
from drakit.webhook.certs import CertificateError

if TYPE_CHECKING:
    from drakit.webhook.castore import Store, Stored
    from drakit.webhook.certs import Issued

__all__ = ["RETRY_SECONDS", "Rotator", "TrustClock"]

logger = get_logger(__name__)

RETRY_SECONDS = (1.0, 2.0, 4.0, 8.0, 15.0)
#: Shortest wait between steps: a state written by this step is published by the next.
MIN_STEP = 0.05
#: Lost write races in a row retried at once; more back off as failures do.
MAX_QUICK_RETRIES = 5


class TrustClock:
    """Since when each CA has been in the configuration's bundle without a break.

    Fed every publication: when the configuration's resourceVersion is still the one this
    process left it at (nobody else wrote in between), the CAs that stayed keep their
    time; when it moved, nothing is known about the gap and every CA starts again.
    """

    def __init__(self, propagation: float) -> None:
        self.propagation = propagation
        self._version: str | None = None
        self._since: dict[bytes, float] = {}

    def observe(self, publication: Publication, cas: Iterable[bytes], now: float) -> None:
        """The bundle of ``cas`` is in the configuration, as ``publication`` left it."""
        kept = self._since if publication.read_version == self._version else {}
        self._since = {ca: kept.get(ca, now) for ca in cas}
        self._version = publication.version

    def wait(self, ca: bytes, now: float) -> float | None:
        """Seconds until ``ca`` counts as trusted (0 when it does); None when it is not in
        the bundle at all."""
        since = self._since.get(ca)
        if since is None:
            return None
        return max(0.0, since + self.propagation - now)

    def trusted(self, ca: bytes, now: float) -> bool:
        return self.wait(ca, now) == 0.0


class Rotator:
    """One replica's share of keeping the certificate fresh, trusted and served.

    ``store`` holds the state; ``issue_certs()`` makes a fresh CA and certificate;
    ``publish(bundle)`` writes the bundle into the configuration; ``serve(issued)`` makes
    the server present a certificate. :meth:`step` does what is due and returns how long to
    wait; tests drive it with a fake clock.
    """

    def __init__(
        self,
        *,
        store: Store,
        issue_certs: Callable[[], Issued],
        publish: Callable[[bytes], Publication],
        serve: Callable[[Issued], None],
        resync: float,
        propagation: float,
        ready: threading.Event | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._issue = issue_certs
        self._publish = publish
        self._serve = serve
        self._resync = resync
        self._clock = clock
        self.trust = TrustClock(propagation)
        #: The certificate served now (None before the first step).
        self.served: Issued | None = None
        #: Set once the served certificate's CA is trusted (``/readyz``).
        self.ready = ready or threading.Event()
        self._failures = self._conflicts = 0

    def step(self) -> float:
        """Read, publish, rotate and serve as due; the seconds until the next step."""
        now = self._clock()
        try:
            state, stored = self._load()
            if self.served is None:  # serve before the apiserver may call
                self._choose_served(state, now)
            self.trust.observe(self._publish(state.bundle(now)), state.trusted(now), now)
            if self._transition(state, stored, now):
                return MIN_STEP  # publish the new state at once
            self._choose_served(state, now)
        except Conflict as exc:  # another replica wrote first: read theirs, at once
            self._conflicts += 1
            return MIN_STEP if self._conflicts <= MAX_QUICK_RETRIES else self._failed(exc, now)
        except (ApiError, BundleError, OSError, StateError, CertificateError) as exc:
            return self._failed(exc, now)
        self._failures = self._conflicts = 0
        self._update_ready(now)
        return self._next_step(state, now)

    def _load(self) -> tuple[CAState, Stored]:
        """The stored state, made first when there is none or it is unusable."""
        stored = self._store.load()
        if stored is None:
            logger.info("Creating the webhook's CA")
            fresh = CAState(current=self._issue())
            return fresh, self._store.create(fresh)
        if stored.state is None:
            logger.warning(
                "The stored CA state is unusable: starting over with a new CA",
                problem=stored.problem,
            )
            fresh = CAState(current=self._issue())
            return fresh, self._store.replace(fresh, stored.version)
        return stored.state, stored

    def _transition(self, state: CAState, stored: Stored, now: float) -> bool:
        """Stage or promote a certificate when due; True when the state was written."""
        if state.next is None:
            requested = bool(stored.rotate_request) and stored.rotate_request != state.rotated_for
            if not requested and now < state.current.renew_at:
                return False
            self._store.replace(
                state.staged(self._issue(), now, stored.rotate_request or state.rotated_for),
                stored.version,
            )
            logger.info(
                "Staged a new CA and serving certificate",
                reason="requested" if requested else "renewal due",
            )
            return True
        if not self.trust.trusted(state.next.ca_pem, now):
            return False
        self._store.replace(state.promoted(), stored.version)
        logger.info("Rotated serving certificate", renew_at=int(state.next.renew_at))
        return True

    def _choose_served(self, state: CAState, now: float) -> None:
        """Serve ``state.current`` when it is trusted, or when there is no better choice."""
        target = state.current
        served = self.served
        if served is not None and served.cert_pem == target.cert_pem:
            return
        if (
            served is None
            or self.trust.trusted(target.ca_pem, now)
            or served.ca_pem not in state.trusted(now)
        ):
            self._serve(target)
            self.served = target
            self.ready.clear()

    def _update_ready(self, now: float) -> None:
        served = self.served
        if served is not None and now < served.not_after and self.trust.trusted(served.ca_pem, now):
            self.ready.set()
        elif served is None or now >= served.not_after:
            self.ready.clear()

    def _next_step(self, state: CAState, now: float) -> float:
        """The resync period, or sooner when a certificate becomes servable or due."""
        waits = [self._resync]
        if state.next is None:
            waits.append(state.current.renew_at - now)
        for ca in (state.next.ca_pem if state.next else None, state.current.ca_pem):
            wait = self.trust.wait(ca, now) if ca is not None else None
            if wait:
                waits.append(wait)
        return max(MIN_STEP, min(waits))

    def _failed(self, exc: Exception, now: float) -> float:
        """Log and retry with backoff; readiness stays unless the served certificate expired."""
        delay = RETRY_SECONDS[min(self._failures, len(RETRY_SECONDS) - 1)]
        self._failures += 1
        if self.served is not None and now >= self.served.not_after:
            self.ready.clear()
        logger.warning(
            "Cannot keep the CA bundle and certificate up to date",
            error=f"{type(exc).__name__}: {str(exc)[:500]}",
            retry_in=delay,
        )
        return delay
