"""Per-minor facts and what drakit derives from them (pure logic; the real-apiserver
counterpart is tests/compat/test_cluster_detection.py)."""

from __future__ import annotations

import pytest

from drakit.kubeapi.clusterversion import (
    ClusterInfo,
    UnsupportedVersionError,
    allocator_features,
    kubelet_health_services,
    parse_feature_metrics,
    parse_minor,
    slice_fields,
)

METRICS = """# HELP kubernetes_feature_enabled [BETA] Stage and enablement of a k8s feature.
# TYPE kubernetes_feature_enabled gauge
kubernetes_feature_enabled{name="DRAPartitionableDevices",stage="BETA"} 1
kubernetes_feature_enabled{name="DRAConsumableCapacity",stage="BETA"} 0
kubernetes_feature_enabled{name="DynamicResourceAllocation",stage=""} 1
apiserver_request_total{code="200"} 12
"""


def test_feature_gates_are_read_from_the_metrics_text() -> None:
    assert parse_feature_metrics(METRICS) == {
        "DRAPartitionableDevices": True,
        "DRAConsumableCapacity": False,
        "DynamicResourceAllocation": True,
    }


def test_minor_with_a_vendor_suffix_is_understood() -> None:
    assert parse_minor({"major": "1", "minor": "36+"}) == 36


@pytest.mark.parametrize("answer", [{"major": "2", "minor": "0"}, {"major": "1", "minor": "x"}])
def test_a_version_that_is_not_1_x_is_refused_with_its_numbers(answer: dict[str, str]) -> None:
    with pytest.raises(UnsupportedVersionError, match=r"drakit needs Kubernetes 1\.x"):
        parse_minor(answer)


def test_an_unsupported_minor_names_the_supported_ones() -> None:
    with pytest.raises(UnsupportedVersionError, match=r"1\.34 .*1\.35, 1\.36, 1\.37"):
        ClusterInfo("v1.34.4", 34)


def test_1_35_defaults_turn_off_partitionable_consumable_binding_and_taints() -> None:
    info = ClusterInfo("v1.35.4", 35)
    fields = slice_fields(info)
    assert not (fields.counters or fields.consumable_capacity or fields.binding_conditions)
    assert not fields.taints
    features = allocator_features(info)
    assert features.prioritized_list and features.admin_access
    assert not features.partitionable_devices and not features.list_type_attributes


def test_1_36_defaults_keep_every_optional_slice_field() -> None:
    fields = slice_fields(ClusterInfo("v1.36.3", 36))
    assert fields.counters and fields.consumable_capacity and fields.binding_conditions
    assert fields.taints


def test_fractional_capacity_ranges_are_used_from_1_37_only() -> None:
    # The gate does not exist in 1.36: its scheduler rounds capacity with integers.
    on_136 = allocator_features(ClusterInfo("v1.36.3", 36))
    assert on_136.consumable_capacity and not on_136.fractional_capacity_range
    assert allocator_features(ClusterInfo("v1.37.2", 37)).fractional_capacity_range


def test_gates_read_from_the_apiserver_win_over_the_version_defaults() -> None:
    info = ClusterInfo("v1.35.4", 35, gates={"DRAPartitionableDevices": True})
    assert allocator_features(info).partitionable_devices
    assert slice_fields(info).counters


def test_a_gate_the_minor_does_not_know_is_off() -> None:
    assert not ClusterInfo("v1.35.4", 35).gate("DRAListTypeAttributes")


@pytest.mark.parametrize(
    ("minor", "services"),
    [
        (35, ("v1alpha1.DRAResourceHealth",)),
        (36, ("v1alpha1.DRAResourceHealth",)),
        (37, ("v1.DRAResourceHealth", "v1alpha1.DRAResourceHealth")),
    ],
)
def test_kubelet_health_services_follow_what_that_kubelet_calls(
    minor: int, services: tuple[str, ...]
) -> None:
    assert kubelet_health_services(minor) == services
