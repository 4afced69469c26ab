"""The NoExecute budget's view of the cluster, from a watch cache instead of a LIST.

One informer per node plugin watches every ResourceSlice of the driver (field selector
``spec.driver``, which the apiserver supports for ResourceSlices) and keeps only the
:func:`~.census.summarize` d form of each. :meth:`ClusterTaintCache.view` counts that store
(:func:`~.census.census`): it makes no API call, so it never waits on the apiserver (a 429 with
``Retry-After`` holds up only the informer's own thread).

The informer runs only for a policy that may evict (some reason maps to NoExecute). Its
first list and every relist are one LIST; between them it is one watch. Until its first list
has arrived the view is None, and the budget then grants NoExecute to no device that does
not hold it already. A watch that breaks leaves the last state in place while the informer
lists again with back-off; the budget decides from that state meanwhile.
"""

from __future__ import annotations

from functools import partial

from drakit.kubeapi.informer import Informer
from drakit.kubeapi.resources import Resource
from drakit.node_plugin.health.census import Census, census, summarize

__all__ = ["ClusterTaintCache"]


class ClusterTaintCache:
    """The driver's slices, summarized, from one watch; ``start``/``stop`` once each."""

    def __init__(self, slices: Resource, driver: str, *, taint_key: str, node_label: str) -> None:
        self.informer = Informer(
            slices,
            field_selector=f"spec.driver={driver}",
            transform=partial(summarize, taint_key=taint_key, node_label=node_label),
            name=f"resourceslices-{driver}-budget",
        )

    def start(self) -> None:
        """Begin listing and watching in the background; returns at once."""
        self.informer.start()

    def stop(self) -> None:
        """Stop watching. Waits at most a second: a list that the apiserver asked to retry
        later holds its thread in the client's wait, and the cache holds nothing to flush."""
        self.informer.stop(timeout=1.0)

    def view(self) -> Census | None:
        """The census of the cached slices, or None before the first list arrived."""
        if not self.informer.has_synced():
            return None
        return census(self.informer.store.objects())
