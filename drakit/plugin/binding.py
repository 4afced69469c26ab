"""The binding-conditions hook a driver implements: public types, no I/O.

A device published with ``bindingConditions`` (``Device(binding_conditions=...)``) holds the
pod that gets it in kube-scheduler's PreBind until every one of those conditions is True in
the claim's ``status.devices[].conditions`` for that device; a True *binding failure
condition* makes kube-scheduler give up the node, deallocate the claim and try again.

``drakit driver-controller --binding-check MODULE:CLASS`` asks the driver's
:class:`BindingCheck` about every allocated device of its driver that still waits for
conditions and writes what the check answers (:class:`BindingVerdict`) into the claim's
status. Exported from :mod:`drakit.plugin`; the controller imports the types from here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "BindingCheck",
    "BindingClaim",
    "BindingDevice",
    "BindingVerdict",
    "ConditionResult",
    "VerdictError",
]

#: metav1.Condition's reason: CamelCase, at most 1024 characters (the apiserver refuses others).
_REASON = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
MAX_REASON = 1024
MAX_MESSAGE = 32768


class VerdictError(ValueError):
    """A verdict the apiserver would refuse; the message names the condition and the reason."""


@dataclass(frozen=True)
class ConditionResult:
    """One condition the check sets to True: its type, a CamelCase reason, a message."""

    type: str
    reason: str = "Ready"
    message: str = ""


@dataclass(frozen=True)
class BindingVerdict:
    """What a :class:`BindingCheck` decided about one device.

    ``met``: binding conditions that are True now. ``failed``: binding *failure* conditions
    that are True now (kube-scheduler then deallocates the claim and schedules the pod again).
    Conditions named in neither are left as they are. While a binding condition is still not
    met and nothing failed, the device is checked again after ``retry_after`` seconds (None:
    the controller's ``--recheck-period``), and whenever the claim changes.
    """

    met: tuple[ConditionResult, ...] = ()
    failed: tuple[ConditionResult, ...] = ()
    retry_after: float | None = None

    @classmethod
    def pending(cls, retry_after: float | None = None) -> BindingVerdict:
        """Nothing is ready yet; ask again later."""
        return cls(retry_after=retry_after)

    @classmethod
    def all_met(
        cls, device: BindingDevice, reason: str = "Ready", message: str = ""
    ) -> BindingVerdict:
        """Every binding condition of ``device`` is met."""
        return cls(
            met=tuple(ConditionResult(t, reason, message) for t in device.binding_conditions)
        )

    @classmethod
    def failure(cls, condition: str, reason: str, message: str = "") -> BindingVerdict:
        """Binding failed: ``condition`` (one of the device's failure conditions) is True."""
        return cls(failed=(ConditionResult(condition, reason, message),))

    def check_against(self, device: BindingDevice) -> None:
        """Raise :class:`VerdictError` unless every entry names a condition of ``device`` (met:
        a binding condition, failed: a failure condition) with a valid reason and message."""
        for results, allowed, field in (
            (self.met, device.binding_conditions, "met"),
            (self.failed, device.binding_failure_conditions, "failed"),
        ):
            for result in results:
                if result.type not in allowed:
                    raise VerdictError(
                        f"{field}: {result.type!r} is not one of the device's "
                        f"{'binding' if field == 'met' else 'binding failure'} conditions "
                        f"({', '.join(allowed) or 'none'})"
                    )
                if len(result.reason) > MAX_REASON or not _REASON.match(result.reason):
                    raise VerdictError(
                        f"{field}: condition {result.type!r}: reason {result.reason!r} must be "
                        f"CamelCase (letters, digits, '_', ',' and ':'; starting with a letter), "
                        f"at most {MAX_REASON} characters"
                    )
                if len(result.message) > MAX_MESSAGE:
                    raise VerdictError(
                        f"{field}: condition {result.type!r}: message longer than "
                        f"{MAX_MESSAGE} characters"
                    )


@dataclass(frozen=True)
class BindingClaim:
    """The claim being bound, read-only. ``raw`` is the ResourceClaim as the controller read
    it (do not change it); ``node_name`` is the node its allocation is limited to, if the
    allocation's node selector names exactly one node by ``metadata.name`` or hostname."""

    namespace: str
    name: str
    uid: str
    node_name: str | None
    raw: Mapping[str, Any]


@dataclass(frozen=True)
class BindingDevice:
    """One allocated device of the driver that waits for binding conditions.

    ``conditions`` are its current ``status.devices[].conditions`` (metav1.Condition dicts).
    """

    request: str
    driver: str
    pool: str
    device: str
    share_id: str | None
    binding_conditions: tuple[str, ...]
    binding_failure_conditions: tuple[str, ...]
    conditions: tuple[Mapping[str, Any], ...] = ()

    def is_true(self, condition: str) -> bool:
        """Whether ``condition`` is already True in the device's status."""
        return any(
            c.get("type") == condition and c.get("status") == "True" for c in self.conditions
        )

    @property
    def waiting(self) -> bool:
        """True while some binding condition is not True and no failure condition is."""
        if any(self.is_true(c) for c in self.binding_failure_conditions):
            return False
        return not all(self.is_true(c) for c in self.binding_conditions)


@runtime_checkable
class BindingCheck(Protocol):
    """A driver's readiness check for devices with binding conditions.

    The class is instantiated once, without arguments, by ``drakit driver-controller``.
    ``check`` is called for one device of one claim at a time (calls for different claims
    may run in parallel on the controller's workers) and must not block for long: return
    ``BindingVerdict.pending()`` and be asked again instead. An exception is logged with
    the claim and device and the claim is retried with backoff.
    """

    def check(self, claim: BindingClaim, device: BindingDevice) -> BindingVerdict: ...
