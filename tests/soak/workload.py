"""The seeded workload: pods churning through the stack at a steady rate with bursts.

Kinds of pods (weights in ``KINDS``):

- ``template``: one GPU from a ResourceClaimTemplate, scheduled by kube-scheduler;
- ``drakit``: the same, ``schedulerName: drakit`` (drakit's controller picks the node);
- ``shared``: two or three pods sharing one ResourceClaim (kube-scheduler);
- ``partition``: one partition of the partitionable GPU (shared counters), either scheduler;
- ``matched``: two GPUs with a ``matchAttribute`` constraint, either scheduler;
- ``doomed``: created and deleted again 0-2 s later, while it is being scheduled or prepared.

With ``real_node``, a share (``REAL_SHARE``, drawn from a random stream of its own so the
other choices stay those of the seed without it) of the non-shared pods goes to the real
node instead (``real-kube``, ``real-drakit``): busybox containers that print their GPU
environment and sleep. Both schedulers allocate there, so the real node's devices are split
between them by selector (two allocators must never be able to pick the same device,
controller-semantics.md pitfall 25): kube-scheduler's claims take whole GPUs with index 0-1,
drakit's whole GPUs with index 2-3 or partitions.

Every pod has a deadline: it is deleted ``lifetime`` seconds after creation whether or not it
ever ran, so nothing waits forever. Decisions come from ``random.Random(seed)``; timing
depends on the machine, so two runs with one seed make the same choices in the same order,
not necessarily at the same instants.
"""

from __future__ import annotations

import functools
import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

from drakit.demo.real_node import EXAMPLE_IMAGE
from drakit.kubeapi.errors import ApiError, NotFound
from drakit.kubeapi.objects import KubeObject
from drakit.kubeapi.resources import (
    NAMESPACES,
    PODS,
    RESOURCE_CLAIM_TEMPLATES,
    RESOURCE_CLAIMS,
    Resource,
    ResourceType,
)
from drakit.localcluster.stack import DEVICE_CLASS, DRAKIT_SCHEDULER
from soak.realnode import REAL_LABEL_VALUE
from soak.stack import SCHEDULER_LABEL

SERVICE_ACCOUNTS = ResourceType("", "v1", "serviceaccounts", "ServiceAccount", namespaced=True)
KINDS: tuple[tuple[str, int], ...] = (
    ("template", 30),
    ("drakit", 20),
    ("shared", 10),
    ("partition", 15),
    ("matched", 10),
    ("doomed", 15),
)
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
_MEMORY = f'device.capacity["{DEVICE_CLASS}"].memory'
#: Whole GPUs (80Gi) and partitions (10Gi) of the example backend (soak.stack.BACKEND_CONFIG).
WHOLE_GPU = f'{_MEMORY}.compareTo(quantity("80Gi")) == 0'
PARTITION = f'{_MEMORY}.compareTo(quantity("10Gi")) == 0'
#: The real node's whole GPUs split between the two schedulers (see the module docstring).
_INDEX = f'device.attributes["{DEVICE_CLASS}"].index'
KUBE_HALF = f"{WHOLE_GPU} && {_INDEX} < 2"
DRAKIT_HALF = f"{WHOLE_GPU} && {_INDEX} >= 2"
#: The share of non-shared pods that go to the real node (with ``real_node``).
REAL_SHARE = 0.3
#: What a real-node container runs: its GPU environment (from the claim's CDI spec), then sleep.
REAL_COMMAND = "env | grep '^GPU_' | sort; echo ready; exec sleep 3600"


@dataclass(frozen=True)
class Rates:
    """How hard the workload pushes."""

    pods_per_second: float = 0.5
    burst_every: float = 60.0
    burst_size: int = 6
    max_live: int = 16
    lifetime: tuple[float, float] = (5.0, 30.0)


def _request(name: str, selector: str, count: int = 1) -> dict[str, Any]:
    exactly: dict[str, Any] = {
        "deviceClassName": DEVICE_CLASS,
        "selectors": [{"cel": {"expression": selector}}],
    }
    if count > 1:
        exactly["count"] = count
    return {"name": name, "exactly": exactly}


def claim_spec(kind: str) -> dict[str, Any]:
    """The claim spec a pod of ``kind`` asks for."""
    if kind == "partition":
        return {"devices": {"requests": [_request("part", PARTITION)]}}
    if kind == "matched":
        constraint = {"requests": ["pair"], "matchAttribute": f"{DEVICE_CLASS}/model"}
        return {
            "devices": {
                "requests": [_request("pair", WHOLE_GPU, count=2)],
                "constraints": [constraint],
            }
        }
    return {"devices": {"requests": [_request("gpu", WHOLE_GPU)]}}


