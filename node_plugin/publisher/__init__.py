"""Publishing the node's devices as ResourceSlices (issue 4).

``Publisher`` (``publisher.py``) is the entry point; ``layout`` splits pools into slices,
``sync`` reconciles one pool, ``naming`` holds the slice-name rule, ``node`` the Node
identity, ``view`` the informer-plus-own-writes cache.
"""

from typing import Any

from node_plugin.publisher.layout import InvalidPoolError, SliceContent
from node_plugin.publisher.node import NodeIdentity
from node_plugin.publisher.publisher import PoolDescriptionLike, PoolSource, Publisher
from node_plugin.publisher.sync import PoolState, PoolSyncer, SyncResult

__all__ = [
    "InvalidPoolError",
    "NodeIdentity",
    "PoolDescriptionLike",
    "PoolSource",
    "PoolState",
    "PoolSyncer",
    "Publisher",
    "SliceContent",
    "SyncResult",
    "build_publisher",
]


def build_publisher(config: Any, backend: Any, api: Any, metrics: Any) -> Publisher:
    """The factory ``node_plugin.core`` looks up: a Publisher for the plugin's driver and node.

    ``config`` is the plugin's ``PluginConfig``, ``metrics`` its ``PluginMetrics`` (the
    publisher registers its metrics on the same registry). The core starts and stops it.
    """
    return Publisher(
        api,
        config.driver_name,
        config.node_name,
        backend,
        registry=metrics.registry,
        health=backend.health if getattr(backend, "supports_health", False) else None,
        detect_cluster=True,
    )
