"""Fixtures of the publisher's integration tests (defined in ``publisher_support``)."""

from publisher_support import (
    fake_nodes,
    health_driver,
    health_publishers,
    node,
    node_name,
    publishers,
    slices,
    writes,
)

__all__ = [
    "fake_nodes",
    "health_driver",
    "health_publishers",
    "node",
    "node_name",
    "publishers",
    "slices",
    "writes",
]
