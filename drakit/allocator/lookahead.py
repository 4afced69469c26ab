"""Lookahead: claims that no path of the depth-first search can allocate, found up front.

The upstream search (and drakit's, which must give the same answers) only learns that a
request can never be satisfied when it gets there, and it gets there once for every
combination of devices the requests before it can take: a claim whose last request asks
for more devices than the node has that could ever fit it costs the whole enumeration of
its earlier requests (and of the earlier claims), only to answer "does not fit".

Whether a device could *ever* be picked for a request does not depend on the search state
for most checks: the selectors, the request's capacity against the device's capacity with
only the persisted consumption, taints, feature gates and devices dedicated by earlier
allocations. When fewer devices than a request needs pass those checks, the request fails
in every state (within one request each device is tried at most once): it is *doomed*.

Skipping a doomed claim changes no answer only when the skipped paths could not have
ended in anything but "no": not with an error (a CEL, node-selector or capacity error on
a device, a claim constraint refusing a device in All mode) nor with the 32-results limit
(fatal in the first claim). A claim for which that holds is *quiet* (errors) and
*bounded* (limit). :func:`claim_outlook` decides all three from the prepared requests;
the search uses them (see ``drakit.allocator.allocate``):

* a doomed, quiet claim after the first is never entered (upstream turns the limit error
  of a later claim into "no" at the claim boundary, so it need not be bounded);
* when some claim is doomed and it and every claim before it are quiet and the first is
  bounded, the whole search answers "no" at once.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final, Protocol

from drakit.allocator.inventory import DeviceEntry

__all__ = ["Alternative", "ClaimOutlook", "Verdict", "claim_outlook", "hopeless"]

MAX_RESULTS: Final = 32


class Verdict(enum.Enum):
    """What the state-independent checks say about one device for one request."""

    #: refused in every state, without an error
    NEVER = "never"
    #: may be picked in some state
    POSSIBLE = "possible"
    #: checking it raises (or may raise) an error when the search gets there
    MAY_FAIL = "may-fail"


class Alternative(Protocol):
    """A request without subrequests, or one subrequest, as prepared for the search."""

    @property
    def all_mode(self) -> bool: ...
    @property
    def num_devices(self) -> int: ...
    @property
    def all_devices(self) -> Sequence[DeviceEntry]: ...


@dataclass(frozen=True, slots=True)
class ClaimOutlook:
    """What is known about every path of the search through one claim."""

    #: some request fails in every state: no path gets past it
    doomed: bool
    #: no path through the claim raises an error
    quiet: bool
    #: no path through the claim reaches the 32-results limit
    bounded: bool
    #: the devices the claim's requests may pick (or fail on), in candidate order: the
    #: search through the claim reads the state of no other device
    devices: tuple[DeviceEntry, ...] = ()


DeviceCheck = Callable[[Alternative, DeviceEntry], Verdict]


def claim_outlook(
    slots: Sequence[Sequence[Alternative]],
    has_constraints: bool,
    candidates: Sequence[DeviceEntry],
    check: DeviceCheck,
) -> ClaimOutlook:
    """The outlook of one claim: ``slots`` holds the alternatives of each request (one
    unless it is a ``firstAvailable`` request), ``candidates`` the devices the search
    tries, in its order, and ``check`` the state-independent verdict on one device for
    one alternative. Checks run for every pair (selectors are evaluated eagerly; an
    error is not raised here but kept by the caller's cache for the search to raise)."""
    quiet = True
    doomed = False
    most = 0
    reachable: set[DeviceEntry] = set()
    for alternatives in slots:
        slot_doomed = True
        for alt in alternatives:
            if alt.all_mode:
                # All mode adds its devices with "must": a constraint refusing one is an
                # error; the devices themselves were checked while preparing the request
                if has_constraints:
                    quiet = False
                if alt.all_devices:
                    slot_doomed = False
                reachable.update(alt.all_devices)
                continue
            possible = 0
            for d in candidates:
                verdict = check(alt, d)
                if verdict is Verdict.NEVER:
                    continue
                if verdict is Verdict.MAY_FAIL:
                    quiet = False
                possible += 1
                reachable.add(d)
            if possible >= alt.num_devices:
                slot_doomed = False
        doomed = doomed or slot_doomed
        most += max((alt.num_devices for alt in alternatives), default=0)
    devices = tuple(d for d in candidates if d in reachable)
    return ClaimOutlook(doomed, quiet, most <= MAX_RESULTS, devices)


def hopeless(outlooks: Sequence[ClaimOutlook]) -> bool:
    """Whether the search over claims with these outlooks (in order) can only answer
    "no": some claim is doomed, it and every claim before it are quiet, and the first
    claim cannot reach the results limit (which is fatal there)."""
    if not outlooks or not outlooks[0].bounded:
        return False
    for outlook in outlooks:
        if not outlook.quiet:
            return False
        if outlook.doomed:
            return True
    return False
