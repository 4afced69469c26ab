"""Hysteresis over health reports, in time: a device changes state only after a dwell.

Reports come whenever the publisher reads the backend's health: every health-check interval,
and also whenever the backend announces a change. The rules therefore count seconds on the
injected clock, never reports, so that extra reports (change notices, re-discoveries) cannot
hurry a decision:

* a healthy device is declared **unhealthy** at the first report at which it has been reported
  Unhealthy for ``unhealthy_for`` seconds with no Healthy report in between (measured from
  the first Unhealthy report of that run; 0: at the first Unhealthy report);
* an unhealthy device is declared **healthy** again at the first report at which it has been
  reported Healthy for its *recovery dwell* with no Unhealthy report in between;
* the recovery dwell is ``healthy_for`` seconds, doubled for every *flap*: a device declared
  unhealthy less than ``flap_window`` seconds after its last recovery has flapped once more.
  The dwell is capped at ``max(healthy_for, flap_window)``; a device that stays healthy for
  ``flap_window`` seconds is forgiven (its next failure starts again at ``healthy_for``);
* an Unknown report neither extends nor breaks a run (the backend could not tell), and the
  time it covers counts;
* a device missing from a report is forgotten: it is no longer published either.

:meth:`Hysteresis.next_due` says when the earliest pending dwell ends, so that the caller
can read a report then rather than up to one interval later.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

__all__ = ["DeviceKey", "Hysteresis", "Observation", "Transition"]

#: (pool name, device name)
DeviceKey = tuple[str, str]


@dataclass(frozen=True)
class Observation:
    """One device's health in one report: ``health`` is Healthy, Unhealthy or Unknown."""

    key: DeviceKey
    health: str
    reason: str = ""
    message: str = ""


@dataclass(frozen=True)
class Transition:
    """A device declared ``Unhealthy`` or ``Recovered`` by this report."""

    key: DeviceKey
    direction: str
    reason: str
    message: str


@dataclass
class _State:
    unhealthy: bool
    run_start: float | None = None  # first report of the run contradicting the declared state
    reason: str = ""
    message: str = ""
    since: float = 0.0  # clock time at which the device was declared unhealthy
    flaps: int = 0  # failures within flap_window of the previous recovery, in a row
    recovered_at: float | None = None


class Hysteresis:
    """Per-device declared health; not thread-safe (the publisher's one worker calls it).

    ``clock`` (seconds, monotonic) stamps each report; tests step it by hand."""

    def __init__(
        self,
        unhealthy_for: float,
        healthy_for: float,
        flap_window: float,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._unhealthy_for = unhealthy_for
        self._healthy_for = healthy_for
        self._flap_window = flap_window
        self._clock = clock
        self._states: dict[DeviceKey, _State] = {}

    def seed(self, unhealthy: Mapping[DeviceKey, str]) -> None:
        """Start devices as unhealthy with the given reason (taints published before a
        restart), so that a restarted plugin does not lift them before a full dwell."""
        now = self._clock()
        for key, reason in unhealthy.items():
            self._states.setdefault(key, _State(unhealthy=True, reason=reason, since=now))

    def observe(self, report: Iterable[Observation]) -> list[Transition]:
        """Take one report, stamped now; return the devices whose declared state changed,
        in key order."""
        now = self._clock()
        seen: set[DeviceKey] = set()
        transitions: list[Transition] = []
        for obs in report:
            seen.add(obs.key)
            state = self._states.setdefault(obs.key, _State(unhealthy=False))
            if self._step(state, obs, now):
                direction = "Unhealthy" if state.unhealthy else "Recovered"
                transitions.append(Transition(obs.key, direction, state.reason, state.message))
        for gone in set(self._states) - seen:
            del self._states[gone]
        return sorted(transitions, key=lambda t: t.key)

    def _step(self, state: _State, obs: Observation, now: float) -> bool:
        if obs.health not in ("Healthy", "Unhealthy"):
            return False  # Unknown: the run neither grows nor breaks
        bad = obs.health == "Unhealthy"
        if bad:
            state.reason, state.message = obs.reason, obs.message
        if bad == state.unhealthy:
            state.run_start = None  # a report that agrees with the declared state breaks a run
            return False
        if state.run_start is None:
            state.run_start = now
        if now - state.run_start < self._dwell(state):
            return False
        state.unhealthy, state.run_start = bad, None
        if bad:
            state.since = now
            flapped = (
                state.recovered_at is not None and now - state.recovered_at < self._flap_window
            )
            state.flaps = state.flaps + 1 if flapped else 0
        else:
            state.recovered_at = now
        return True

    def _dwell(self, state: _State) -> float:
        """Seconds a run must last to change ``state``'s declared health."""
        if not state.unhealthy:
            return self._unhealthy_for
        return self.recovery_dwell(state.flaps)

    def recovery_dwell(self, flaps: int) -> float:
        """Seconds of Healthy reports that lift the taint of a device that flapped
        ``flaps`` times in a row: ``healthy_for * 2**flaps``, at most
        ``max(healthy_for, flap_window)``."""
        cap = max(self._healthy_for, self._flap_window)
        return min(cap, self._healthy_for * 2.0 ** min(flaps, 32))

    def next_due(self) -> float | None:
        """Clock time at which the earliest pending run reaches its dwell (None: no run
        is pending). A report read then can change a device's declared state."""
        due = [
            s.run_start + self._dwell(s) for s in self._states.values() if s.run_start is not None
        ]
        return min(due, default=None)

    def unhealthy(self) -> dict[DeviceKey, str]:
        """Devices declared unhealthy now, with their reason."""
        return {k: s.reason for k, s in self._states.items() if s.unhealthy}

    def unhealthy_since(self, key: DeviceKey) -> float:
        """Clock time at which ``key`` was declared unhealthy (seeded: the seed's time)."""
        state = self._states.get(key)
        return state.since if state is not None else 0.0

    def flaps(self, key: DeviceKey) -> int:
        """How often in a row ``key`` failed again within the flap window of a recovery."""
        state = self._states.get(key)
        return state.flaps if state is not None else 0
