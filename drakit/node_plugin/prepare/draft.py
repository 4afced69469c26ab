"""A claim between the backend and the checkpoint: what the outputs read and add to.

The backend stage makes a :class:`Draft` of every claim it prepared; the outputs
(:mod:`drakit.node_plugin.prepare.output`) write from it, in order, and may add to it:
container edits a request's containers get (:class:`RequestEdits`, e.g. the mount of a
device metadata file), fields of the checkpoint record (``record``), the devices of the
answer (``devices``, set by the CDI spec output, which names their CDI IDs). Once every
output wrote, :meth:`Draft.entry` is the claim's ``PrepareCompleted`` record.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from drakit.node_plugin.checkpoint import COMPLETED, ClaimEntry
from drakit.node_plugin.claims import ClaimError, FetchedClaim
from drakit.node_plugin.driver import PreparedDevice
from drakit.plugin.edits import ContainerEdits
from drakit.plugin.prepared import BackendPrepared


@dataclass(frozen=True)
class RequestEdits:
    """Container edits for the containers of one request of the claim.

    ``request`` is a base request name (no ``/subrequest``); ``name`` names them where
    they are delivered (the CDI device name: the CDI spec output gives them a device of
    their own, whose ID rides on the request's first device, as upstream's helper does).
    """

    request: str
    name: str
    edits: ContainerEdits


@dataclass
class Draft:
    """One claim the backend prepared, on its way through the outputs (under the lock)."""

    claim: FetchedClaim
    prepared: BackendPrepared
    backend: str  # the backend's name, for messages
    request_edits: list[RequestEdits] = field(default_factory=list)
    record: dict[str, Any] = field(default_factory=dict)  # the checkpoint entry's extra fields
    devices: tuple[PreparedDevice, ...] = ()

    @property
    def uid(self) -> str:
        return self.claim.ref.uid

    @property
    def title(self) -> str:
        """The claim as errors name it."""
        return f"ResourceClaim {self.claim.ref.namespace}/{self.claim.ref.name}"

    def failure(self, reason: str, message: str) -> ClaimError:
        """The claim's error (``reason`` is the Event reason), naming the claim."""
        return ClaimError(reason, f"{self.title}: {message}")

    def backend_failure(self, field_name: str, exc: Exception) -> ClaimError:
        """A ``PrepareFailed`` error for a part of the backend's answer that cannot be used."""
        return self.failure("PrepareFailed", f"backend {self.backend}: {field_name}: {exc}")

    @cached_property
    def results(self) -> tuple[Mapping[str, Any], ...]:
        """The claim's allocation results as the record keeps them (encoded once: the record
        is rendered for the CDI spec's annotation and again for the checkpoint)."""
        return tuple(r.to_dict() for r in self.claim.results)

    def entry(self) -> ClaimEntry:
        """The claim's ``PrepareCompleted`` record, with what the outputs added so far."""
        return claim_entry(
            self.claim,
            COMPLETED,
            self.devices,
            self.prepared.state,
            extra=self.record,
            results=self.results,
        )


def claim_entry(
    claim: FetchedClaim,
    state: str,
    devices: tuple[PreparedDevice, ...] = (),
    backend_state: Mapping[str, Any] | None = None,
    *,
    extra: Mapping[str, Any] | None = None,
    results: tuple[Mapping[str, Any], ...] | None = None,
) -> ClaimEntry:
    """The checkpoint record of ``claim`` in ``state`` (``results``: the claim's results
    encoded already)."""
    return ClaimEntry(
        uid=claim.ref.uid,
        namespace=claim.ref.namespace,
        name=claim.ref.name,
        state=state,
        results=results if results is not None else tuple(r.to_dict() for r in claim.results),
        devices=devices,
        backend_state=backend_state or {},
        extra=dict(extra) if extra else {},
    )
