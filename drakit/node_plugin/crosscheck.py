"""The PodResources cross-check: the kubelet's view of device use against the checkpoint.

Pure logic: no gRPC, no files, no clock of its own. The inputs are what the kubelet's
PodResources API says each container uses (:class:`ContainerUse`, devices of this driver
only) and the claims the plugin's checkpoint holds (:class:`PreparedClaim`). The output is a
list of :class:`Finding`, each of one kind:

* ``leak``: a claim prepared (``PrepareCompleted``) that no container uses. Between prepare
  and container start this is normal, so a claim is a leak only once it has been unused for
  the grace period without a break;
* ``unknown-device``: a container uses a device of this driver through a claim the
  checkpoint holds, but the checkpoint does not list that device for the claim;
* ``lost-claim``: a container uses devices of this driver through a claim the checkpoint does
  not hold at all (the kubelet thinks it is prepared; the plugin forgot it).

A ``PrepareStarted`` claim is a prepare in progress (or interrupted and waiting for the
kubelet's retry): it is never a leak, and a container using it is not reported either.

Claims are matched by namespace and name: PodResources does not carry claim UIDs.

:class:`Tracker` adds time: every finding must persist for ``grace`` seconds of the caller's
monotonic clock before it is reported (a List and a checkpoint read are two snapshots; a
prepare or unprepare between them looks like a finding for one round), and a leak older than
``event_after`` is flagged for an Event on the claim.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "KINDS",
    "LEAK",
    "LOST_CLAIM",
    "UNKNOWN_DEVICE",
    "ContainerUse",
    "CrossCheckConfig",
    "DeviceRef",
    "Finding",
    "PreparedClaim",
    "Tracker",
    "compare",
]

LEAK = "leak"
UNKNOWN_DEVICE = "unknown-device"
LOST_CLAIM = "lost-claim"
KINDS = (LEAK, UNKNOWN_DEVICE, LOST_CLAIM)


@dataclass(frozen=True)
class CrossCheckConfig:
    """The ``--podresources-*`` flags: the kubelet's socket, seconds between rounds, seconds
    a finding must persist before it counts (``grace``) and before a leak gets an Event on
    its claim (``event_after``, at least ``grace``)."""

    socket: Path
    period: float = 60.0
    grace: float = 300.0
    event_after: float = 1800.0


@dataclass(frozen=True, order=True)
class DeviceRef:
    """One device of this driver: pool and device name (and the share, if any)."""

    pool: str
    device: str
    share_id: str = ""

    def __str__(self) -> str:
        base = f"{self.pool}/{self.device}"
        return f"{base} (share {self.share_id})" if self.share_id else base


@dataclass(frozen=True, order=True)
class ContainerUse:
    """A container that the kubelet says uses ``devices`` of this driver through one claim."""

    pod_namespace: str
    pod_name: str
    container: str
    claim_namespace: str
    claim_name: str
    devices: tuple[DeviceRef, ...] = ()

    @property
    def claim_key(self) -> tuple[str, str]:
        return (self.claim_namespace, self.claim_name)

    @property
    def pod(self) -> str:
        return f"{self.pod_namespace}/{self.pod_name}"


@dataclass(frozen=True)
class PreparedClaim:
    """A claim of the checkpoint: ``completed`` False means PrepareStarted."""

    uid: str
    namespace: str
    name: str
    completed: bool
    devices: tuple[DeviceRef, ...] = ()

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)


@dataclass(frozen=True, order=True)
class Finding:
    """One disagreement. ``key`` identifies it across rounds; ``detail`` says what is wrong.

    ``claim_uid`` is empty for a lost claim (the checkpoint is where the UID would come from);
    ``pods`` names the pods involved (none for a leak).
    """

    kind: str
    claim_namespace: str
    claim_name: str
    claim_uid: str = ""
    pods: tuple[str, ...] = ()
    devices: tuple[DeviceRef, ...] = ()
    detail: str = ""

    @property
    def key(self) -> tuple[str, ...]:
        return (self.kind, self.claim_namespace, self.claim_name, self.claim_uid, *self.pods)

    @property
    def claim(self) -> str:
        return f"{self.claim_namespace}/{self.claim_name}"


def compare(uses: Iterable[ContainerUse], claims: Iterable[PreparedClaim]) -> list[Finding]:
    """Every disagreement between the kubelet's ``uses`` and the checkpoint's ``claims``,
    sorted. Same inputs, same output: no time involved (see :class:`Tracker`)."""
    by_key = {c.key: c for c in claims}
    users: dict[tuple[str, str], list[ContainerUse]] = {}
    for use in uses:
        users.setdefault(use.claim_key, []).append(use)
    findings = [_leak(c) for c in by_key.values() if c.completed and c.key not in users]
    for key, claim_users in users.items():
        claim = by_key.get(key)
        if claim is None:
            findings.append(_lost(key, claim_users))
        elif claim.completed:
            findings.extend(_unknown(claim, claim_users))
    return sorted(findings)


def _leak(claim: PreparedClaim) -> Finding:
    return Finding(
        LEAK,
        claim.namespace,
        claim.name,
        claim.uid,
        devices=claim.devices,
        detail="prepared, but no container on the node uses it",
    )


def _lost(key: tuple[str, str], users: Sequence[ContainerUse]) -> Finding:
    devices = tuple(sorted({d for u in users for d in u.devices}))
    return Finding(
        LOST_CLAIM,
        *key,
        pods=tuple(sorted({u.pod for u in users})),
        devices=devices,
        detail="the kubelet says containers use it, but the checkpoint does not hold it",
    )


def _unknown(claim: PreparedClaim, users: Sequence[ContainerUse]) -> list[Finding]:
    # Shares are compared by pool and device: a share ID the kubelet kept from an earlier
    # prepare of the same claim still names the same physical device.
    known = {(d.pool, d.device) for d in claim.devices}
    out = []
    for use in users:
        strange = tuple(d for d in use.devices if (d.pool, d.device) not in known)
        if strange:
            out.append(
                Finding(
                    UNKNOWN_DEVICE,
                    claim.namespace,
                    claim.name,
                    claim.uid,
                    pods=(f"{use.pod} container {use.container}",),
                    devices=strange,
                    detail="the container uses devices the checkpoint does not list for the claim",
                )
            )
    return out


@dataclass
class _Seen:
    finding: Finding
    since: float
    reported: bool = False
    event_sent: bool = False


@dataclass(frozen=True)
class Round:
    """What one :meth:`Tracker.update` found.

    ``current``: findings that have persisted past the grace period (what metrics show);
    ``new``: those of ``current`` reported for the first time (log them);
    ``resolved``: findings reported earlier that are gone now;
    ``events``: leaks that crossed ``event_after`` this round (one Event each);
    ``ages``: seconds each finding of ``current`` has persisted, by its key.
    """

    current: tuple[Finding, ...] = ()
    new: tuple[Finding, ...] = ()
    resolved: tuple[Finding, ...] = ()
    events: tuple[Finding, ...] = ()
    ages: Mapping[tuple[str, ...], float] = field(default_factory=dict)


class Tracker:
    """Findings over time: each is reported once it has persisted ``grace`` seconds, and a
    leak that has persisted ``event_after`` seconds gets one Event (per episode: a leak that
    went away and came back is a new one). Not thread-safe: one checker thread owns it."""

    def __init__(self, grace: float, event_after: float) -> None:
        if grace < 0 or event_after < grace:
            raise ValueError(f"need 0 <= grace ({grace}) <= event_after ({event_after})")
        self.grace = grace
        self.event_after = event_after
        self._seen: dict[tuple[str, ...], _Seen] = {}

    def update(self, findings: Iterable[Finding], now: float) -> Round:
        """Take this round's findings (from :func:`compare`) at monotonic time ``now``."""
        previous = self._seen
        self._seen = {}
        for finding in findings:
            self._seen[finding.key] = previous.get(finding.key) or _Seen(finding, now)
            self._seen[finding.key].finding = finding
        resolved = tuple(
            s.finding for k, s in previous.items() if k not in self._seen and s.reported
        )
        current, new, events, ages = [], [], [], {}
        for key, seen in self._seen.items():
            age = now - seen.since
            if age < self.grace:
                continue
            current.append(seen.finding)
            ages[key] = age
            if not seen.reported:
                seen.reported = True
                new.append(seen.finding)
            if seen.finding.kind == LEAK and age >= self.event_after and not seen.event_sent:
                seen.event_sent = True
                events.append(seen.finding)
        return Round(
            tuple(sorted(current)), tuple(new), tuple(sorted(resolved)), tuple(events), ages
        )
