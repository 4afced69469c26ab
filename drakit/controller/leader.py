"""Run the controller only while this replica holds the leader Lease.

With two or more replicas exactly one acts. The informers of a replica start only once it
leads, so its caches list after the previous leader stopped acting (the old leader stops at
its renew deadline, before the Lease can expire for the others): no claim the old leader
created is missing from the new leader's caches, and no work is done twice during a handover.
When leadership is lost the controller stops and ``run_leader_elected`` returns False; the
process should exit so that it starts over with empty state.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Protocol

from drakit.kubeapi.leaderelection import LeaderElectionConfig, LeaderElector
from drakit.telemetry.logs import get_logger

__all__ = ["run_leader_elected"]

logger = get_logger(__name__)


class LeaderRun(Protocol):
    """What runs while leading: the companion controller or the driver controller."""

    fence: Callable[[], bool]

    def run(self, stop: threading.Event) -> None: ...


def run_leader_elected(
    api: Any,
    election: LeaderElectionConfig,
    build: Callable[[], LeaderRun],
    stop: threading.Event,
    *,
    on_leading: Callable[[bool], None] | None = None,
) -> bool:
    """Campaign, run a controller from ``build()`` while leading; True once ``stop`` is set.

    False when leadership was lost, or the election ended by itself for any other reason
    (its thread died of an unexpected error without calling ``on_stopped_leading``): the
    process must then exit non-zero so that it is restarted.
    """
    lost = threading.Event()

    def lead(leading_stopped: threading.Event) -> None:
        if on_leading is not None:
            on_leading(True)
        controller = build()
        # Act only while the Lease is surely ours: a replica paused past its renew deadline
        # wakes with every worker at once, before the elector notices it lost the Lease.
        controller.fence = elector.holds_lease
        controller.run(_either(leading_stopped, stop))

    def stopped_leading() -> None:
        if on_leading is not None:
            on_leading(False)
        if not stop.is_set():
            lost.set()

    elector = LeaderElector(
        api,
        election,
        on_started_leading=lead,
        on_stopped_leading=stopped_leading,
        on_new_leader=lambda holder: logger.info("Leader observed", leader=holder),
    )
    elector.start()
    while not stop.wait(0.5):
        if lost.is_set() or not elector.is_running():
            break
    ended_by_itself = not stop.is_set()
    elector.stop(timeout=30)
    if ended_by_itself and not lost.is_set():
        logger.error("Leader election ended unexpectedly")
    return not ended_by_itself


def _either(a: threading.Event, b: threading.Event) -> threading.Event:
    """An event that is set as soon as ``a`` or ``b`` is."""
    both = threading.Event()

    def watch() -> None:
        while not (a.wait(0.2) or b.is_set()):
            pass
        both.set()

    threading.Thread(target=watch, name="stop-watch", daemon=True).start()
    return both
