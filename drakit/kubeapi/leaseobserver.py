"""Watching somebody else's leader Lease: is its holder leading right now?

A component that must not act while another one leads (drakit's scoped claim generation
beside kube-controller-manager) reads that component's Lease and judges it the way a
client-go candidate judges a leader it wants to replace: the Lease is *held* while it names a
holder and we have seen it change within its ``leaseDurationSeconds``, measured on our own
monotonic clock. The Lease's ``renewTime`` is the holder's wall clock and is not trusted: a
skewed clock must not make a live leader look dead.

The observer never writes the Lease.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from drakit.allocator.validation import dns_subdomain_problem
from drakit.kubeapi.errors import NotFound
from drakit.kubeapi.objects import KubeObject
from drakit.kubeapi.resources import LEASES, Resource

__all__ = ["LeaseObserver", "LeaseView", "parse_lease_key"]


@dataclass(frozen=True)
class LeaseView:
    """The Lease as judged at one read."""

    #: ``holderIdentity`` ("" for none, or no Lease at all).
    holder: str
    #: True while the holder is leading as far as we can tell.
    held: bool
    #: Seconds until a held Lease expires unless it changes again (0 when not held).
    expires_in: float
    #: The Lease's resourceVersion; None when there is no Lease.
    version: str | None


class LeaseObserver:
    """Reads one Lease (never writes it) and tells whether its holder leads.

    Thread-safe. ``view()`` may answer from a read up to ``max_age`` seconds old;
    ``unchanged_since()`` always reads the Lease afresh.
    """

    def __init__(
        self,
        api: Any,
        namespace: str,
        name: str,
        *,
        max_age: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        leases: Any = None,
    ) -> None:
        self.namespace = namespace
        self.name = name
        self._leases = leases if leases is not None else Resource(api, LEASES)
        self._max_age = max_age
        self._clock = clock
        self._lock = threading.Lock()
        self._spec: dict[str, Any] | None = None
        self._version: str | None = None
        self._changed_at = 0.0  # when we saw the spec change (monotonic)
        self._read_at: float | None = None

    def view(self) -> LeaseView:
        """The Lease's state now, from a read at most ``max_age`` seconds old.

        Raises the API error of a failed read (NotFound is an answer: no Lease, not held).
        """
        with self._lock:
            fresh = self._read_at is not None and self._clock() - self._read_at < self._max_age
        if not fresh:
            self._read()
        return self._judge()

    def unchanged_since(self, seen: LeaseView) -> bool:
        """Read the Lease now: True when it is the very version ``seen`` was judged from
        (or there still is no Lease). Nobody can have taken or renewed it in between."""
        self._read()
        with self._lock:
            return self._version == seen.version

    def _read(self) -> None:
        try:
            lease: KubeObject | None = self._leases.get(self.name, self.namespace)
        except NotFound:
            lease = None
        spec = dict((lease or {}).get("spec") or {}) if lease is not None else None
        version = str(lease["metadata"].get("resourceVersion")) if lease is not None else None
        now = self._clock()
        with self._lock:
            if self._read_at is None or spec != self._spec:
                self._changed_at = now
            self._spec, self._version, self._read_at = spec, version, now

    def _judge(self) -> LeaseView:
        with self._lock:
            spec, version, changed_at = self._spec, self._version, self._changed_at
        holder = str((spec or {}).get("holderIdentity") or "")
        duration = float((spec or {}).get("leaseDurationSeconds") or 0)
        left = changed_at + duration - self._clock()
        held = bool(holder) and left > 0
        expires_in = left if held else 0.0
        return LeaseView(holder=holder, held=held, expires_in=expires_in, version=version)


def parse_lease_key(text: str) -> tuple[str, str]:
    """``NAMESPACE/NAME`` as a (namespace, name) pair; raises ValueError naming the problem."""
    namespace, sep, name = text.partition("/")
    if not sep or "/" in name:
        raise ValueError(f"{text!r} is not NAMESPACE/NAME")
    for part, what in ((namespace, "namespace"), (name, "name")):
        problem = dns_subdomain_problem(part)
        if problem is not None:
            raise ValueError(f"{text!r}: the {what} {part!r} {problem}")
    return namespace, name
