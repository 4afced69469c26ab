"""One namespace's slow scheduling cannot hold up another namespace's claims (issue 30,
item 5): claim generation and the claim lifecycle run on workers of their own, and
namespaces take turns in each queue.

The noisy namespace's scheduling attempts are made slow with a test hook (each blocks until
the test ends), so that every scheduling worker is certainly busy: the quiet namespace's
claim must still be generated and, once its pod is gone, deleted.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from conftest import StartController
from controller_harness import Objects

from drakit.kubeapi.objects import KubeObject

pytestmark = pytest.mark.integration

SCHEDULING_WORKERS = 2


class HeldAttempts:
    """Wraps a scheduler's ``schedule``: attempts for pods of ``namespace`` wait until
    ``release()``; ``started`` counts those that began."""

    def __init__(self, schedule: Any, namespace: str) -> None:
        self._schedule = schedule
        self._namespace = namespace
        self._released = threading.Event()
        self.started = threading.Semaphore(0)

    def __call__(self, pod: KubeObject) -> float | None:
        if pod["metadata"]["namespace"] == self._namespace:
            self.started.release()
            self._released.wait(300)
        result: float | None = self._schedule(pod)
        return result

    def release(self) -> None:
        self._released.set()


def test_noisy_namespace_cannot_delay_another_namespaces_claim_deletion(
    objects: Objects,
    namespace: str,
    other_namespace: str,
    start_controller: StartController,
    eventually: Any,
) -> None:
    controller = start_controller(workers=SCHEDULING_WORKERS).controller
    held = HeldAttempts(controller.scheduler.schedule, namespace)
    controller.scheduler.schedule = held  # type: ignore[method-assign]
    try:
        for i in range(3 * SCHEDULING_WORKERS):
            objects.pod(namespace, f"noisy-{i}")
        for _ in range(SCHEDULING_WORKERS):  # every scheduling worker is stuck in the noisy ns
            assert held.started.acquire(timeout=120)
        device_class = objects.device_class()
        objects.template(other_namespace, "gpu", device_class)
        objects.pod(other_namespace, "quiet", templates={"gpu": "gpu"})
        (claim,) = eventually(
            lambda: objects.pod_claims(other_namespace, "quiet"), what="claim generated"
        )
        name = claim["metadata"]["name"]
        objects.pods.delete("quiet", other_namespace)
        eventually(
            lambda: not objects.pod_claims_by_name(other_namespace, name),
            what="generated claim deleted",
        )
    finally:
        held.release()
