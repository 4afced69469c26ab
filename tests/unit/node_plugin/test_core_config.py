"""Opaque config resolution: driver filter, request scoping, class then claim, validation."""

from __future__ import annotations

import re
from typing import Any

import pydantic
import pytest

from drakit.allocator.model import DeviceAllocationConfiguration
from drakit.node_plugin.config import ConfigError, base_request, resolve_config


class Params(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")
    mode: str = "a"
    level: int = 0


def cfg(params: Any, source: str = "FromClaim", requests: tuple[str, ...] = (), driver: str = "d"):  # type: ignore[no-untyped-def]
    return DeviceAllocationConfiguration.from_dict(
        {
            "source": source,
            "requests": list(requests),
            "opaque": {"driver": driver, "parameters": params},
        }
    )


def test_base_request_strips_the_subrequest() -> None:
    assert base_request("gpu/big") == "gpu"
    assert base_request("gpu") == "gpu"


def test_no_config_for_this_driver_resolves_to_none() -> None:
    assert resolve_config([cfg({"mode": "x"}, driver="other")], "d", "gpu", Params) is None


def test_claim_config_overrides_class_config_field_by_field() -> None:
    configs = [cfg({"level": 2}, "FromClaim"), cfg({"mode": "class", "level": 1}, "FromClass")]
    assert resolve_config(configs, "d", "gpu", Params) == Params(mode="class", level=2)


def test_later_config_of_same_source_wins() -> None:
    configs = [cfg({"mode": "first"}), cfg({"mode": "second"})]
    assert resolve_config(configs, "d", "gpu", Params) == Params(mode="second")


def test_config_is_scoped_to_named_requests_and_their_subrequests() -> None:
    configs = [cfg({"mode": "only-b"}, requests=("b",)), cfg({"mode": "sub"}, requests=("c/x",))]
    assert resolve_config(configs, "d", "a", Params) is None
    assert resolve_config(configs, "d", "b/any", Params) == Params(mode="only-b")
    assert resolve_config(configs, "d", "c/x", Params) == Params(mode="sub")
    assert resolve_config(configs, "d", "c/y", Params) is None


def test_invalid_config_error_names_request_source_and_field() -> None:
    with pytest.raises(ConfigError) as caught:
        resolve_config([cfg({"level": "high", "extra": 1})], "d", "gpu", Params)
    message = str(caught.value)
    assert "request 'gpu'" in message
    assert "status.allocation.devices.config[0] (FromClaim)" in message
    assert "level: Input should be a valid integer" in message
    assert "extra: Extra inputs are not permitted" in message


def test_non_object_parameters_are_an_error() -> None:
    with pytest.raises(ConfigError, match=r"opaque\.parameters must be an object, got an array"):
        resolve_config([cfg([1, 2])], "d", "gpu", Params)


def test_a_model_given_as_a_function_is_read_only_for_a_request_with_config() -> None:
    asked: list[str] = []

    def model() -> type[pydantic.BaseModel]:
        asked.append("model")
        return Params

    assert resolve_config([cfg({"mode": "x"}, driver="other")], "d", "gpu", model) is None
    assert asked == []
    assert resolve_config([cfg({"mode": "x"})], "d", "gpu", model) == Params(mode="x")
    assert asked == ["model"]


@pytest.mark.parametrize(
    ("params", "problem"),
    [
        ({"sharing": {"strategy": "Sometimes"}}, "sharing.strategy: Input should be 'TimeSlicing'"),
        (
            {
                "sharing": {
                    "strategy": "SpacePartitioning",
                    "spacePartitioningConfig": {"partitionCount": "4"},
                }
            },
            "sharing.spacePartitioningConfig.partitionCount: Input should be a valid integer",
        ),
        (
            {"sharing": {"strategy": "TimeSlicing", "time_slicing_config": {}}},
            "sharing.time_slicing_config: Extra inputs are not permitted",
        ),
        ({"api_version": "v1"}, "api_version: Extra inputs are not permitted"),
    ],
)
def test_the_example_backends_lazily_loaded_model_refuses_bad_opaque_config(
    params: dict[str, Any], problem: str
) -> None:
    from drakit.backends.example import ExampleBackend  # noqa: PLC0415

    with pytest.raises(ConfigError, match=re.escape(problem)):
        resolve_config([cfg(params)], "d", "gpu", lambda: ExampleBackend.config_model)


def test_the_hostdev_backend_accepts_an_empty_opaque_config_and_nothing_else() -> None:
    from drakit.backends.hostdev import HostDevBackend  # noqa: PLC0415

    model = HostDevBackend.config_model
    assert resolve_config([cfg({})], "d", "dev", model) == model()
    with pytest.raises(ConfigError, match="mode: Extra inputs are not permitted"):
        resolve_config([cfg({"mode": "rw"})], "d", "dev", model)
