"""Pods waiting for something to change, and what each of them waits for.

A pod that could not be scheduled is *parked* with the reasons it failed. An event wakes only
the pods whose reasons it may resolve:

- ``claim:<ns>/<name>``: the claim is missing, being allocated for another pod, or changed;
- ``class:<name>``: a DeviceClass the pod's claims need does not exist;
- ``capacity``: no node had room; slices, nodes, classes and deallocations may help;
- ``pod``: the pod's own status lacks a generated claim name (its update wakes it).

Thread-safe.
"""

from __future__ import annotations

import threading

__all__ = ["CAPACITY", "WaitingPods", "claim_reason", "class_reason"]

CAPACITY = "capacity"


def claim_reason(namespace: str, name: str) -> str:
    return f"claim:{namespace}/{name}"


def class_reason(name: str) -> str:
    return f"class:{name}"


class WaitingPods:
    """pod key -> reasons, plus the reverse index reason -> pod keys."""

    def __init__(self) -> None:
        self._reasons: dict[str, frozenset[str]] = {}
        self._pods: dict[str, set[str]] = {}
        self._lock = threading.Lock()

    def park(self, pod_key: str, reasons: frozenset[str]) -> None:
        with self._lock:
            self._unpark_locked(pod_key)
            self._reasons[pod_key] = reasons
            for reason in reasons:
                self._pods.setdefault(reason, set()).add(pod_key)

    def unpark(self, pod_key: str) -> None:
        with self._lock:
            self._unpark_locked(pod_key)

    def wake(self, reason: str) -> list[str]:
        """The pods waiting for ``reason``; they are unparked (they get scheduled again)."""
        with self._lock:
            pods = sorted(self._pods.get(reason, ()))
            for pod_key in pods:
                self._unpark_locked(pod_key)
            return pods

    def reasons(self, pod_key: str) -> frozenset[str]:
        with self._lock:
            return self._reasons.get(pod_key, frozenset())

    def __len__(self) -> int:
        with self._lock:
            return len(self._reasons)

    def _unpark_locked(self, pod_key: str) -> None:
        for reason in self._reasons.pop(pod_key, ()):
            pods = self._pods.get(reason)
            if pods is not None:
                pods.discard(pod_key)
                if not pods:
                    del self._pods[reason]
