"""The Node this plugin publishes for: it must exist, and every slice is owned by it.

``spec.nodeName`` of a slice is the kubelet's node name. The owner reference to the Node
(``controller: true``) lets the garbage collector remove the slices when the Node goes.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from drakit.kubeapi.errors import ApiError, NotFound
from drakit.kubeapi.resources import Resource
from drakit.kubeapi.retry import Backoff
from drakit.telemetry.logs import get_logger

__all__ = ["NodeIdentity", "node_identity", "read_node", "wait_for_node"]

_log = get_logger(__name__)


@dataclass(frozen=True)
class NodeIdentity:
    """Name and UID of the Node; ``owner_reference`` is what every slice carries."""

    name: str
    uid: str
    #: The Node's ``status.declaredFeatures`` (what its kubelet supports, 1.35 on).
    declared_features: frozenset[str] = frozenset()

    @property
    def owner_reference(self) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "name": self.name,
            "uid": self.uid,
            "controller": True,
        }


def node_identity(name: str, node: Mapping[str, Any]) -> NodeIdentity:
    """The identity of the Node object ``node`` (its declared features: strings only)."""
    uid = str((node.get("metadata") or {}).get("uid") or "")
    status = node.get("status")
    declared = status.get("declaredFeatures") if isinstance(status, Mapping) else None
    listed = declared if isinstance(declared, list) else ()
    features = frozenset(f for f in listed if isinstance(f, str))
    return NodeIdentity(name=name, uid=uid, declared_features=features)


def read_node(nodes: Resource, name: str) -> NodeIdentity:
    """The Node's current identity; raises NotFound (with a clear message) if it is gone."""
    try:
        node = nodes.get(name)
    except NotFound as err:
        raise NotFound(
            f"Node {name!r} does not exist: not publishing ResourceSlices for it until it does",
            code=err.code,
            reason=err.reason,
        ) from err
    return node_identity(name, node)


def wait_for_node(
    nodes: Resource,
    name: str,
    stop: threading.Event,
    *,
    initial_delay: float = 0.5,
    max_delay: float = 10.0,
) -> NodeIdentity | None:
    """Fetch the Node ``name``, retrying until it exists; None if ``stop`` is set first.

    Each failed attempt is logged as an error that says what is wrong and what to check; the
    retries back off from ``initial_delay`` to ``max_delay`` seconds.
    """
    backoff = Backoff(initial=initial_delay, cap=max_delay)
    while not stop.is_set():
        try:
            node = nodes.get(name)
        except NotFound:
            delay = backoff.next()
            _log.error(
                "Node object not found: ResourceSlices cannot be published until it exists. "
                "The node name must be the kubelet's node name (the pod's spec.nodeName, "
                "usually passed through the downward API); retrying",
                node=name,
                retry_in_seconds=round(delay, 2),
            )
        except ApiError as err:
            delay = backoff.next()
            _log.error(
                "Cannot read the Node object; retrying",
                node=name,
                cause=f"{type(err).__name__}: {err}",
                retry_in_seconds=round(delay, 2),
            )
        else:
            identity = node_identity(name, node)
            _log.info("Found Node object", node=name, uid=identity.uid)
            return identity
        stop.wait(delay)
    return None
