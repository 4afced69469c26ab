"""What the example driver's webhook admits, through the backend the chart gives
``drakit webhook`` and the check that command makes (drakit.testing.validate_config):
upstream's webhook verdicts, and the kubelet plugin's where upstream's webhook crashes or
admits what its own plugin refuses (docs/reference-parity.md). The node plugin keeps
upstream's kubelet-plugin defaults."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from example_driver.driver import ExampleDriver
from test_chart import render

from drakit.testing import InvalidConfigError, validate_config

GPU = {"apiVersion": "gpu.resource.example.com/v1alpha1", "kind": "GpuConfig"}
NET = {"apiVersion": "net.resource.example.com/v1alpha1", "kind": "NetConfig"}
Validator = Callable[[Mapping[str, Any]], object]


def chart_webhook(helm: Path, tmp_path: Path, profile: str) -> Validator:
    """The check ``drakit webhook`` makes with the --backend the chart renders for ``profile``."""
    docs = render(helm, tmp_path, ["webhook.enabled=true", f"deviceProfile={profile}"])
    (deployment,) = [
        d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"].endswith("-webhook")
    ]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    (backend,) = [a.partition("=")[2] for a in container["args"] if a.startswith("--backend=")]
    return lambda params: validate_config(backend, params)


@pytest.fixture
def gpu_webhook(drakit_helm: Path, tmp_path: Path) -> Validator:
    return chart_webhook(drakit_helm, tmp_path, "gpu")


def refusal(validate: Validator, params: Mapping[str, Any]) -> str:
    with pytest.raises(InvalidConfigError) as err:
        validate(params)
    return str(err.value)


def test_a_gpu_config_without_sharing_is_refused_at_admission(gpu_webhook: Validator) -> None:
    # Upstream's webhook validates before it normalises: "no sharing strategy set".
    assert refusal(gpu_webhook, GPU) == "no sharing strategy set"
    assert refusal(gpu_webhook, {**GPU, "sharing": None}) == "no sharing strategy set"


def test_the_node_plugin_still_gives_a_gpu_config_without_sharing_upstreams_default() -> None:
    # Upstream's kubelet plugin normalises first: a DeviceClass's config without sharing
    # (which no webhook sees) prepares as Default time-slicing.
    config = validate_config(ExampleDriver, GPU)
    sharing = config.root.normalized()  # type: ignore[attr-defined]
    assert (sharing.strategy, sharing.time_slicing_config.interval) == ("TimeSlicing", "Default")


@pytest.mark.parametrize(
    ("sharing", "message"),
    [
        (
            {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Short"},
             "spacePartitioningConfig": {"partitionCount": 2}},
            "cannot use SpacePartitioningConfig with the 'TimeSlicing' strategy",
        ),
        (
            {"strategy": "SpacePartitioning", "spacePartitioningConfig": {"partitionCount": 2},
             "timeSlicingConfig": {"interval": "Short"}},
            "cannot use TimeSlicingConfig with the 'SpacePartitioning' strategy",
        ),
    ],
)  # fmt: skip
def test_a_strategy_with_the_other_strategys_settings_is_refused_as_the_kubelet_plugin_does(
    gpu_webhook: Validator, sharing: dict[str, Any], message: str
) -> None:
    # Upstream's webhook admits these and its kubelet plugin refuses them at prepare
    # (GetTimeSlicingConfig/GetSpacePartitioningConfig): refused here, with its message.
    assert refusal(gpu_webhook, {**GPU, "sharing": sharing}) == message
    assert refusal(lambda p: validate_config(ExampleDriver, p), {**GPU, "sharing": sharing}) == (
        message
    )


@pytest.mark.parametrize("strategy", ["TimeSlicing", "SpacePartitioning"])
def test_a_strategy_without_its_settings_is_admitted_with_the_kubelet_plugins_defaults(
    gpu_webhook: Validator, strategy: str
) -> None:
    # Upstream's webhook crashes on these (nil pointer); its kubelet plugin fills in the
    # defaults (Default interval, one partition) and prepares them.
    gpu_webhook({**GPU, "sharing": {"strategy": strategy}})


def test_the_gpu_webhook_refuses_the_net_profiles_kind(gpu_webhook: Validator) -> None:
    assert "kind" in refusal(gpu_webhook, {**NET, "bwBurst": {"ingressBurst": 8}})


def test_the_cpu_webhook_refuses_every_config(drakit_helm: Path, tmp_path: Path) -> None:
    cpu = chart_webhook(drakit_helm, tmp_path, "cpu")
    valid_gpu = {**GPU, "sharing": {"strategy": "TimeSlicing"}}
    for params in (valid_gpu, {**NET, "bwBurst": {}}, {}):
        assert refusal(cpu, params) == "configuration not allowed"


def test_the_net_webhook_wants_a_burst_and_refuses_the_gpu_kind(
    drakit_helm: Path, tmp_path: Path
) -> None:
    net = chart_webhook(drakit_helm, tmp_path, "net")
    net({**NET, "bwBurst": {"ingressBurst": 8}})
    assert refusal(net, NET) == "no burst set"
    assert "kind" in refusal(net, {**GPU, "sharing": {"strategy": "TimeSlicing"}})


@pytest.mark.parametrize(
    ("field", "value", "admitted"),
    [
        ("partitionCount", None, True),  # Go: null leaves 0
        ("partitionCount", 2**63 - 1, True),
        ("partitionCount", 2**63, False),  # beyond Go's int
        ("partitionCount", -(2**63) - 1, False),
        ("partitionCount", 10**30, False),
        ("partitionCount", 2.0, False),  # a float is no Go int
    ],
)
def test_integers_and_null_decode_as_upstreams_go_types(
    gpu_webhook: Validator, field: str, value: Any, admitted: bool
) -> None:
    params = {**GPU, "sharing": {"strategy": "SpacePartitioning",
                                 "spacePartitioningConfig": {field: value}}}  # fmt: skip
    if admitted:
        gpu_webhook(params)
    else:
        assert "partitionCount" in refusal(gpu_webhook, params)


@pytest.mark.parametrize(
    ("sharing", "message"),
    [
        ({"strategy": None}, "unknown GPU sharing strategy: "),
        ({"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": None}},
         "unknown time-slice interval: "),
    ],
)  # fmt: skip
def test_null_for_a_string_is_the_empty_string_as_in_go(
    gpu_webhook: Validator, sharing: dict[str, Any], message: str
) -> None:
    assert refusal(gpu_webhook, {**GPU, "sharing": sharing}) == message
