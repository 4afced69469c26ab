"""The health policy at work: reports in, taints out, with an Event and metrics per transition.

The publisher calls :meth:`HealthEngine.evaluate` with every health report it reads (each
re-discovery, and every ``--health-check-interval``). The engine runs the hysteresis, maps
each unhealthy device's reason to a taint effect, applies the NoExecute budget (asking for
the cluster's view only when some device wants NoExecute) and returns the taint each device
should carry. It records what operators watch:

* Events on the Node: ``DeviceUnhealthy`` (Warning), ``DeviceRecovered`` (Normal) on every
  transition, ``DeviceTaintBudgetExceeded`` (Warning) when a device gets NoSchedule instead
  of NoExecute;
* metrics ``drakit_node_plugin_health_transitions_total{driver,pool,device,direction}``,
  ``drakit_node_plugin_health_tainted_devices{driver,effect}`` and
  ``drakit_node_plugin_health_noexecute_over_budget{driver}``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from drakit.node_plugin.health.budget import ClusterTaints, grant
from drakit.node_plugin.health.hysteresis import DeviceKey, Hysteresis, Observation, Transition
from drakit.node_plugin.health.policy import EFFECTS, HealthPolicy
from drakit.telemetry.families import MetricFamilies
from drakit.telemetry.logs import get_logger
from drakit.telemetry.metrics import Registry

__all__ = ["DeviceTaintDecision", "HealthEngine", "Notify"]

_log = get_logger(__name__)
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?)?$")

#: Records an Event: (warning?, reason, note).
Notify = Callable[[bool, str, str], None]


@dataclass(frozen=True)
class DeviceTaintDecision:
    """The health taint one device carries: effect NoSchedule/NoExecute and its value (the
    health reason when it is a valid label value, else empty)."""

    effect: str
    value: str = ""


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
        self.tainted = metric.gauge(
            "tainted_devices",
            "Devices of this node declared unhealthy, by driver and taint effect (None: "
            "report only).",
            "driver", "effect",
        )  # fmt: skip
        self.over_budget = metric.gauge(
            "noexecute_over_budget",
            "Devices whose policy says NoExecute but that hold NoSchedule because the eviction "
            "budget (per node or cluster-wide) is used up.",
            "driver",
        )
        for effect in EFFECTS:
            self.tainted.labels(driver, effect).set(0)
        self.over_budget.labels(driver).set(0)


class HealthEngine:
    """Applies ``policy`` to the health reports of ``driver`` on ``node``; the publisher's
    single worker calls it (not thread-safe)."""

    def __init__(
        self,
        driver: str,
        node: str,
        policy: HealthPolicy,
        *,
        registry: Registry,
        notify: Notify,
    ) -> None:
        self.policy = policy
        self.node = node
        self.taint_key = f"{driver}/unhealthy"
        self._metrics = _Metrics(registry, driver)
        self._notify = notify
        self._hysteresis = Hysteresis(policy.unhealthy_after, policy.healthy_after)
        self._granted: set[DeviceKey] = set()
        self._demoted: set[DeviceKey] = set()

    def seed(self, published: Mapping[DeviceKey, str]) -> None:
        """Devices that carry this driver's health taint in the published slices (key ->
        taint value) start unhealthy: a restart does not lift a taint for want of a new run.
        Those with NoExecute keep their place in the budget through ``timeAdded``."""
        self._hysteresis.seed(published)

    def evaluate(
        self, reports: Sequence[Any], cluster: Callable[[], ClusterTaints | None]
    ) -> dict[DeviceKey, DeviceTaintDecision]:
        """One report of every device's health -> the health taint of each tainted device.

        ``reports`` items have ``pool_name``, ``device_name``, ``health`` (an enum whose
        value, or a string, is Healthy/Unhealthy/Unknown) and optionally ``reason`` and
        ``message``. ``cluster`` returns the driver's NoExecute holders and device count,
        or None when it cannot (then no device newly gets NoExecute)."""
        for transition in self._hysteresis.observe(_observations(reports)):
            self._record(transition)
        unhealthy = self._hysteresis.unhealthy()
        effects = {k: self.policy.effect_for(reason) for k, reason in unhealthy.items()}
        wanted = sorted(
            (k for k, e in effects.items() if e == "NoExecute"),
            key=lambda k: (self._hysteresis.unhealthy_since(k), k),
        )
        granted = self._grant(wanted, cluster) if wanted else set()
        demoted = set(wanted) - granted
        self._report_budget(demoted)
        for key in demoted:
            effects[key] = "NoSchedule"
        self._granted = granted
        self._count(effects)
        return {
            k: DeviceTaintDecision(e, _taint_value(unhealthy[k]))
            for k, e in effects.items()
            if e != "None"
        }

    def _grant(
        self, wanted: list[DeviceKey], cluster: Callable[[], ClusterTaints | None]
    ) -> set[DeviceKey]:
        view = cluster()
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

    def _record(self, t: Transition) -> None:
        pool, device = t.key
        self._metrics.transitions.labels(self._metrics.driver, pool, device, t.direction).inc()
        if t.direction == "Unhealthy":
            effect = self.policy.effect_for(t.reason)
            detail = f"{t.reason or 'unhealthy'}" + (f": {t.message}" if t.message else "")
            note = f"device {pool}/{device} is unhealthy ({detail}); policy taint effect {effect}"
            _log.warning("Device unhealthy", pool=pool, device=device, reason=t.reason,
                         message=t.message, effect=effect)  # fmt: skip
            self._notify(True, "DeviceUnhealthy", note)
        else:
            note = f"device {pool}/{device} is healthy again; its health taint is lifted"
            _log.info("Device recovered", pool=pool, device=device)
            self._notify(False, "DeviceRecovered", note)

    def _report_budget(self, demoted: set[DeviceKey]) -> None:
        for pool, device in sorted(demoted - self._demoted):
            note = (
                f"device {pool}/{device} gets NoSchedule instead of NoExecute: the eviction "
                f"budget ({self.policy.noexecute_per_node} per node, "
                f"{self.policy.noexecute_cluster_percent:g}% of the driver's devices) is used up"
            )
            _log.warning("NoExecute budget exceeded", pool=pool, device=device)
            self._notify(True, "DeviceTaintBudgetExceeded", note)
        self._demoted = demoted
        self._metrics.over_budget.labels(self._metrics.driver).set(len(demoted))

    def _count(self, effects: Mapping[DeviceKey, str]) -> None:
        for effect in EFFECTS:
            count = sum(1 for e in effects.values() if e == effect)
            self._metrics.tainted.labels(self._metrics.driver, effect).set(count)


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
