"""Opaque config validation: upstream's defaults and messages, through the path drakit's
node plugin and ``drakit webhook`` both take (strict JSON validation, then
``validate_config()``), as drakit.testing runs it."""

from __future__ import annotations

from typing import Any

import pytest
from example_driver.api import GpuConfig, NetConfig, OpaqueConfig
from example_driver.driver import ExampleDriver

from drakit.testing import InvalidConfigError, validate_config

GPU = {"apiVersion": "gpu.resource.example.com/v1alpha1", "kind": "GpuConfig"}
NET = {"apiVersion": "net.resource.example.com/v1alpha1", "kind": "NetConfig"}


def refusal(params: dict[str, Any]) -> str:
    with pytest.raises(InvalidConfigError) as err:
        validate_config(ExampleDriver, params)
    return str(err.value)


def test_the_backend_class_validates_with_the_opaque_config_model() -> None:
    # drakit webhook loads the class only (no backend config): its model must be usable.
    assert ExampleDriver.config_model is OpaqueConfig


def test_the_suites_invalid_interval_is_refused_with_upstreams_message() -> None:
    # The suite's invalidGpuConfig (test/e2e/e2e_test.go), as encoding/json writes it.
    params = {
        **GPU,
        "sharing": {
            "strategy": "TimeSlicing",
            "timeSlicingConfig": {"interval": "InvalidInterval"},
        },
    }
    assert refusal(params) == "unknown time-slice interval: InvalidInterval"


@pytest.mark.parametrize(
    ("sharing", "message"),
    [
        ({"strategy": "Magic"}, "unknown GPU sharing strategy: Magic"),
        ({"strategy": "TimeSlicing", "timeSlicingConfig": {}}, "unknown time-slice interval: "),
        (
            {"strategy": "SpacePartitioning", "spacePartitioningConfig": {"partitionCount": -1}},
            "invalid partition count: -1",
        ),
        (
            {
                "strategy": "TimeSlicing",
                "spacePartitioningConfig": {"partitionCount": 2},
            },
            "cannot use SpacePartitioningConfig with the 'TimeSlicing' strategy",
        ),
    ],
)
def test_bad_sharing_settings_are_refused_with_upstreams_messages(
    sharing: dict[str, Any], message: str
) -> None:
    assert refusal({**GPU, "sharing": sharing}) == message


def test_gpu_config_defaults_to_default_time_slicing() -> None:
    config = validate_config(ExampleDriver, GPU)
    assert isinstance(config.root, GpuConfig)  # type: ignore[attr-defined]
    sharing = config.root.normalized()  # type: ignore[attr-defined]
    assert (sharing.strategy, sharing.time_slicing_config.interval) == ("TimeSlicing", "Default")


def test_wrong_kind_version_and_unknown_fields_are_refused_naming_the_field() -> None:
    assert "kind" in refusal({"apiVersion": GPU["apiVersion"], "kind": "TpuConfig"})
    assert "apiVersion" in refusal({**GPU, "apiVersion": "gpu.resource.example.com/v2"})
    assert "sharing.strategi" in refusal({**GPU, "sharing": {"strategi": "TimeSlicing"}})
    assert "partitionCount" in refusal(
        {
            **GPU,
            "sharing": {
                "strategy": "SpacePartitioning",
                "spacePartitioningConfig": {"partitionCount": "2"},
            },
        }
    )


def test_net_config_refuses_bursts_of_4gb_and_more() -> None:
    huge = 8 * (2**32 - 1)
    assert refusal({**NET, "bwBurst": {"ingressBurst": huge, "egressBurst": 0}}) == (
        "invalid ingressBurst: burst cannot be more than 4GB"
    )
    assert refusal({**NET, "bwBurst": {"ingressBurst": 0, "egressBurst": huge}}) == (
        "invalid egressBurst: burst cannot be more than 4GB"
    )
    ok = validate_config(ExampleDriver, {**NET, "bwBurst": {"ingressBurst": huge - 8}})
    assert isinstance(ok.root, NetConfig)  # type: ignore[attr-defined]
