"""Hysteresis over health reports: a device changes state only after a run of reports.

Each call to :meth:`Hysteresis.observe` is one report per device. A healthy device is declared
unhealthy after ``unhealthy_after`` consecutive Unhealthy reports, and an unhealthy one healthy
again after ``healthy_after`` consecutive Healthy reports. An Unknown report neither extends
nor breaks a run (the backend could not tell). A device missing from a report is forgotten:
it is no longer published either, so there is nothing to taint or lift.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
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
    streak: int = 0  # consecutive reports that contradict the declared state
    reason: str = ""
    message: str = ""
    since: int = 0  # report number at which the device was declared unhealthy


class Hysteresis:
    """Per-device declared health; not thread-safe (the publisher's one worker calls it)."""

    def __init__(self, unhealthy_after: int, healthy_after: int) -> None:
        self._unhealthy_after = unhealthy_after
        self._healthy_after = healthy_after
        self._states: dict[DeviceKey, _State] = {}
        self._reports = 0

    def seed(self, unhealthy: Mapping[DeviceKey, str]) -> None:
        """Start devices as unhealthy with the given reason (taints published before a
        restart), so that a restarted plugin does not lift them for want of a fresh run."""
        for key, reason in unhealthy.items():
            self._states.setdefault(key, _State(unhealthy=True, reason=reason))

    def observe(self, report: Iterable[Observation]) -> list[Transition]:
        """Take one report; return the devices whose declared state changed, in key order."""
        self._reports += 1
        seen: set[DeviceKey] = set()
        transitions: list[Transition] = []
        for obs in report:
            seen.add(obs.key)
            state = self._states.setdefault(obs.key, _State(unhealthy=False))
            changed = self._step(state, obs)
            if changed:
                direction = "Unhealthy" if state.unhealthy else "Recovered"
                transitions.append(Transition(obs.key, direction, state.reason, state.message))
        for gone in set(self._states) - seen:
            del self._states[gone]
        return sorted(transitions, key=lambda t: t.key)

    def _step(self, state: _State, obs: Observation) -> bool:
        if obs.health not in ("Healthy", "Unhealthy"):
            return False  # Unknown: the run neither grows nor breaks
        bad = obs.health == "Unhealthy"
        if bad:
            state.reason, state.message = obs.reason, obs.message
        if bad == state.unhealthy:
            state.streak = 0
            return False
        state.streak += 1
        needed = self._unhealthy_after if bad else self._healthy_after
        if state.streak < needed:
            return False
        state.unhealthy, state.streak = bad, 0
        state.since = self._reports
        return True

    def unhealthy(self) -> dict[DeviceKey, str]:
        """Devices declared unhealthy now, with their reason."""
        return {k: s.reason for k, s in self._states.items() if s.unhealthy}

    def unhealthy_since(self, key: DeviceKey) -> int:
        """Report number at which ``key`` was declared unhealthy (0: seeded or healthy)."""
        state = self._states.get(key)
        return state.since if state is not None else 0
