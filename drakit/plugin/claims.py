"""A claim as the backend sees it: its allocated devices of this driver, with their config."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from drakit.allocator.quantity import Quantity

if TYPE_CHECKING:
    import pydantic


@dataclass(frozen=True)
class ClaimRef:
    """A ResourceClaim by namespace, name and UID: how the kubelet names it in a
    prepare/unprepare call, and what a backend's ``unprepare`` gets. The UID is the key."""

    namespace: str
    uid: str
    name: str


@dataclass(frozen=True)
class DeviceToPrepare:
    """One allocated device of a claim, for this driver.

    ``request`` is the full request name (``req`` or ``req/subrequest``).
    ``config`` is the resolved opaque config for that request, already
    validated against the backend's ``config_model`` (None: no config given).
    ``share_id`` and ``consumed_capacity`` are set for consumable-capacity
    allocations (devices with ``allowMultipleAllocations``).
    """

    request: str
    pool: str
    device: str
    config: pydantic.BaseModel | None = None
    share_id: str | None = None
    consumed_capacity: Mapping[str, Quantity] = field(default_factory=dict)
    admin_access: bool = False


@dataclass(frozen=True)
class ClaimToPrepare:
    """A claim's devices of this driver, in allocation-result order."""

    uid: str
    namespace: str
    name: str
    devices: tuple[DeviceToPrepare, ...]

    @property
    def ref(self) -> ClaimRef:
        """The claim's reference: what ``unprepare`` gets for it later."""
        return ClaimRef(namespace=self.namespace, uid=self.uid, name=self.name)
