"""Prepare runs a config model's validate_config() (the same check as drakit webhook)."""

from __future__ import annotations

import pydantic
import pytest

from drakit.allocator.model import DeviceAllocationConfiguration
from drakit.node_plugin.config import ConfigError, resolve_config, validate_parameters


class Interval(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")
    interval: str = "Default"

    def validate_config(self) -> None:
        if self.interval not in ("Default", "Short"):
            raise ValueError(f"unknown time-slice interval: {self.interval}")


def config(params: object) -> DeviceAllocationConfiguration:
    return DeviceAllocationConfiguration.from_dict(
        {"source": "FromClaim", "requests": [], "opaque": {"driver": "d", "parameters": params}}
    )


def test_prepare_refuses_a_config_its_model_validate_config_rejects() -> None:
    with pytest.raises(ConfigError) as caught:
        resolve_config([config({"interval": "Bogus"})], "d", "gpu", Interval)
    assert str(caught.value) == (
        "invalid opaque config for request 'gpu' (from status.allocation.devices.config[0] "
        "(FromClaim)): unknown time-slice interval: Bogus"
    )


def test_validate_config_runs_only_after_the_fields_validated() -> None:
    with pytest.raises(ConfigError, match=r"^interval: Input should be a valid string$"):
        validate_parameters(Interval, {"interval": 3})


def test_a_model_without_validate_config_is_validated_by_its_fields_alone() -> None:
    class Plain(pydantic.BaseModel):
        interval: str = "x"

    assert validate_parameters(Plain, {"interval": "Bogus"}) == Plain(interval="Bogus")
    assert resolve_config([config({"interval": "Short"})], "d", "gpu", Interval) == Interval(
        interval="Short"
    )
