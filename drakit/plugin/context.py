"""What a backend is given: its construction context, and the context of each kubelet call."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from drakit.telemetry.logs import StructuredLogger, get_logger


@dataclass(frozen=True)
class BackendContext:
    """What a backend is constructed with.

    ``config`` is the parsed ``--backend-config`` document (YAML or JSON; an
    empty mapping when the flag is absent); the backend validates it itself,
    typically with a pydantic model, and raises :class:`BackendConfigError`.
    A program that embeds the plugin makes one with
    :meth:`PluginOptions.backend_context <drakit.plugin.PluginOptions.backend_context>`.
    """

    driver_name: str
    node_name: str
    config: Mapping[str, Any] = field(default_factory=dict)
    config_path: Path | None = None


@dataclass(frozen=True)
class RequestContext:
    """The kubelet call a ``prepare`` or ``unprepare`` runs for.

    ``request_id`` is in every log line of the call (the plugin's and, through ``log``,
    the backend's). ``log`` is bound to the request id and the claim
    (``claim="<namespace>/<name>"``, ``claim_uid``): ``context.log.info("Flashed", slot=3)``.
    ``deadline`` is the :func:`time.monotonic` time at which the kubelet stops waiting
    (its gRPC deadline, 45 s after the call began); None when the caller set none. Work
    that outlives it is wasted: the kubelet has given up and will call again.

    A backend's own tests make one with ``RequestContext("test-1")`` (an unbound logger,
    no deadline).
    """

    request_id: str
    log: StructuredLogger = field(default_factory=lambda: get_logger("drakit.backend"))
    deadline: float | None = None

    def time_left(self) -> float | None:
        """Seconds until the deadline (0 once it has passed); None without a deadline."""
        if self.deadline is None:
            return None
        return max(0.0, self.deadline - time.monotonic())

    def expired(self) -> bool:
        """True once the deadline has passed (never without one)."""
        left = self.time_left()
        return left is not None and left <= 0
