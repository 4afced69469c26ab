"""Reading the claims of a prepare call from the API server, before any lock is taken.

Step 1 and 2 of a prepare (see :mod:`drakit.node_plugin.core`): GET every claim concurrently,
check it is the claim the kubelet named (same UID), allocated and readable, keep this
driver's allocation results and resolve each request's opaque config. A claim that fails
any check becomes a :class:`ClaimError` for that claim only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from drakit.allocator.model import AllocationResult, DeviceRequestAllocationResult, ModelError
from drakit.kubeapi.errors import ApiError, NotFound
from drakit.node_plugin.config import ConfigError, resolve_config
from drakit.node_plugin.fairpool import FairPool
from drakit.plugin.claims import ClaimRef, ClaimToPrepare, DeviceToPrepare

if TYPE_CHECKING:
    from drakit.node_plugin.config import ConfigModel

__all__ = ["ClaimError", "ClaimReader", "ClaimSource", "FetchedClaim", "abandoned", "describe"]

# GETs run in parallel: a batch of 32 claims costs about one round trip.
MAX_PARALLEL_GETS = 16


class ClaimSource(Protocol):
    """Where claims are read (``drakit.kubeapi.resources.Resource`` for ResourceClaims)."""

    def get(self, name: str, namespace: str | None = None) -> Mapping[str, Any]: ...


class ClaimError(Exception):
    """A per-claim failure; ``reason`` is the Event reason (UpperCamelCase).

    ``obj`` is the claim as read, when it was read.
    """

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.obj: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class FetchedClaim:
    """A claim read from the API server and checked, ready to prepare (no lock needed)."""

    ref: ClaimRef
    obj: Mapping[str, Any]
    results: tuple[DeviceRequestAllocationResult, ...]
    to_prepare: ClaimToPrepare


def describe(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


def abandoned(ref: ClaimRef) -> ClaimError:
    """The error of a claim not worked on because its caller had gone."""
    return ClaimError(
        "CallAbandoned",
        f"ResourceClaim {ref.namespace}/{ref.name}: not processed, the caller's deadline "
        "passed or it disconnected first",
    )


class ClaimReader:
    """Reads and checks claims for ``driver``; thread-safe, fair across concurrent calls.

    ``config_model`` is the backend's model of opaque config, or a function returning it
    (called only for a request that has opaque config: see :func:`resolve_config`).
    """

    def __init__(
        self,
        source: ClaimSource,
        driver: str,
        config_model: ConfigModel,
        *,
        parallel: int = MAX_PARALLEL_GETS,
    ) -> None:
        self.source = source
        self.driver = driver
        self.config_model = config_model
        self._pool: FairPool[ClaimRef, FetchedClaim | ClaimError] = FairPool(
            parallel, self._fetch, thread_name_prefix="claim-get"
        )

    def read(
        self, refs: Sequence[ClaimRef], is_active: Callable[[], bool]
    ) -> list[FetchedClaim | ClaimError]:
        """One outcome per ref, in order; refs not started once ``is_active()`` is False
        are abandoned."""
        return self._pool.map(refs, is_active=is_active, skipped=abandoned)

    def close(self) -> None:
        self._pool.shutdown()

    def _fetch(self, ref: ClaimRef) -> FetchedClaim | ClaimError:
        """GET and check one claim; never raises (runs in the thread pool)."""
        try:
            obj = self.source.get(ref.name, ref.namespace)
        except NotFound:
            return ClaimError(
                "ResourceClaimNotFound", f"ResourceClaim {ref.namespace}/{ref.name} not found"
            )
        except ApiError as exc:
            return ClaimError(
                "ResourceClaimUnreadable",
                f"cannot read ResourceClaim {ref.namespace}/{ref.name}: {describe(exc)}",
            )
        try:
            return self.check(ref, obj)
        except ClaimError as exc:
            exc.obj = obj
            return exc

    def check(self, ref: ClaimRef, obj: Mapping[str, Any]) -> FetchedClaim:
        """``obj`` as a claim ready to prepare; ClaimError naming claim and reason."""
        name = f"ResourceClaim {ref.namespace}/{ref.name}"
        uid = obj.get("metadata", {}).get("uid", "")
        if uid != ref.uid:
            raise ClaimError(
                "ResourceClaimReplaced",
                f"{name} has UID {uid}, not {ref.uid}: it was deleted and re-created",
            )
        # Only the allocation is decoded (and validated): prepare reads nothing else, and
        # the whole claim (spec, managed fields) cost most of the decode.
        status = obj.get("status") or {}
        if not isinstance(status, Mapping):
            raise ClaimError("InvalidResourceClaim", f"{name}: status: must be an object")
        raw_allocation = status.get("allocation")
        if raw_allocation is None:
            raise ClaimError("ResourceClaimNotAllocated", f"{name} is not allocated")
        try:
            allocation = AllocationResult.from_dict(raw_allocation, "status.allocation")
        except ModelError as exc:
            raise ClaimError("InvalidResourceClaim", f"{name}: {exc}") from exc
        ours = tuple(r for r in allocation.devices.results if r.driver == self.driver)
        devices = []
        for r in ours:
            try:
                config = resolve_config(
                    allocation.devices.config, self.driver, r.request, self.config_model
                )
            except ConfigError as exc:
                raise ClaimError("InvalidDeviceConfig", f"{name}: {exc}") from exc
            devices.append(
                DeviceToPrepare(
                    request=r.request,
                    pool=r.pool,
                    device=r.device,
                    config=config,
                    share_id=r.share_id,
                    consumed_capacity=dict(r.consumed_capacity),
                    admin_access=bool(r.admin_access),
                )
            )
        to_prepare = ClaimToPrepare(ref.uid, ref.namespace, ref.name, tuple(devices))
        return FetchedClaim(ref, obj, ours, to_prepare)
