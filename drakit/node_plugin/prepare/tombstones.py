"""Tombstones of unprepared claims: a prepare that began before its claim's unprepare ended
does not prepare the claim again.

A prepare reads its claims before it takes the serialize lock (stage 1), so an unprepare of
the same claim can take the lock in between and finish first. The kubelet does send the two
together: its reconcile loop unprepares the claims of a pod that is gone while that pod's
worker is still waiting on its prepare call, and once the unprepare answered, the kubelet
has forgotten the claim (k8s.io/kubernetes pkg/kubelet/cm/dra/manager.go, v1.37). Preparing
it then would leave a CDI spec, metadata files and a checkpoint entry nobody unprepares.

So every successful unprepare leaves a tombstone for its claim UID, stamped after its
checkpoint save, and a prepare that began before that stamp refuses the claim. A prepare
that begins after it is a new prepare (the kubelet keeps track of the claim again) and runs.

Tombstones live only as long as a prepare that could be refused by them is in flight, so
the memory they take is bounded by the unprepares during the longest prepare call. They are
in memory: the other plugin instance of a rolling update does not see them.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

__all__ = ["UnprepareTombstones"]


class UnprepareTombstones:
    """Which claim UIDs were unprepared after a prepare began; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._clock = 0  # one tick per batch of tombstones
        self._stones: dict[str, int] = {}  # claim UID -> tick of its latest unprepare
        self._in_flight: Counter[int] = Counter()  # tick a prepare began at -> prepares

    @contextmanager
    def prepare_in_flight(self) -> Iterator[int]:
        """Around one whole prepare call, from before it reads its claims; yields the tick it
        began at, for :meth:`unprepared_since`."""
        with self._lock:
            began = self._clock
            self._in_flight[began] += 1
        try:
            yield began
        finally:
            with self._lock:
                self._in_flight[began] -= 1
                if not self._in_flight[began]:
                    del self._in_flight[began]
                self._prune()

    def unprepared(self, uids: Iterable[str]) -> None:
        """Tombstones for ``uids``, whose unprepare is saved (call under the serialize lock,
        before it is released)."""
        uids = list(uids)
        with self._lock:
            if not self._in_flight or not uids:
                return  # no prepare in flight began before this
            self._clock += 1
            for uid in uids:
                self._stones[uid] = self._clock

    def unprepared_since(self, uid: str, began: int) -> bool:
        """True when claim ``uid`` was unprepared after the prepare that began at ``began``."""
        with self._lock:
            return self._stones.get(uid, -1) > began

    def count(self) -> int:
        """How many tombstones are kept now."""
        with self._lock:
            return len(self._stones)

    def _prune(self) -> None:
        """Drop the tombstones no prepare in flight began before (``_lock`` held)."""
        if not self._stones:
            return
        oldest = min(self._in_flight, default=self._clock)
        self._stones = {uid: tick for uid, tick in self._stones.items() if tick > oldest}
