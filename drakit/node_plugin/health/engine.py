"""The health policy at work: reports in, taints out, with an Event and metrics per change.

The publisher calls :meth:`HealthEngine.evaluate` with every health report it reads (each
re-discovery, every ``--health-check-interval``, and when a dwell ends). The engine runs the
hysteresis (in time, :mod:`.hysteresis`), maps each unhealthy device's reason to the policy's
effect and returns the taint each device should carry.

A node plugin never puts NoExecute on a device itself (docs/health.md, "The NoExecute budget"):
a device whose policy effect is NoExecute carries NoSchedule and *requests* NoExecute
(:attr:`DeviceTaintDecision.noexecute_requested`; the publisher adds the request taint
``<driver>/noexecute-request`` of effect None). The leader-elected controller alone grants
requests, within the cluster's budget, by writing DeviceTaintRules (drakit.controller.noexecute).

Every change of a device's policy effect (None, NoSchedule, NoExecute; None is "no taint";
NoExecute: NoSchedule and the request) is counted in
``drakit_node_plugin_health_effect_changes_total{driver,from,to}`` and recorded with an Event
on the Node, the first of these that applies:

* ``DeviceUnhealthy`` (Warning) when the device is declared unhealthy, naming the effect;
* ``DeviceRecovered`` (Normal) when it is declared healthy and its taint is lifted;
* ``DeviceTaintEffectChanged`` (Warning when stricter, Normal when milder) for any other
  change while the device stays unhealthy: a new health reason with another effect.

``drakit_node_plugin_health_transitions_total{driver,pool,device,direction}`` counts the
health transitions, ``drakit_node_plugin_health_tainted_devices{driver,effect}`` is a gauge
(effect NoExecute: the devices requesting NoExecute).

``timeAdded``: a taint that a device carries again with the same effect, while it still
carries it or within ``flap_window`` seconds of losing it, keeps the ``timeAdded`` it had,
so that a new reason or a flapping device does not restart the clocks of the claims'
``tolerationSeconds`` (nor move the device's request to the back of the controller's ranking).
A taint of another effect, or one put back later than that, gets a new time from the apiserver.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from drakit.allocator.usage import NOEXECUTE_REQUEST_TAINT_SUFFIX, UNHEALTHY_TAINT_SUFFIX
from drakit.node_plugin.health.hysteresis import DeviceKey, Hysteresis, Observation, Transition
from drakit.node_plugin.health.policy import EFFECTS, HealthPolicy
from drakit.telemetry.families import MetricFamilies
from drakit.telemetry.logs import get_logger
from drakit.telemetry.metrics import Registry

__all__ = ["DeviceTaintDecision", "HealthEngine", "Notify", "PublishedTaint"]

_log = get_logger(__name__)
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?)?$")
#: Shortest wait for a dwell that ends now: a report read that soon settles it.
_MIN_DUE_SECONDS = 0.01

#: Records an Event: (warning?, reason, note).
Notify = Callable[[bool, str, str], None]


@dataclass(frozen=True)
class DeviceTaintDecision:
    """The health taint one device carries: its effect (NoSchedule: a node plugin never
    carries NoExecute), its value (the health reason when it is a valid label value, else
    empty), the ``timeAdded`` to keep (None: the apiserver stamps a new one) and whether the
    device requests NoExecute from the controller (its policy effect is NoExecute)."""

    effect: str
    value: str = ""
    time_added: str | None = None
    noexecute_requested: bool = False


@dataclass(frozen=True)
class PublishedTaint:
    """This driver's health taint as published on one device of this node, and whether the
    device also carries the NoExecute request (a plugin before the controller's budget
    published NoExecute itself: read as a request too)."""

    value: str
    effect: str
    time_added: str = ""
    noexecute_requested: bool = False

    @property
    def policy_effect(self) -> str:
        """The policy effect this taint stands for (NoExecute: requested or carried)."""
        return "NoExecute" if self.noexecute_requested else self.effect


@dataclass(frozen=True)
class _Outcome:
    """One evaluation's results, per device: health transitions, reasons of the unhealthy
    ones and the effects the policy gives them."""

    transitions: Mapping[DeviceKey, Transition]
    reasons: Mapping[DeviceKey, str]
    effects: Mapping[DeviceKey, str]


@dataclass
class _Stamp:
    time_added: str
    lifted_at: float | None  # None: the device carries this taint now


class _Metrics:
    def __init__(self, registry: Registry, driver: str) -> None:
        metric = MetricFamilies(registry, "drakit_node_plugin_health")
        self.driver = driver
        self.transitions = metric.counter(
            "transitions",
            "Device health transitions after hysteresis, by driver, pool, device and direction "
            "(Unhealthy, Recovered).",
            "driver", "pool", "device", "direction",
        )  # fmt: skip
        self.effect_changes = metric.counter(
            "effect_changes",
            "Changes of the health taint effect a device carries (None: no taint), by driver "
            "and the effects before and after.",
            "driver", "from", "to",
        )  # fmt: skip
        self.tainted = metric.gauge(
            "tainted_devices",
            "Devices of this node declared unhealthy, by driver and taint effect (None: "
            "report only).",
            "driver", "effect",
        )  # fmt: skip
        for effect in EFFECTS:
            self.tainted.labels(driver, effect).set(0)


class HealthEngine:
    """Applies ``policy`` to the health reports of ``driver`` on ``node``; the publisher's
    single worker calls it (not thread-safe). ``clock`` (monotonic seconds) times the
    dwells and the flap window."""

    def __init__(
        self,
        driver: str,
        node: str,
        policy: HealthPolicy,
        *,
        registry: Registry,
        notify: Notify,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.policy = policy
        self.node = node
        self.taint_key = f"{driver}{UNHEALTHY_TAINT_SUFFIX}"
        self.request_key = f"{driver}{NOEXECUTE_REQUEST_TAINT_SUFFIX}"
        self._metrics = _Metrics(registry, driver)
        self._notify = notify
        self._clock = clock
        self._hysteresis = Hysteresis(
            policy.unhealthy_for, policy.healthy_for, policy.flap_window, clock=clock
        )
        # Policy effect after the last evaluation (NoExecute: NoSchedule and the request).
        self._effects: dict[DeviceKey, str] = {}
        self._stamps: dict[tuple[DeviceKey, str], _Stamp] = {}  # by carried effect

    def seed(self, published: Mapping[DeviceKey, PublishedTaint]) -> None:
        """Devices that carry this driver's health taint in the published slices start
        unhealthy with that effect and ``timeAdded``: a restart lifts no taint before a full
        dwell, changes no effect by itself, and restarts no toleration clock."""
        self._hysteresis.seed({k: t.value for k, t in published.items()})
        for key, taint in published.items():
            self._effects[key] = taint.policy_effect
            if taint.time_added:
                self._stamps[(key, _carried(taint.effect))] = _Stamp(taint.time_added, None)

    def next_due(self) -> float | None:
        """Seconds until a dwell ends and a report read then may change a device (None: no
        dwell is running)."""
        due = self._hysteresis.next_due()
        if due is None:
            return None
        return max(_MIN_DUE_SECONDS, due - self._clock())

    def evaluate(
        self,
        reports: Sequence[Any],
        published: Mapping[DeviceKey, PublishedTaint] | None = None,
    ) -> dict[DeviceKey, DeviceTaintDecision]:
        """One report of every device's health -> the health taint of each tainted device.

        ``reports`` items have ``pool_name``, ``device_name``, ``health`` (an enum whose
        value, or a string, is Healthy/Unhealthy/Unknown) and optionally ``reason`` and
        ``message``. ``published``: this driver's health taints as this node's slices carry
        them now (their ``timeAdded`` is kept, see the module docstring)."""
        now = self._clock()
        observations = _observations(reports)
        transitions = {t.key: t for t in self._hysteresis.observe(observations)}
        unhealthy = self._hysteresis.unhealthy()
        effects = {k: self.policy.effect_for(reason) for k, reason in unhealthy.items()}
        outcome = _Outcome(transitions, unhealthy, effects)
        reported = {o.key for o in observations}
        for key in sorted(reported):
            self._record(key, outcome)
        self._effects = {k: e for k, e in effects.items() if e != "None"}
        self._count(effects)
        self._remember(published or {}, reported, now)
        return {
            k: DeviceTaintDecision(
                _carried(e),
                _taint_value(unhealthy[k]),
                self._kept_time(k, _carried(e), now),
                noexecute_requested=e == "NoExecute",
            )
            for k, e in effects.items()
            if e != "None"
        }

    # -- records -------------------------------------------------------------------------------

    def _record(self, key: DeviceKey, outcome: _Outcome) -> None:
        """The Event and metrics of ``key``'s health transition and effect change, if any."""
        old, new = self._effects.get(key, "None"), outcome.effects.get(key, "None")
        if old != new:
            self._metrics.effect_changes.labels(self._metrics.driver, old, new).inc()
        transition = outcome.transitions.get(key)
        if transition is not None:
            self._record_transition(transition, old, new)
        elif old != new:
            self._record_effect_change(key, (old, new), outcome.reasons.get(key, ""))

    def _record_transition(self, t: Transition, old: str, new: str) -> None:
        pool, device = t.key
        self._metrics.transitions.labels(self._metrics.driver, pool, device, t.direction).inc()
        if t.direction == "Unhealthy":
            detail = f"{t.reason or 'unhealthy'}" + (f": {t.message}" if t.message else "")
            note = f"device {pool}/{device} is unhealthy ({detail}); taint effect {_described(new)}"
            _log.warning("Device unhealthy", pool=pool, device=device, reason=t.reason,
                         message=t.message, effect=new)  # fmt: skip
            self._notify(True, "DeviceUnhealthy", note)
        else:
            lifted = "it carried no taint" if old == "None" else f"its {old} taint is lifted"
            note = f"device {pool}/{device} is healthy again; {lifted}"
            _log.info("Device recovered", pool=pool, device=device, effect=old)
            self._notify(False, "DeviceRecovered", note)

    def _record_effect_change(self, key: DeviceKey, change: tuple[str, str], reason: str) -> None:
        pool, device = key
        old, new = change
        note = (
            f"device {pool}/{device} taint effect {old} -> {new} (health reason "
            f"{reason or 'none'}: taint effect {_described(new)})"
        )
        stricter = EFFECTS.index(new) > EFFECTS.index(old)
        _log.warning("Device taint effect changed", pool=pool, device=device, old=old, new=new,
                     reason=reason)  # fmt: skip
        self._notify(stricter, "DeviceTaintEffectChanged", note)

    def _count(self, effects: Mapping[DeviceKey, str]) -> None:
        for effect in EFFECTS:
            count = sum(1 for e in effects.values() if e == effect)
            self._metrics.tainted.labels(self._metrics.driver, effect).set(count)

    # -- timeAdded -----------------------------------------------------------------------------

    def _remember(
        self, published: Mapping[DeviceKey, PublishedTaint], reported: set[DeviceKey], now: float
    ) -> None:
        """Learn the ``timeAdded`` of the taints published now; start the flap window of
        those this evaluation takes away; forget what is older than the window."""
        for key, taint in published.items():
            if taint.time_added and taint.effect in ("NoSchedule", "NoExecute"):
                self._stamps[(key, _carried(taint.effect))] = _Stamp(taint.time_added, None)
        for (key, effect), stamp in list(self._stamps.items()):
            if key not in reported:
                del self._stamps[(key, effect)]
            elif stamp.lifted_at is None and _carried(self._effects.get(key, "None")) != effect:
                stamp.lifted_at = now
            elif stamp.lifted_at is not None and now - stamp.lifted_at >= self.policy.flap_window:
                del self._stamps[(key, effect)]

    def _kept_time(self, key: DeviceKey, effect: str, now: float) -> str | None:
        stamp = self._stamps.get((key, effect))
        if stamp is None:
            return None
        if stamp.lifted_at is None or now - stamp.lifted_at < self.policy.flap_window:
            stamp.lifted_at = None  # carried again
            return stamp.time_added
        return None


def _observations(reports: Sequence[Any]) -> list[Observation]:
    return [
        Observation(
            key=(r.pool_name, r.device_name),
            health=str(getattr(r.health, "value", r.health)),
            reason=str(getattr(r, "reason", "") or ""),
            message=str(getattr(r, "message", "") or ""),
        )
        for r in reports
    ]


def _carried(effect: str) -> str:
    """The effect a node plugin's taint carries for a policy effect: NoExecute is requested
    (the controller grants it with a DeviceTaintRule), the plugin carries NoSchedule."""
    return "NoSchedule" if effect == "NoExecute" else effect


def _described(effect: str) -> str:
    """A policy effect as the Events name it."""
    if effect == "NoExecute":
        return "NoSchedule, NoExecute requested from the controller's eviction budget"
    return effect


def _taint_value(reason: str) -> str:
    """The reason as the taint's value when it is a valid label value (the API's rule)."""
    return reason if _LABEL_VALUE.match(reason) else ""
