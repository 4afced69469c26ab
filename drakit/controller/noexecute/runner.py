"""The controller's part of the NoExecute budget: the API version, a watch of the budget's
DeviceTaintRules, one work queue key, and a :class:`~.reconciler.Reconciler` per driver.

Run only while holding the leader Lease (:class:`~drakit.controller.app.Controller` starts it
after its caches synced and stops it with them): one decider, so no race. Every reconcile
decides from the watch of every ResourceSlice (the controller's slice cache) and the watch
of the budget's rules (label ``resource.drakit.dev/noexecute-budget``); a new leader builds a
new runner and reads the rules an earlier one wrote from the API, so no grant lives only in
memory. Writes go through ``fence``: nothing is written while the Lease may be lost.

The API version: the first of ``resource.k8s.io`` v1 (Kubernetes 1.37: GA, on by default),
v1beta2 (1.36: beta, feature gate DRADeviceTaintRules and the runtime-config
``resource.k8s.io/v1beta2=true`` both off by default) and v1alpha3 (1.35: alpha, likewise)
that serves ``devicetaintrules``. Where none does, the budget does not run: devices whose
policy says NoExecute keep NoSchedule and their request, nothing is evicted, and the
controller logs that once (docs/health.md, "Kubernetes 1.35 and 1.36").
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from drakit.controller.noexecute.census import request_key
from drakit.controller.noexecute.decision import Budget
from drakit.controller.noexecute.reconciler import Outcome, Reconciler
from drakit.controller.noexecute.rules import BUDGET_LABEL
from drakit.kubeapi.clusterversion import served_version
from drakit.kubeapi.errors import NotFound
from drakit.kubeapi.informer import EventHandlers, Informer
from drakit.kubeapi.objects import KubeObject
from drakit.kubeapi.resources import Resource, ResourceType
from drakit.kubeapi.workqueue import WorkQueue
from drakit.telemetry.logs import get_logger

__all__ = ["RULE_VERSIONS", "NoExecuteBudget", "rule_type"]

logger = get_logger(__name__)

#: resource.k8s.io versions that may serve DeviceTaintRule, newest first.
RULE_VERSIONS = ("v1", "v1beta2", "v1alpha3")
_KEY = "noexecute-budget"
#: Seconds between reconciles without an event: absent devices' rules are forgotten on
#: time (Budget.forget_after), which no event announces.
_PERIOD = 30.0
#: Seconds before a reconcile is tried again while the rules' watch has not listed yet.
_NOT_SYNCED = 0.5


def rule_type(version: str) -> ResourceType:
    """DeviceTaintRule in ``resource.k8s.io/<version>``."""
    return ResourceType(
        "resource.k8s.io", version, "devicetaintrules", "DeviceTaintRule", namespaced=False
    )


class _Writer:
    """The reconciler's RuleWriter over the API."""

    def __init__(self, rules: Resource) -> None:
        self.rules = rules

    def create(self, rule: dict[str, Any]) -> None:
        self.rules.create(rule)

    def delete(self, name: str) -> None:
        self.rules.delete(name)

    def exists(self, name: str) -> bool:
        try:
            self.rules.get(name)
        except NotFound:
            return False
        return True


