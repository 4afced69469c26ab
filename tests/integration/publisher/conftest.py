"""Fixtures of the publisher's integration tests (defined in ``publisher_support``)."""

from publisher_support import node, node_name, publishers, slices, writes

__all__ = ["node", "node_name", "publishers", "slices", "writes"]
