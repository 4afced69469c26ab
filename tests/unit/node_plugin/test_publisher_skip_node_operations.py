"""Deciding whether a pool is published with ``spec.skipNodeOperations`` (KEP-5945): the
cluster's gate and the Node's declared features. The slices on the real apiserver are
tests/integration/publisher/test_skip_node_operations.py."""

from __future__ import annotations

from typing import Any

import pytest

from drakit.kubeapi.clusterversion import ClusterInfo, slice_fields
from drakit.node_plugin.publisher.node import node_identity
from drakit.plugin import PoolDescription


def test_published_only_where_the_gate_is_known_to_be_on() -> None:
    assert slice_fields(
        ClusterInfo("v1.37.2", 37, gates={"DRAOptionalNodeOperations": True})
    ).skip_node_operations
    assert not slice_fields(
        ClusterInfo("v1.37.2", 37, gates={"DRAOptionalNodeOperations": False})
    ).skip_node_operations
    # Gates unknown (no access to /metrics): an alpha gate counts as off.
    assert not slice_fields(ClusterInfo("v1.37.2", 37)).skip_node_operations
    assert not slice_fields(ClusterInfo("v1.36.3", 36)).skip_node_operations


@pytest.mark.parametrize(
    ("status", "features"),
    [
        ({"declaredFeatures": ["DRAOptionalNodeOperations", "Other"]},
         {"DRAOptionalNodeOperations", "Other"}),
        ({}, set()),
        (None, set()),
        ({"declaredFeatures": "DRAOptionalNodeOperations"}, set()),  # not a list: none
        ({"declaredFeatures": [1, None, "DRAOptionalNodeOperations"]},
         {"DRAOptionalNodeOperations"}),
    ],
)  # fmt: skip
def test_the_nodes_declared_features_are_read_from_its_status(
    status: Any, features: set[str]
) -> None:
    node = {"metadata": {"uid": "u-1"}, "status": status}
    identity = node_identity("node-a", node)
    assert (identity.uid, identity.declared_features) == ("u-1", frozenset(features))


def test_a_pool_needs_node_preparation_unless_the_backend_says_otherwise() -> None:
    assert PoolDescription("node-a", ()).needs_node_preparation is True
    assert not PoolDescription("node-a", (), needs_node_preparation=False).needs_node_preparation
