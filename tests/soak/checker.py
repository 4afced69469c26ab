"""The soak's independent checker: reads the API and the nodes' files, judges the invariants.

It shares no code with drakit's allocator or controller (its readings are in
:mod:`soak.clusterstate` and :mod:`soak.nodefiles`, the rules in :mod:`soak.invariants`);
it reaches the apiserver through the kubeapi client it is given (plain LISTs).

What each invariant checks (subjects name the objects; details say what is wrong):

* ``device-double-allocation``: no device of the driver is held (non-admin-access
  results) by two results at once, unless its slice says ``allowMultipleAllocations``.
* ``capacity-over-consumed``: for a multi-allocatable device, the ``consumedCapacity`` of
  all results holding it stays within each capacity's value.
* ``counters-over-consumed``: the allocated devices of a pool (each counted once, however
  many claims share it) consume no shared counter beyond its value.
* ``allocated-without-finalizer``: an allocated claim with results of the driver carries
  ``resource.kubernetes.io/delete-protection`` (every allocator writes it first).
* ``reserved-claim-off-node``: a claim reserved for a pod bound to a node is allocated,
  and its allocation's node selector selects that node (fields and labels).
* ``running-pod-claim-unusable``: each claim of a Running pod exists, is allocated and is
  reserved for the pod (template claims through ``status.resourceClaimStatuses``).
* ``running-pod-not-prepared``: each claim (with devices of the driver) of a Running pod on
  a watched node is ``PrepareCompleted`` in that node's checkpoint.
* ``finalizer-without-allocation``: a claim being deleted, or reserved, does not keep the
  finalizer without an allocation.
* ``orphaned-generated-claim``: a claim generated for a pod (controller owner reference,
  or the pod-claim-name annotation) does not outlive the pod (by UID): the pod is gone,
  terminal, or was deleted before it was bound (kube-controller-manager's ``isPodDone``).
* ``slice-missing``: every watched node has a complete pool (newest generation, all its
  ``resourceSliceCount`` slices) of the driver.
* ``unreadable-state``: the checker could read each node's checkpoint and the slices'
  quantities.
* once quiet (:meth:`Checker.check_quiet`): ``checkpoint-without-cdi`` (a
  ``PrepareCompleted`` entry with devices has a readable CDI spec defining its CDI IDs),
  ``cdi-without-checkpoint`` (no spec without an entry), ``prepared-without-pod`` (no entry
  whose claim no pod on that node uses).
* after the faults (:meth:`Checker.wait_liveness`): ``liveness``, every pod settles.

Time bounds. Every check produces *findings*; a finding becomes a *violation* only when the
same (invariant, subject) was found in every check for at least its bound:

=============================  =========================  ==================================
invariant                      bound                      why a transient is legal
=============================  =========================  ==================================
device-double-allocation       0 (at once)                one LIST is one snapshot: two
capacity-over-consumed         0                          claims holding a device in it
counters-over-consumed         0                          never happens legally
allocated-without-finalizer    0                          the finalizer is written first
reserved-claim-off-node        ``confirm_s``              joins two LISTs taken apart
running-pod-claim-unusable     ``confirm_s``              joins two LISTs taken apart
running-pod-not-prepared       ``confirm_s``              joins a LIST and a file (a
                                                          corrupt checkpoint is rebuilt)
finalizer-without-allocation   ``recovery_s``             deallocation comes before the
                                                          finalizer's removal
orphaned-generated-claim       ``recovery_s``             garbage collection runs after the
                                                          pod is gone
slice-missing                  ``slice_heal_s``           a (re)starting kubelet wipes the
                                                          node's slices; the plugin heals
unreadable-state               ``recovery_s``             a corrupt checkpoint is rebuilt
=============================  =========================  ==================================

A claim that merely keeps the finalizer without an allocation, unreserved and not being
deleted, is legal: kube-scheduler adds the finalizer in an update of its own before writing
the allocation and never takes it back when that write fails; kube-controller-manager
removes it when the claim is deleted. It is judged once the claim is deleted.

Time during which the apiserver cannot be read does not count towards a bound (nothing can
heal while it is down, and the checker cannot see whether it did). A violation is returned
once per episode: a finding that persists is not reported again until it has cleared and
come back. Findings that cleared before their bound are counted in :meth:`Checker.summary`
as transients, with the longest one per invariant.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from drakit.kubeapi.errors import ApiError
from soak import invariants as inv
from soak.clusterstate import ClusterState, Device, DeviceKey, Pod, read_cluster
from soak.invariants import Finding, NodeFiles
from soak.nodefiles import UnreadableFileError, read_cdi_specs, read_checkpoint

#: Seconds between two readings while waiting (liveness, quiet).
POLL_SECONDS = 1.0


@dataclass(frozen=True)
class NodeView:
    """Where one simulated node keeps its plugin's state (the checkpoint file and CDI folder)."""

    node_name: str
    checkpoint_path: Path
    cdi_dir: Path