TEMPLATES = {"one-gpu": "template", "one-partition": "partition", "matched-pair": "matched"}
#: The real node's claim templates, by name: one device each, from one scheduler's share.
REAL_TEMPLATES = {
    "real-kube-gpu": KUBE_HALF,
    "real-drakit-gpu": DRAKIT_HALF,
    "real-drakit-partition": PARTITION,
}


@dataclass
class LivePod:
    name: str
    kind: str
    delete_at: float
    shared_claim: str | None = None


class Workload:
    """Creates and deletes pods in ``namespace`` from its own thread until stopped."""

    def __init__(
        self,
        client: Any,
        namespace: str,
        seed: int,
        rates: Rates,
        record: Callable[[str, dict[str, Any]], None],
        *,
        real_node: bool = False,
    ) -> None:
        self.namespace = namespace
        self.rng = random.Random(f"workload-{seed}")
        self.real_node = real_node
        self.real_rng = random.Random(f"workload-real-{seed}")
        self.service_accounts = Resource(client, SERVICE_ACCOUNTS)
        self.rates = rates
        self.record = record
        self.pods = Resource(client, PODS)
        self.claims = Resource(client, RESOURCE_CLAIMS)
        self.templates = Resource(client, RESOURCE_CLAIM_TEMPLATES)
        self.namespaces = Resource(client, NAMESPACES)
        self.live: dict[str, LivePod] = {}
        self.shared_users: dict[str, int] = {}
        self.created: Counter[str] = Counter()
        self.deleted = 0
        self.errors = 0
        self._serial = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="workload", daemon=True)

    # -- set-up and lifecycle ------------------------------------------------------------

    def prepare(self) -> None:
        """The namespace and the claim templates."""
        with suppress(ApiError):
            self.namespaces.create({"metadata": {"name": self.namespace}})
        for name, kind in TEMPLATES.items():
            body = {"metadata": {"name": name}, "spec": {"spec": claim_spec(kind)}}
            self.templates.create(body, self.namespace)
        if self.real_node:
            for name, selector in REAL_TEMPLATES.items():
                spec = {"devices": {"requests": [_request("gpu", selector)]}}
                body = {"metadata": {"name": name}, "spec": {"spec": spec}}
                self.templates.create(body, self.namespace)
            self._wait_service_account()

    def _wait_service_account(self, timeout: float = 120.0) -> None:
        """With a real node the ServiceAccount admission runs: a pod is refused until
        kube-controller-manager has created the namespace's ``default`` account."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.service_accounts.get("default", self.namespace)
                return
            except (ApiError, OSError):
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.5)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop creating pods (the live ones stay for the liveness check)."""
        self._stop.set()
        self._thread.join(timeout=60)

    @property
    def churned(self) -> int:
        return sum(self.created.values())

    def _run(self) -> None:
        start = time.monotonic()
        next_burst = start + self.rng.uniform(10.0, self.rates.burst_every)
        credit = 0.0
        while not self._stop.wait(0.5):
            now = time.monotonic()
            self._expire(now)
            credit += 0.5 * self.rates.pods_per_second
            if now >= next_burst:
                credit += self.rates.burst_size
                next_burst = now + self.rng.expovariate(1.0 / self.rates.burst_every)
            while credit >= 1.0 and len(self.live) < self.rates.max_live:
                credit -= 1.0
                self._guarded(lambda: self._create(time.monotonic()))
            credit = min(credit, float(self.rates.burst_size))

    def _guarded(self, action: Callable[[], None]) -> None:
        """API errors are expected while faults run: count them, go on."""
        try:
            action()
        except (ApiError, OSError) as err:
            self.errors += 1
            self.record("workload-error", {"error": f"{type(err).__name__}: {err}"[:300]})

    # -- pods ---------------------------------------------------------------------------

    def _name(self, kind: str) -> str:
        self._serial += 1
        return f"{kind}-{self._serial}"

    def _lifetime(self, kind: str) -> float:
        if kind == "doomed":
            return self.rng.uniform(0.0, 2.0)
        return self.rng.uniform(*self.rates.lifetime)

    def _create(self, now: float) -> None:
        kind = self.rng.choices([k for k, _ in KINDS], [w for _, w in KINDS])[0]
        if kind == "shared":
            self._create_shared(now)
            return
        scheduler = "drakit" if kind == "drakit" else self.rng.choice(["kube", "drakit"])
        if kind in ("template", "shared"):
            scheduler = "kube"
        template = {"partition": "one-partition", "matched": "matched-pair"}.get(kind, "one-gpu")
        name = self._name(kind)
        body = pod_body(name, scheduler, {"resourceClaimTemplateName": template})
        counted = kind
        if self.real_node and self.real_rng.random() < REAL_SHARE:
            counted = f"real-{scheduler}"
            name = name.replace(kind, counted, 1)
            body = real_pod_body(name, scheduler, real_template(kind, scheduler))
        self._create_pod(LivePod(name, counted, now + self._lifetime(kind)), body)

    def _create_shared(self, now: float) -> None:
        claim = self._name("shared-claim")
        self.claims.create(
            {"metadata": {"name": claim}, "spec": claim_spec("shared")}, self.namespace
        )
        self.record("create", {"kind": "ResourceClaim", "name": claim})
        users = self.rng.randint(2, 3)
        self.shared_users[claim] = users
        for _ in range(users):
            name = self._name("shared")
            body = pod_body(name, "kube", {"resourceClaimName": claim})
            live = LivePod(name, "shared", now + self._lifetime("shared"), shared_claim=claim)
            try:
                self._create_pod(live, body)
            except ApiError:
                self._user_gone(claim)
                raise

    def _create_pod(self, live: LivePod, body: KubeObject) -> None:
        self.pods.create(body, self.namespace)
        self.live[live.name] = live
        self.created[live.kind] += 1
        self.record("create", {"kind": "Pod", "name": live.name, "type": live.kind})

    def _expire(self, now: float) -> None:
        for live in [p for p in self.live.values() if p.delete_at <= now]:
            self._guarded(functools.partial(self._delete, live))

    def _delete(self, live: LivePod) -> None:
        with suppress(NotFound):
            self.pods.delete(live.name, self.namespace)
        self.live.pop(live.name, None)
        self.deleted += 1
        self.record("delete", {"kind": "Pod", "name": live.name})
        if live.shared_claim:
            self._user_gone(live.shared_claim)

    def _user_gone(self, claim: str) -> None:
        """Delete a shared claim once the last of its pods was deleted (the claim stays
        reserved, and so allocated, until those pods are gone: the controller's job)."""
        self.shared_users[claim] -= 1
        if self.shared_users[claim] <= 0:
            del self.shared_users[claim]
            with suppress(NotFound):
                self.claims.delete(claim, self.namespace)
            self.record("delete", {"kind": "ResourceClaim", "name": claim})

    def live_pod_names(self) -> list[str]:
        return sorted(self.live)

    def delete_everything(self) -> None:
        """Delete every pod and claim of the workload (the end of a run)."""
        for live in list(self.live.values()):
            self._guarded(functools.partial(self._delete, live))
        for claim in list(self.shared_users):
            self.shared_users[claim] = 1
            self._guarded(functools.partial(self._user_gone, claim))


