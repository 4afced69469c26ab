"""One reconcile of a driver's NoExecute budget: decide, then write, keeping count of every
write whose outcome the watch has not shown yet (no API client here: the writes go through
:class:`RuleWriter`, so a simulated API can stand in for the apiserver in the property test).

The count that :class:`~.decision.Decider` gets is pessimistic, which is what keeps the cap at
every moment:

* a create is counted from just before it is sent until the watch shows the rule (then the
  rule counts), or until it has surely failed: an error that says the request was not applied
  (4xx other than 409), or a GET by name after an unclear failure (a timeout, a 5xx, a
  broken connection) that finds no rule. A 409 means the rule is there already;
* a delete frees the place only when the watch no longer shows the rule. A delete that
  failed is planned again at the next reconcile;
* nothing is written while ``fence()`` is False (the leader Lease may be lost): the new leader
  then counts from its own list, which holds every rule this one wrote.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from drakit.controller.noexecute.census import Census, DeviceRef, Request, view_of
from drakit.controller.noexecute.decision import Budget, Decider, Grant, Plan
from drakit.controller.noexecute.rules import build_rule, grant_of, rule_name
from drakit.kubeapi.errors import (
    AlreadyExists,
    BadRequest,
    Forbidden,
    Gone,
    Invalid,
    NotFound,
    TooManyRequests,
    Unauthorized,
)
from drakit.telemetry.logs import get_logger

__all__ = ["Outcome", "Reconciler", "RuleWriter"]

logger = get_logger(__name__)

#: Errors that say the request was refused before anything was written.
_NOT_APPLIED = (BadRequest, Unauthorized, Forbidden, NotFound, Invalid, TooManyRequests, Gone)


class RuleWriter(Protocol):
    """The three calls the reconciler makes; each raises an ApiError (or a transport error)
    on failure."""

    def create(self, rule: dict[str, Any]) -> None: ...

    def delete(self, name: str) -> None: ...

    def exists(self, name: str) -> bool: ...


@dataclass(frozen=True)
class Outcome:
    """What one reconcile decided and did: the plan, the devices whose rule was created (the
    create answered, or 409), whose rule was deleted, and the requests that began waiting."""

    plan: Plan
    granted: tuple[Request, ...] = ()
    released: tuple[DeviceRef, ...] = ()
    newly_waiting: tuple[Request, ...] = ()
    fenced: bool = False


@dataclass
class Reconciler:
    """The budget of one driver for one leadership term (build a new one per term)."""

    driver: str
    budget: Budget
    writer: RuleWriter
    api_version: str
    #: The Node object of a node name (for the owner reference), or None.
    node_of: Callable[[str], Mapping[str, Any] | None] = lambda _name: None
    fence: Callable[[], bool] = lambda: True
    _decider: Decider = field(init=False)
    _pending: dict[DeviceRef, Grant] = field(default_factory=dict)
    _unverified: set[DeviceRef] = field(default_factory=set)
    _deleting: set[DeviceRef] = field(default_factory=set)
    _waiting: set[DeviceRef] = field(default_factory=set)
    _census: Census = field(init=False)
    #: The last rules listing by id(): each rule object and the grant it stands for (the
    #: watch's objects are replaced, never changed in place, as for :class:`Census`).
    _read: dict[int, tuple[Mapping[str, Any], Grant | None]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._decider = Decider(self.budget)
        self._census = Census(self.driver)

    def reconcile(
        self, slices: Iterable[Mapping[str, Any]], rules: Iterable[Mapping[str, Any]], now: float
    ) -> Outcome:
        """Decide from the watched ``slices`` and ``rules`` at monotonic ``now``, and write."""
        observed = self._observe(rules)
        self._verify()
        grants = {**self._pending, **observed}
        view = view_of(slices, self.driver, self._census)
        plan = self._decider.decide(view, grants, now, deleting=frozenset(self._deleting))
        waiting = {r.device for r in plan.waiting}
        newly_waiting = tuple(r for r in plan.waiting if r.device not in self._waiting)
        self._waiting = waiting
        if not self.fence():
            return Outcome(plan, newly_waiting=newly_waiting, fenced=True)
        released = tuple(ref for ref in plan.delete if self._delete(ref, observed))
        granted = tuple(r for r in plan.create if self.fence() and self._create(r))
        return Outcome(plan, granted, released, newly_waiting)

    # -- bookkeeping ---------------------------------------------------------------------------

    def _observe(self, rules: Iterable[Mapping[str, Any]]) -> dict[DeviceRef, Grant]:
        observed: dict[DeviceRef, Grant] = {}
        read: dict[int, tuple[Mapping[str, Any], Grant | None]] = {}
        for rule in rules:
            known = self._read.get(id(rule))
            grant = (
                known[1] if known is not None and known[0] is rule else grant_of(rule, self.driver)
            )
            read[id(rule)] = (rule, grant)
            if grant is not None:
                observed[grant.device] = grant
        self._read = read
        for ref in list(self._pending):
            if ref in observed:
                del self._pending[ref]
                self._unverified.discard(ref)
        self._deleting &= set(observed)
        return observed

    def _verify(self) -> None:
        """Resolve creates whose outcome was unclear: a rule that is not there was not made."""
        for ref in sorted(self._unverified):
            try:
                exists = self.writer.exists(rule_name(self.driver, ref))
            except Exception as err:
                _log(logger.info, "Cannot check a DeviceTaintRule yet", self.driver, ref, err)
                continue
            self._unverified.discard(ref)
            if not exists:
                self._pending.pop(ref, None)

    # -- writes --------------------------------------------------------------------------------

    def _create(self, request: Request) -> bool:
        ref = request.device
        rule = build_rule(self.driver, request, self.api_version, self.node_of(request.node))
        self._pending[ref] = Grant(ref, request.node, request.since)  # counted before it is sent
        try:
            self.writer.create(rule)
        except AlreadyExists:
            return True
        except _NOT_APPLIED as err:
            del self._pending[ref]
            _log(logger.warning, "DeviceTaintRule refused", self.driver, ref, err)
            return False
        except Exception as err:
            self._unverified.add(ref)
            _log(
                logger.warning,
                "DeviceTaintRule create failed; checking it before deciding again",
                self.driver,
                ref,
                err,
            )
            return False
        return True

    def _delete(self, ref: DeviceRef, observed: Mapping[DeviceRef, Grant]) -> bool:
        try:
            self.writer.delete(rule_name(self.driver, ref))
        except NotFound:
            pass
        except Exception as err:
            _log(logger.warning, "DeviceTaintRule delete failed", self.driver, ref, err)
            return False
        if ref in observed:
            self._deleting.add(ref)  # counts until the watch shows it gone
        else:
            self._pending.pop(ref, None)
            self._unverified.discard(ref)
        return True


def _log(
    emit: Callable[..., None], msg: str, driver: str, ref: DeviceRef, err: BaseException
) -> None:
    """One line about a rule write: the driver, the device and the error as fields."""
    emit(msg, driver=driver, pool=ref[0], device=ref[1], error=str(err))