@dataclass(frozen=True)
class Bounds:
    """Seconds a legal transient may last before it is a violation (see the module table)."""

    recovery_s: float = 60
    liveness_s: float = 120
    slice_heal_s: float = 30
    #: For invariants that join two readings taken a moment apart.
    confirm_s: float = 2


@dataclass(frozen=True)
class Violation:
    invariant: str
    subject: str
    detail: str
    #: Wall-clock time (time.time()) of the check that reported it.
    observed_at: float
    #: How long the finding had persisted when it was reported.
    lasted_s: float = 0.0


@dataclass
class _Episode:
    first_seen: float
    reported: bool = False


@dataclass
class _Stats:
    checks: int = 0
    failed_reads: int = 0
    blind_s: float = 0.0
    check_seconds_total: float = 0.0  # wall time of the safety checks (reading included)
    check_seconds_max: float = 0.0
    violations: Counter[str] = field(default_factory=Counter)
    #: UIDs of the pods seen running, by node (how the workload spread over the nodes).
    running: dict[str, set[str]] = field(default_factory=dict)
    transients: Counter[str] = field(default_factory=Counter)
    longest_transient_s: dict[str, float] = field(default_factory=dict)


class Checker:
    """Judges the invariants of issue 16 on a live cluster.

    Thread-safe: :meth:`check_safety` may run on a thread of its own while
    :meth:`wait_liveness` or :meth:`check_quiet` run on another (episodes, counters and the
    device cache are guarded by one lock; readings happen outside it).

    ``client`` is a kubeapi API client (``drakit.kubeapi.client.load_client``); ``driver`` the DRA
    driver whose devices, slices and files are judged; ``nodes`` the simulated nodes whose
    checkpoint and CDI specs are read; ``namespaces`` limits the claim and pod rules to
    those namespaces (devices and slices are judged cluster-wide, as allocators see them).
    ``clock`` (monotonic seconds) is for tests.
    """

    def __init__(
        self,
        client: Any,
        driver: str,
        nodes: Sequence[NodeView],
        bounds: Bounds,
        namespaces: Sequence[str] | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.driver = driver
        self.nodes = list(nodes)
        self.bounds = bounds
        self.scope = None if namespaces is None else set(namespaces)
        self._clock = clock
        self._lock = threading.RLock()
        self._episodes: dict[tuple[str, str], _Episode] = {}
        self._known_devices: dict[DeviceKey, Device] = {}
        self._stats = _Stats()
        self._blind = False  # a reading failed since the last good one
        self._last_good: float | None = None
        self._bound = {
            inv.RESERVED_OFF_NODE: bounds.confirm_s,
            inv.RUNNING_POD_CLAIM_UNUSABLE: bounds.confirm_s,
            inv.RUNNING_POD_NOT_PREPARED: bounds.confirm_s,
            inv.FINALIZER_WITHOUT_ALLOCATION: bounds.recovery_s,
            inv.ORPHANED_GENERATED_CLAIM: bounds.recovery_s,
            inv.SLICE_MISSING: bounds.slice_heal_s,
            inv.UNREADABLE: bounds.recovery_s,
        }

    # -- the three entry points ------------------------------------------------------------

    def check_safety(self) -> list[Violation]:
        """One reading, judged against every continuous invariant; call it every second.

        Returns the violations that became due in this check. Raises the kubeapi error
        when the apiserver cannot be read (under faults, the caller logs it and goes on).
        """
        started = time.monotonic()
        state = self._read()
        self._note_running(state)
        files = self._read_files()
        findings = [
            *inv.device_findings(state, self.driver, self._devices()),
            *inv.claim_findings(state, self.driver, self.scope),
            *inv.reservation_findings(state, self.scope),
            *inv.prepared_findings(state, self.driver, files, self.scope),
            *inv.slice_findings(state, [n.node_name for n in self.nodes]),
            *(
                Finding(inv.UNREADABLE, f"{n.node_name} checkpoint", n.problem)
                for n in files.values()
                if n.problem
            ),
            *(Finding(inv.UNREADABLE, "slices", p) for p in state.unreadable),
        ]
        due = self._judge(findings)
        with self._lock:
            took = time.monotonic() - started
            self._stats.check_seconds_total += took
            self._stats.check_seconds_max = max(self._stats.check_seconds_max, took)
        return due

    def check_quiet(self, timeout: float | None = None) -> list[Violation]:
        """The once-quiet invariants, after the faults stopped and the pods settled.

        Every prepared claim in a node's checkpoint has its CDI spec (defining its CDI
        IDs), no CDI spec lives without a checkpoint entry, and nothing stays prepared for a
        pod that no longer uses it on that node. Polls until these hold or ``timeout``
        (default ``recovery_s``: the kubelet unprepares a vanished pod's claims on its
        60-s reconcile) passes; returns what still fails then.
        """
        deadline = self._clock() + (self.bounds.recovery_s if timeout is None else timeout)
        while True:
            state = self._read_patiently(deadline)
            if state is None:
                return self._unreachable()
            findings = inv.quiet_findings(state, self._read_files(specs_too=True))
            if not findings or self._clock() >= deadline:
                break
            time.sleep(POLL_SECONDS)
        now = time.time()
        violations = [Violation(f.invariant, f.subject, f.detail, now) for f in findings]
        self._count(violations)
        return violations

    def wait_liveness(self, pods_namespaces: Sequence[str], timeout: float) -> list[Violation]:
        """After the faults stop: wait until every pod of ``pods_namespaces`` has settled.

        Settled: bound, with each claim allocated on its node, reserved for it and (for the
        driver's devices) PrepareCompleted in that node's checkpoint; or not bound with a
        PodScheduled=False/Unschedulable condition; or terminal (Succeeded/Failed). A pod
        being deleted settles by disappearing. Returns one ``liveness`` violation per pod
        still unsettled after ``timeout`` seconds.
        """
        namespaces = set(pods_namespaces)
        deadline = self._clock() + timeout
        while True:
            state = self._read_patiently(deadline)
            if state is None:
                return self._unreachable()
            files = self._read_files()
            unsettled = {
                pod.ref: why
                for pod in state.pods
                if pod.namespace in namespaces and (why := self._unsettled(pod, state, files))
            }
            if not unsettled or self._clock() >= deadline:
                break
            time.sleep(POLL_SECONDS)
        now = time.time()
        violations = [
            Violation(inv.LIVENESS, ref, f"not settled after {timeout:g} s: {why}", now, timeout)
            for ref, why in sorted(unsettled.items())
        ]
        self._count(violations)
        return violations

    def _note_running(self, state: ClusterState) -> None:
        with self._lock:
            for pod in state.pods:
                if pod.running:
                    self._stats.running.setdefault(pod.node_name, set()).add(pod.uid)

    def _unreachable(self) -> list[Violation]:
        violation = Violation(
            inv.UNREADABLE, "apiserver", "no successful reading before the deadline", time.time()
        )
        self._count([violation])
        return [violation]

    def summary(self) -> dict[str, Any]:
        """Checks run, failed readings, seconds without a reading, violations and transients
        by invariant, findings open now, pods seen running by node, how long a safety check
        takes, the bounds."""
        with self._lock:
            return {
                "checks": self._stats.checks,
                "failed_reads": self._stats.failed_reads,
                "blind_s": round(self._stats.blind_s, 1),
                "violations": dict(self._stats.violations),
                "transients": dict(self._stats.transients),
                "longest_transient_s": {
                    k: round(v, 1) for k, v in self._stats.longest_transient_s.items()
                },
                "open_findings": len(self._episodes),
                "pods_seen_running": {
                    node: len(uids) for node, uids in sorted(self._stats.running.items())
                },
                "check_seconds": {
                    "mean": round(self._stats.check_seconds_total / max(self._stats.checks, 1), 3),
                    "max": round(self._stats.check_seconds_max, 3),
                },
                "bounds": asdict(self.bounds),
            }

    # -- reading ---------------------------------------------------------------------------

    def _read(self) -> ClusterState:
        """Read the cluster; raises the kubeapi error when the apiserver cannot answer.

        After failed readings, the time from the last good reading to the next one is added
        to every open episode: it does not count towards a bound.
        """
        try:
            state = read_cluster(self.client, self.driver)
        except Exception:
            with self._lock:
                self._stats.failed_reads += 1
                self._blind = True
            raise
        with self._lock:
            now = self._clock()
            if self._blind and self._last_good is not None:
                gap = now - self._last_good
                self._stats.blind_s += gap
                for episode in self._episodes.values():
                    episode.first_seen += gap
            self._blind = False
            self._last_good = now
            for pool in state.pools.values():
                for name, device in pool.devices.items():
                    self._known_devices[(self.driver, pool.name, name)] = device
        return state

    def _devices(self) -> dict[DeviceKey, Device]:
        """Every device ever seen in a slice (a copy, safe to use outside the lock)."""
        with self._lock:
            return dict(self._known_devices)

    def _read_patiently(self, deadline: float) -> ClusterState | None:
        """A reading, retried each second until ``deadline``; None if none succeeded."""
        while True:
            try:
                return self._read()
            except ApiError:  # the apiserver may be restarting: try again
                if self._clock() >= deadline:
                    return None
                time.sleep(POLL_SECONDS)

    def _read_files(self, *, specs_too: bool = False) -> dict[str, NodeFiles]:
        """Each node's checkpoint, and its CDI specs when ``specs_too`` (only the quiet
        checks look at specs; reading them every second would cost a file per claim)."""
        files: dict[str, NodeFiles] = {}
        for node in self.nodes:
            specs = read_cdi_specs(node.cdi_dir, self.driver) if specs_too else {}
            try:
                checkpoint = read_checkpoint(node.checkpoint_path)
            except (UnreadableFileError, OSError) as err:
                files[node.node_name] = NodeFiles(node.node_name, None, specs, str(err))
                continue
            files[node.node_name] = NodeFiles(node.node_name, checkpoint, specs)
        return files

    # -- judging ---------------------------------------------------------------------------

    def _judge(self, findings: list[Finding]) -> list[Violation]:
        """Hold each finding to its bound; forget episodes whose finding cleared."""
        with self._lock:
            self._stats.checks += 1
            now = self._clock()
            current = {f.key: f for f in findings}
            for key in [k for k in self._episodes if k not in current]:
                self._end_episode(key, now)
            due: list[Violation] = []
            for key, finding in current.items():
                episode = self._episodes.setdefault(key, _Episode(first_seen=now))
                lasted = now - episode.first_seen
                bound = self._bound.get(finding.invariant, 0.0)
                if not episode.reported and lasted >= bound:
                    episode.reported = True
                    due.append(
                        Violation(
                            finding.invariant, finding.subject, finding.detail, time.time(), lasted
                        )
                    )
            self._count(due)
        return due

    def _end_episode(self, key: tuple[str, str], now: float) -> None:
        episode = self._episodes.pop(key)
        if episode.reported:
            return
        invariant = key[0]
        lasted = now - episode.first_seen
        self._stats.transients[invariant] += 1
        longest = self._stats.longest_transient_s
        longest[invariant] = max(longest.get(invariant, 0.0), lasted)

    def _count(self, violations: list[Violation]) -> None:
        with self._lock:
            for violation in violations:
                self._stats.violations[violation.invariant] += 1

    def _unsettled(self, pod: Pod, state: ClusterState, files: Mapping[str, NodeFiles]) -> str:
        """Why ``pod`` has not settled yet ("" once it has).

        A bound pod settles when each of its claims is allocated on its node, reserved for it
        and (for the driver's devices) PrepareCompleted in the node's checkpoint. Its phase is
        not required: the kubelet harness marks a prepared pod Running once, best effort, and
        a failed mark (under network faults) is never retried.
        """
        if pod.terminal:
            return ""
        if pod.deleting:
            return f"being deleted (phase {pod.phase or 'none'}, node {pod.node_name or 'none'})"
        if not pod.node_name:
            if pod.unschedulable:
                return ""
            return f"not bound and no Unschedulable condition (phase {pod.phase or 'none'})"
        as_running = replace(pod, phase="Running")
        view = replace(state, pods=[as_running])
        problems = [
            f.detail
            for f in (
                *inv.reservation_findings(view, {pod.namespace}),
                *inv.prepared_findings(view, self.driver, files, {pod.namespace}),
            )
            if f"pod {pod.ref} uid {pod.uid}" in f.subject
        ]
        return "; ".join(problems)