def real_template(kind: str, scheduler: str) -> str:
    """The real node's claim template for a pod of ``kind`` placed by ``scheduler``."""
    if scheduler == "kube":
        return "real-kube-gpu"
    return "real-drakit-partition" if kind == "partition" else "real-drakit-gpu"


def real_pod_body(name: str, scheduler: str, template: str) -> KubeObject:
    """A busybox pod for the real node: prints its GPU environment, then sleeps."""
    body = pod_body(name, scheduler, {"resourceClaimTemplateName": template})
    spec = body["spec"]
    spec["nodeSelector"] = {SCHEDULER_LABEL: REAL_LABEL_VALUE}
    spec["automountServiceAccountToken"] = False
    spec["containers"][0].update(
        image=EXAMPLE_IMAGE, imagePullPolicy="Never", command=["sh", "-c", REAL_COMMAND]
    )
    return body


def pod_body(name: str, scheduler: str, source: dict[str, str]) -> KubeObject:
    """A pause pod using one claim (``source``) on the nodes of ``scheduler``."""
    spec: dict[str, Any] = {
        "nodeSelector": {SCHEDULER_LABEL: scheduler},
        "resourceClaims": [{"name": "dev", **source}],
        "terminationGracePeriodSeconds": 1,
        "containers": [
            {"name": "main", "image": PAUSE_IMAGE, "resources": {"claims": [{"name": "dev"}]}}
        ],
    }
    if scheduler == "drakit":
        spec["schedulerName"] = DRAKIT_SCHEDULER
    return {"metadata": {"name": name, "labels": {"soak.drakit.dev/kind": "pod"}}, "spec": spec}
