"""A backend for the webhook tests: only its config model matters to ``drakit webhook``."""

from __future__ import annotations

from typing import ClassVar

import pydantic


class SharingConfig(pydantic.BaseModel):
    """Like the example driver's GpuConfig: a time-slice interval from a fixed set."""

    model_config = pydantic.ConfigDict(extra="forbid")
    interval: str = "Default"
    replicas: int = 1

    def validate_config(self) -> None:
        if self.interval not in ("Default", "Short", "Medium", "Long"):
            raise ValueError(f"unknown time-slice interval: {self.interval}")


class SharingBackend:
    """Never constructed by the webhook."""

    name = "webhook-test"
    config_model: ClassVar[type[pydantic.BaseModel]] = SharingConfig
