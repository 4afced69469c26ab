"""drakit.testing judges opaque config exactly as the node plugin (at prepare) and
``drakit webhook`` (at admission) do: the same model, the same verdict, the same reason."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pydantic
import pytest

from drakit.allocator.model import DeviceAllocationConfiguration, OpaqueDeviceConfiguration
from drakit.node_plugin.config import ConfigError, resolve_config, validate_parameters
from drakit.plugin import BackendBase
from drakit.testing import InvalidConfigError, admission_verdict, claim, opaque_config
from drakit.testing import validate_config as check
from drakit.webhook.review import answer

DRIVER = "npu.example.com"


class NpuConfig(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")
    mode: str = "whole"

    def validate_config(self) -> None:
        if self.mode not in ("whole", "half"):
            raise ValueError(f"unknown mode: {self.mode}")


class NpuBackend(BackendBase[NpuConfig]):
    name: ClassVar[str] = "npu"
    config_model: ClassVar[type[pydantic.BaseModel]] = NpuConfig


BAD: list[dict[str, Any]] = [{"mode": "quarter"}, {"mode": 2}, {"mdoe": "half"}]


@pytest.mark.parametrize("params", BAD)
def test_the_reason_is_the_one_the_node_plugin_and_the_webhook_give(params: dict[str, Any]) -> None:
    with pytest.raises(InvalidConfigError) as refused:
        check(NpuBackend, params)
    reason = str(refused.value)
    entry = DeviceAllocationConfiguration(
        source="FromClaim", opaque=OpaqueDeviceConfiguration(driver=DRIVER, parameters=params)
    )
    with pytest.raises(ConfigError) as at_prepare:
        resolve_config([entry], DRIVER, "npu", NpuConfig)
    assert str(at_prepare.value).endswith(f": {reason}")
    body = claim("c", DRIVER, config=[opaque_config(DRIVER, params)])
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "u", "operation": "CREATE", "namespace": "ns", "object": body,
        "resource": {"group": "resource.k8s.io", "version": "v1", "resource": "resourceclaims"},
    }}  # fmt: skip
    # drakit webhook's answer, with the check it wires (drakit.cli.webhook.load_validator).
    answered = answer(review, DRIVER, lambda p: validate_parameters(NpuConfig, p))
    message = answered["response"]["status"]["message"]
    assert message.endswith(f"spec.devices.config[0].opaque.parameters: {reason}")
    body["metadata"]["namespace"] = "ns"
    assert admission_verdict(NpuBackend, DRIVER, body) == message


@pytest.fixture
def backend_module(tmp_path: Path) -> Iterator[str]:
    (tmp_path / "npu_driver.py").write_text(
        "import pydantic\nfrom drakit.plugin import BackendBase\n"
        "class Cfg(pydantic.BaseModel):\n    model_config = pydantic.ConfigDict(extra='forbid')\n"
        "    mode: str = 'whole'\n"
        "class Npu(BackendBase):\n    name = 'npu'\n    config_model = Cfg\n"
    )
    sys.path.insert(0, str(tmp_path))
    yield "npu_driver:Npu"
    sys.path.remove(str(tmp_path))
    sys.modules.pop("npu_driver", None)


def test_a_backend_is_named_by_class_by_module_colon_class_or_by_its_model(
    backend_module: str,
) -> None:
    assert check(NpuBackend, {"mode": "half"}) == NpuConfig(mode="half")
    assert check(NpuConfig, {}).mode == "whole"  # type: ignore[attr-defined]
    assert check(backend_module, {"mode": "half"}).mode == "half"  # type: ignore[attr-defined]
    with pytest.raises(InvalidConfigError, match="mdoe"):
        check(backend_module, {"mdoe": "half"})


def test_a_backend_without_a_pydantic_model_is_a_type_error() -> None:
    class NoModel:
        config_model = dict

    with pytest.raises(TypeError, match="config_model must be a pydantic model class"):
        check(NoModel, {})


def test_the_webhook_admits_other_drivers_unchanged_updates_and_templates_it_checks() -> None:
    bad = opaque_config(DRIVER, {"mode": "quarter"})
    other = claim("o", DRIVER, config=[opaque_config("other.example.com", {"mode": 1})])
    assert admission_verdict(NpuBackend, DRIVER, other) is None
    stored = claim("s", DRIVER, config=[bad])
    assert admission_verdict(NpuBackend, DRIVER, stored, old=stored) is None  # a finalizer update
    template = {
        "apiVersion": "resource.k8s.io/v1beta1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "t", "namespace": "ns"},
        "spec": {"spec": {"devices": {"config": [bad]}}},
    }
    assert admission_verdict(NpuBackend, DRIVER, template) == (
        f"ResourceClaimTemplate ns/t: 1 opaque config(s) of driver {DRIVER} are invalid: "
        "spec.spec.devices.config[0].opaque.parameters: unknown mode: quarter"
    )
