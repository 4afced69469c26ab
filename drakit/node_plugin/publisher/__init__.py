"""Publishing the node's devices as ResourceSlices.

``Publisher`` (``publisher.py``) is the entry point (``drakit.node_plugin.wiring`` builds it);
``layout`` splits pools into slices, ``sync`` reconciles one pool, ``naming`` holds the
slice-name rule, ``node`` the Node identity, ``view`` the informer-plus-own-writes cache.
"""

from drakit.node_plugin.publisher.layout import InvalidPoolError, SliceContent
from drakit.node_plugin.publisher.node import NodeIdentity
from drakit.node_plugin.publisher.publisher import PoolDescriptionLike, PoolSource, Publisher
from drakit.node_plugin.publisher.sync import PoolState, PoolSyncer, SyncResult

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
]
