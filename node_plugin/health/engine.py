"""The health policy at work: reports in, taints out, with an Event and metrics per change.

The publisher calls :meth:`HealthEngine.evaluate` with every health report it reads (each
re-discovery, every ``--health-check-interval``, and when a dwell ends). The engine runs the
hysteresis (in time, :mod:`.hysteresis`), maps each unhealthy device's reason to a taint
effect, applies the NoExecute budget (asking for the cluster's view only when some device
wants NoExecute) and returns the taint each device should carry.

Every change of a device's effect (None, NoSchedule, NoExecute; None is "no taint") is
counted in ``drakit_node_plugin_health_effect_changes_total{driver,from,to}`` and recorded
with an Event on the Node, the first of these that applies:

* ``DeviceUnhealthy`` (Warning) when the device is declared unhealthy, naming the effect;
* ``DeviceRecovered`` (Normal) when it is declared healthy and its taint is lifted;
* ``DeviceTaintBudgetExceeded`` (Warning) when a device that wants NoExecute newly holds
  NoSchedule because the budget is used up (this Event is also sent when the device's
  effect does not change, or changes with a health transition, so that the alert's cause is
  always on record);
* ``DeviceTaintEffectChanged`` (Warning when stricter, Normal when milder) for any other
  change while the device stays unhealthy: a new health reason with another effect, or the
  budget granting NoExecute after all.

``drakit_node_plugin_health_transitions_total{driver,pool,device,direction}`` counts the
health transitions, ``drakit_node_plugin_health_tainted_devices{driver,effect}`` and
``drakit_node_plugin_health_noexecute_over_budget{driver}`` are gauges.

``timeAdded``: a taint that a device carries again with the same effect, while it still
carries it or within ``flap_window`` seconds of losing it, keeps the ``timeAdded`` it had,
so that a new reason or a flapping device does not restart the clocks of the claims'
``tolerationSeconds`` (nor move the device to the back of the NoExecute ranking). A taint of
another effect, or one put back later than that, gets a new time from the apiserver.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from drakit.node_plugin.health.budget import ClusterTaints, grant
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
    """The health taint one device carries: effect NoSchedule/NoExecute, its value (the
    health reason when it is a valid label value, else empty) and the ``timeAdded`` to keep
    (None: the apiserver stamps a new one)."""

    effect: str
    value: str = ""
    time_added: str | None = None


@dataclass(frozen=True)
class PublishedTaint:
    """This driver's health taint as published on one device of this node."""

    value: str
    effect: str
    time_added: str = ""