class NoExecuteBudget:
    """Grants NoExecute requests within ``budget`` for every driver (see the module
    docstring); ``on_outcome`` gets each reconcile's outcome (the controller's metrics).
    ``start()`` once, ``stop()`` once; build a new one per leadership term."""

    def __init__(
        self,
        api: Any,
        budget: Budget,
        *,
        list_slices: Callable[[], Iterable[KubeObject]],
        fence: Callable[[], bool] = lambda: True,
        node_of: Callable[[str], Mapping[str, Any] | None] = lambda _name: None,
        version: str | None = None,
        clock: Callable[[], float] = time.monotonic,
        on_outcome: Callable[[str, Outcome], None] = lambda _driver, _outcome: None,
    ) -> None:
        self.api = api
        self.budget = budget
        self._list_slices = list_slices
        self._fence = fence
        self._node_of = node_of
        self._clock = clock
        self._on_outcome = on_outcome
        #: The served version (None until start() found it, or when none is served).
        self.version = version
        self.queue: WorkQueue[str] = WorkQueue("drakit-noexecute-budget")
        self.informer: Informer | None = None
        self._writer: _Writer | None = None
        self._reconcilers: dict[str, Reconciler] = {}
        self._lock = threading.Lock()
        #: The outcome of the last reconcile per driver (for metrics and tests).
        self.last: dict[str, Outcome] = {}

    def start(self) -> None:
        """Start deciding in the background: the first reconcile finds the served version
        (asked again after a failure) and starts the rules' watch."""
        self.queue.start(self._sync, workers=1)
        self.kick()

    def stop(self) -> None:
        """Stop deciding; returns after the current reconcile."""
        self.queue.shutdown(wait=True, timeout=30)
        if self.informer is not None:
            self.informer.stop()

    def kick(self) -> None:
        """Reconcile soon (a slice or a rule changed)."""
        self.queue.add(_KEY)

    # -- one reconcile -------------------------------------------------------------------------

    def _sync(self, _key: str) -> float | None:
        if self.informer is None and not self._watch():
            return None
        informer = self.informer
        if informer is None or not informer.has_synced():
            return _NOT_SYNCED
        slices = list(self._list_slices())
        rules = informer.store.objects()
        for driver in sorted(_drivers(slices, rules)):
            outcome = self._reconciler(driver).reconcile(slices, rules, self._clock())
            self.last[driver] = outcome
            _log(driver, outcome)
            self._on_outcome(driver, outcome)
        return _PERIOD

    def _watch(self) -> bool:
        """Find the served version and start the rules' watch; False (logged once) when the
        apiserver serves no DeviceTaintRule. A failure to ask raises: the queue retries."""
        if self.version is None:
            self.version = served_version(self.api, "resource.k8s.io", "devicetaintrules",
                                          RULE_VERSIONS)  # fmt: skip
        if self.version is None:
            logger.warning(
                "The apiserver serves no DeviceTaintRule: the NoExecute budget does not run, "
                "devices whose health policy says NoExecute keep NoSchedule (docs/health.md)"
            )
            return False
        rules = Resource(self.api, rule_type(self.version))
        self._writer = _Writer(rules)
        informer = Informer(rules, label_selector=BUDGET_LABEL, name="devicetaintrules-budget")
        informer.add_handlers(
            EventHandlers(
                on_add=lambda _obj, _initial: self.kick(),
                on_update=lambda _old, _new: self.kick(),
                on_delete=lambda _obj: self.kick(),
            )
        )
        informer.start()
        self.informer = informer
        logger.info(
            "NoExecute budget started",
            version=self.version,
            per_node=self.budget.per_node,
            percent=self.budget.percent,
        )
        return True

    def _reconciler(self, driver: str) -> Reconciler:
        with self._lock:
            reconciler = self._reconcilers.get(driver)
            if reconciler is None:
                assert self.version is not None and self._writer is not None
                reconciler = Reconciler(
                    driver,
                    self.budget,
                    self._writer,
                    f"resource.k8s.io/{self.version}",
                    node_of=self._node_of,
                    fence=self._fence,
                )
                self._reconcilers[driver] = reconciler
            return reconciler


def _drivers(slices: Iterable[KubeObject], rules: Iterable[KubeObject]) -> set[str]:
    """Drivers with a NoExecute request in a slice or a rule of the budget: the others have
    nothing to decide."""
    drivers = {
        str((r.get("metadata") or {}).get("labels", {}).get(BUDGET_LABEL, "")) for r in rules
    }
    for obj in slices:
        spec = obj.get("spec") or {}
        driver = str(spec.get("driver", ""))
        if driver in drivers:
            continue
        key = request_key(driver)
        for device in spec.get("devices") or ():
            taints = device.get("taints") if isinstance(device, dict) else None
            if any(isinstance(t, dict) and t.get("key") == key for t in taints or ()):
                drivers.add(driver)
                break
    drivers.discard("")
    return drivers


def _log(driver: str, outcome: Outcome) -> None:
    for request in outcome.granted:
        logger.info(
            "NoExecute granted",
            driver=driver,
            node=request.node,
            pool=request.device[0],
            device=request.device[1],
        )
    for pool, device in outcome.released:
        logger.info("NoExecute released", driver=driver, pool=pool, device=device)
    for request in outcome.newly_waiting:
        logger.warning(
            "NoExecute request waits: the eviction budget is used up",
            driver=driver,
            node=request.node,
            pool=request.device[0],
            device=request.device[1],
            cap=outcome.plan.cap,
            held=outcome.plan.held,
        )
