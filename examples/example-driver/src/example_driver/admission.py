"""The example driver's admission: ``drakit webhook --backend
example_driver.admission:<Profile>Admission``, one class per device profile, as upstream's
webhook takes ``--device-profile``.

drakit's webhook reads only the class's ``config_model`` (it constructs no backend). Each
model is the profile's own: the gpu profile admits GpuConfig only, the net profile NetConfig
only, and the cpu profile no config at all, as upstream's webhook decodes with the profile's
scheme alone. Their ``validate_config()`` is the admission check (``validate_admission``):
upstream's webhook refuses a config that does not say what it wants (a GpuConfig without
``sharing``, a NetConfig without ``bwBurst``) where the node plugin, like upstream's kubelet
plugin, fills in the defaults, so admission and prepare need different checks. Everything
the kubelet plugin would refuse at prepare is refused at admission too
(docs/reference-parity.md lists where that differs from upstream's webhook, and why).
"""

from __future__ import annotations

from typing import Any, ClassVar

import pydantic

from example_driver.api import GpuConfig, NetConfig

__all__ = ["CpuAdmission", "GpuAdmission", "NetAdmission"]


class GpuAdmissionConfig(GpuConfig):
    """A GpuConfig as admission checks it."""

    def validate_config(self) -> None:
        self.validate_admission()


class NetAdmissionConfig(NetConfig):
    """A NetConfig as admission checks it."""

    def validate_config(self) -> None:
        self.validate_admission()


class NoConfig(pydantic.RootModel[Any]):
    """The cpu profile's parameters: every config is refused."""

    def validate_config(self) -> None:
        raise ValueError("configuration not allowed")


class GpuAdmission:
    """Admission of the gpu profile's config (GpuConfig)."""

    config_model: ClassVar[type[pydantic.BaseModel]] = GpuAdmissionConfig


class NetAdmission:
    """Admission of the net profile's config (NetConfig)."""

    config_model: ClassVar[type[pydantic.BaseModel]] = NetAdmissionConfig


class CpuAdmission:
    """Admission for the cpu profile, which takes no opaque config."""

    config_model: ClassVar[type[pydantic.BaseModel]] = NoConfig