@dataclass(frozen=True)
class _Outcome:
    """One evaluation's results, per device: health transitions, reasons of the unhealthy
    ones, the effects the policy wants and the ones they get, and the newly demoted."""

    transitions: Mapping[DeviceKey, Transition]
    reasons: Mapping[DeviceKey, str]
    wanted: Mapping[DeviceKey, str]
    effects: Mapping[DeviceKey, str]
    newly_demoted: set[DeviceKey]


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
        self.over_budget = metric.gauge(
            "noexecute_over_budget",
            "Devices whose policy says NoExecute but that hold NoSchedule because the eviction "
            "budget (per node or cluster-wide) is used up or cannot be read yet.",
            "driver",
        )
        for effect in EFFECTS:
            self.tainted.labels(driver, effect).set(0)
        self.over_budget.labels(driver).set(0)


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
        self.taint_key = f"{driver}/unhealthy"
        self._metrics = _Metrics(registry, driver)
        self._notify = notify
        self._clock = clock
        self._hysteresis = Hysteresis(
            policy.unhealthy_for, policy.healthy_for, policy.flap_window, clock=clock
        )
        self._effects: dict[DeviceKey, str] = {}  # effect carried after the last evaluation
        self._stamps: dict[tuple[DeviceKey, str], _Stamp] = {}
        self._granted: set[DeviceKey] = set()
        self._demoted: set[DeviceKey] = set()
        self._budget_known = True

    def seed(self, published: Mapping[DeviceKey, PublishedTaint]) -> None:
        """Devices that carry this driver's health taint in the published slices start
        unhealthy with that effect and ``timeAdded``: a restart lifts no taint before a full
        dwell, changes no effect by itself, and restarts no toleration clock."""
        self._hysteresis.seed({k: t.value for k, t in published.items()})
        # A NoExecute taint already held stays held while the budget's view is not in yet
        # (the watch cache fills in the background after a restart).
        self._granted = {k for k, t in published.items() if t.effect == "NoExecute"}
        for key, taint in published.items():
            self._effects[key] = taint.effect
            if taint.time_added:
                self._stamps[(key, taint.effect)] = _Stamp(taint.time_added, None)

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
        cluster: Callable[[], ClusterTaints | None],
        published: Mapping[DeviceKey, PublishedTaint] | None = None,
    ) -> dict[DeviceKey, DeviceTaintDecision]:
        """One report of every device's health -> the health taint of each tainted device.

        ``reports`` items have ``pool_name``, ``device_name``, ``health`` (an enum whose
        value, or a string, is Healthy/Unhealthy/Unknown) and optionally ``reason`` and
        ``message``. ``cluster`` returns the driver's NoExecute holders and device count,
        or None when it cannot (then no device newly gets NoExecute). ``published``: this
        driver's health taints as this node's slices carry them now (their ``timeAdded``
        is kept, see the module docstring)."""
        now = self._clock()
        observations = _observations(reports)
        transitions = {t.key: t for t in self._hysteresis.observe(observations)}
        unhealthy = self._hysteresis.unhealthy()
        wanted_effects = {k: self.policy.effect_for(reason) for k, reason in unhealthy.items()}
        wanted = sorted(
            (k for k, e in wanted_effects.items() if e == "NoExecute"),
            key=lambda k: (self._hysteresis.unhealthy_since(k), k),
        )
        granted = self._grant(wanted, cluster) if wanted else set()
        demoted = set(wanted) - granted
        effects = {k: "NoSchedule" if k in demoted else e for k, e in wanted_effects.items()}
        outcome = _Outcome(transitions, unhealthy, wanted_effects, effects, demoted - self._demoted)
        reported = {o.key for o in observations}
        for key in sorted(reported):
            self._record(key, outcome)
        self._report_budget(outcome.newly_demoted, demoted)
        self._granted = granted
        self._effects = {k: e for k, e in effects.items() if e != "None"}
        self._count(effects)
        self._remember(published or {}, reported, now)
        return {
            k: DeviceTaintDecision(e, _taint_value(unhealthy[k]), self._kept_time(k, e, now))
            for k, e in effects.items()
            if e != "None"
        }

    def _grant(
        self, wanted: list[DeviceKey], cluster: Callable[[], ClusterTaints | None]
    ) -> set[DeviceKey]:
        view = cluster()
        self._budget_known = view is not None
        if view is None:
            # Without the cluster's view nothing new is granted: a device keeps NoExecute
            # only if it held it at the last evaluation.
            return self._granted & set(wanted)
        p = self.policy
        return grant(
            self.node,
            wanted,
            view,
            per_node=p.noexecute_per_node,
            percent=p.noexecute_cluster_percent,
        )

    # -- records -------------------------------------------------------------------------------

    def _record(self, key: DeviceKey, outcome: _Outcome) -> None:
        """The Event and metrics of ``key``'s health transition and effect change, if any."""
        old, new = self._effects.get(key, "None"), outcome.effects.get(key, "None")
        if old != new:
            self._metrics.effect_changes.labels(self._metrics.driver, old, new).inc()
        transition = outcome.transitions.get(key)
        if transition is not None:
            self._record_transition(transition, old, new)
        elif old != new and key not in outcome.newly_demoted:
            reason, wanted = outcome.reasons.get(key, ""), outcome.wanted.get(key, "None")
            self._record_effect_change(key, (old, new), reason, wanted)

    def _record_transition(self, t: Transition, old: str, new: str) -> None:
        pool, device = t.key
        self._metrics.transitions.labels(self._metrics.driver, pool, device, t.direction).inc()
        if t.direction == "Unhealthy":
            detail = f"{t.reason or 'unhealthy'}" + (f": {t.message}" if t.message else "")
            policy_effect = self.policy.effect_for(t.reason)
            held = "" if new == policy_effect else f" (the policy says {policy_effect})"
            note = f"device {pool}/{device} is unhealthy ({detail}); taint effect {new}{held}"
            _log.warning("Device unhealthy", pool=pool, device=device, reason=t.reason,
                         message=t.message, effect=new)  # fmt: skip
            self._notify(True, "DeviceUnhealthy", note)
        else:
            lifted = "it carried no taint" if old == "None" else f"its {old} taint is lifted"
            note = f"device {pool}/{device} is healthy again; {lifted}"
            _log.info("Device recovered", pool=pool, device=device, effect=old)
            self._notify(False, "DeviceRecovered", note)

    def _record_effect_change(
        self, key: DeviceKey, change: tuple[str, str], reason: str, wanted: str
    ) -> None:
        pool, device = key
        old, new = change
        budget = "" if new == wanted else ", over the eviction budget"
        note = (
            f"device {pool}/{device} taint effect {old} -> {new} (health reason "
            f"{reason or 'none'}: policy effect {wanted}{budget})"
        )
        stricter = EFFECTS.index(new) > EFFECTS.index(old)
        _log.warning("Device taint effect changed", pool=pool, device=device, old=old, new=new,
                     reason=reason)  # fmt: skip
        self._notify(stricter, "DeviceTaintEffectChanged", note)

    def _report_budget(self, newly_demoted: set[DeviceKey], demoted: set[DeviceKey]) -> None:
        p = self.policy
        why = (
            f"the eviction budget ({p.noexecute_per_node} per node, "
            f"{p.noexecute_cluster_percent:g}% of the driver's devices) is used up"
            if self._budget_known
            else "the eviction budget cannot be checked (the driver's ResourceSlices are not "
            "in view yet)"
        )
        for pool, device in sorted(newly_demoted):
            was = self._effects.get((pool, device), "None")
            change = f" (was {was})" if was not in ("None", "NoSchedule") else ""
            note = f"device {pool}/{device} holds NoSchedule instead of NoExecute{change}: {why}"
            _log.warning("NoExecute budget exceeded", pool=pool, device=device)
            self._notify(True, "DeviceTaintBudgetExceeded", note)
        self._demoted = demoted
        self._metrics.over_budget.labels(self._metrics.driver).set(len(demoted))

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
                self._stamps[(key, taint.effect)] = _Stamp(taint.time_added, None)
        for (key, effect), stamp in list(self._stamps.items()):
            if key not in reported:
                del self._stamps[(key, effect)]
            elif stamp.lifted_at is None and self._effects.get(key) != effect:
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


def _taint_value(reason: str) -> str:
    """The reason as the taint's value when it is a valid label value (the API's rule)."""
    return reason if _LABEL_VALUE.match(reason) else ""
