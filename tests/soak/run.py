"""One soak run: stack up, workload and faults for ``duration``, faults off, liveness,
clean-up, quiet checks, one summary line; a reproduction folder when anything was violated.

Phases (times are seconds since the workload started):

1. ``0 .. duration``: pods churn, faults fire as planned, the checker's safety checks run
   every second, a supervisor restarts what exited (as a kubelet or systemd would).
2. faults end: every pause is resumed, proxies pass, held-down components restart.
3. liveness: no new pods; each live pod must reach bound-and-prepared (or a clear
   unschedulable condition) within ``bounds.liveness_s`` (the checker decides).
4. clean-up: every pod and claim deleted; claims must be gone within the recovery bound;
   then the quiet checks (checkpoint vs CDI specs, finalizers, slices).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from drakit.kubeapi.errors import ApiError
from drakit.kubeapi.resources import PODS, RESOURCE_CLAIMS, Resource
from drakit.localcluster.stack import DRIVER, short_temp_root
from soak.checker import Bounds, Checker, NodeView, Violation
from soak.faults import Fault, Injector, plan
from soak.stack import SoakStack, node_names
from soak.timeline import ApiRecorder, Timeline
from soak.workload import Rates, Workload

NAMESPACE = "soak"


@dataclass
class SoakOptions:
    seed: int = 1
    duration: float = 120.0
    nodes: int = 3
    #: Mean seconds between two faults (exponential gaps).
    fault_interval: float = 15.0
    rates: Rates = field(default_factory=Rates)
    #: The bounds the checker holds the stack to, generous for a loaded 2-core machine:
    #: a restarted apiserver takes up to ~30 s there, a lease 10 s, harness retries 10 s;
    #: rules joining two readings get 5 s (one check can take seconds on a loaded machine).
    bounds: Bounds = field(
        default_factory=lambda: Bounds(
            recovery_s=150.0, liveness_s=240.0, slice_heal_s=150.0, confirm_s=5.0
        )
    )
    #: Add the real node (soak.realnode; root): its pods, its faults, its files checked.
    real_node: bool = False
    #: Where reproduction folders go (one per failed run); None: $TMPDIR/drakit-soak.
    out_dir: Path | None = None
    log: Callable[[str], None] = field(default=print)


@dataclass
class SoakResult:
    seed: int
    pods_churned: int
    pods_by_kind: dict[str, int]
    faults: dict[str, int]
    faults_failed: dict[str, int]
    violations: list[Violation]
    restarts: int
    elapsed: float
    #: Workload API calls that failed under faults (a delete is retried, a create is not).
    workload_errors: int = 0
    #: Checker.summary(): checks run, transients and their longest duration, the bounds.
    checker: dict[str, Any] = field(default_factory=dict)
    repro_dir: Path | None = None

    def summary_line(self) -> str:
        faults = ", ".join(f"{k} {v}" for k, v in sorted(self.faults.items())) or "none"
        total = sum(self.faults.values())
        return (
            f"soak seed={self.seed}: {self.pods_churned} pods churned, {total} faults injected "
            f"({faults}), {len(self.violations)} violations"
        )


def run(opts: SoakOptions) -> SoakResult:
    """Run one soak; never leaves a process or folder behind (see SoakStack.stop)."""
    root = short_temp_root("dks-")
    stack = SoakStack(root, opts.nodes, log=opts.log, real_node=opts.real_node)
    timeline = Timeline()
    schedule = plan(
        opts.seed,
        opts.duration,
        node_names(opts.nodes),
        opts.fault_interval,
        real_node=opts.real_node,
    )
    opts.log(f"soak: seed {opts.seed}, {opts.duration:g}s, {len(schedule)} faults planned:")
    for fault in schedule:
        opts.log(f"  {fault.describe()}")
    with _terminate_as_interrupt():
        try:
            stack.start()
            return _drive(opts, stack, timeline, schedule)
        finally:
            stack.stop()


def _drive(
    opts: SoakOptions, stack: SoakStack, timeline: Timeline, schedule: list[Fault]
) -> SoakResult:
    views = [NodeView(*view) for view in stack.node_views()]
    checker = Checker(stack.client, DRIVER, views, opts.bounds, namespaces=[NAMESPACE])
    safety = SafetyLoop(checker, timeline)
    recorder = ApiRecorder(stack.client, NAMESPACE, timeline)
    workload = Workload(
        stack.client,
        NAMESPACE,
        opts.seed,
        opts.rates,
        lambda what, data: timeline.add("workload", what, data),
        real_node=opts.real_node,
    )
    injector = Injector(
        stack, schedule, lambda what, data: timeline.add("fault", what, data), clock=timeline
    )
    recorder.start()
    workload.prepare()
    timeline.start = time.monotonic()  # the workload's and the faults' time zero
    workload.start()
    safety.start()
    try:
        _faults_phase(opts, stack, injector, workload, timeline)
        opts.log("soak: faults over; liveness phase")
        workload.stop()
        _settle(stack, timeline)
        names = workload.live_pod_names()
        liveness = checker.wait_liveness([NAMESPACE], opts.bounds.liveness_s)
        safety.extend(liveness)
        timeline.add("soak", "liveness checked", {"pods": len(names), "violations": len(liveness)})
        workload.delete_everything()
        _wait_drained(stack.client, opts.bounds.recovery_s, timeline)
        safety.stop()
        safety.extend(checker.check_quiet())
    finally:
        injector.finish()  # interrupted: resume paused processes before waiting on threads
        safety.stop()
        workload.stop()
        recorder.stop()
    result = SoakResult(
        seed=opts.seed,
        pods_churned=workload.churned,
        pods_by_kind=dict(workload.created),
        faults=dict(injector.injected),
        faults_failed=dict(injector.failed),
        violations=safety.violations,
        restarts=stack.restarts,
        elapsed=timeline.elapsed(),
        checker=_plain(checker.summary()),
        workload_errors=workload.errors,
    )
    timeline.add("soak", "summary", {"checker": result.checker})
    opts.log(
        f"soak: pods by kind {result.pods_by_kind}; {result.workload_errors} workload API "
        f"calls failed under faults; {result.restarts} restarts by the "
        f"supervisor; faults that could not be applied {result.faults_failed} "
        f"(last reason by kind: {injector.failed_why}); "
        f"checker: {result.checker}"
    )
    if result.violations:
        result.repro_dir = save_reproduction(opts, stack, timeline, schedule, result)
    return result


def _faults_phase(
    opts: SoakOptions, stack: SoakStack, injector: Injector, workload: Workload, tl: Timeline
) -> None:
    next_supervise = 0.0
    next_report = 60.0
    # A restart that takes long (a loaded machine) delays later faults; they still all run.
    while injector.elapsed() < opts.duration or injector.pending:
        injector.tick()
        now = injector.elapsed()
        if now >= next_supervise:
            _supervise(stack, tl)
            next_supervise = now + 2.0
        if now >= next_report:
            opts.log(f"soak: {now:.0f}s, {workload.churned} pods, faults {dict(injector.injected)}")
            next_report += 60.0
        time.sleep(0.2)
    injector.finish()


def _supervise(stack: SoakStack, tl: Timeline) -> None:
    for name in stack.supervise():
        tl.add("supervisor", "restarted", {"component": name})


def _settle(stack: SoakStack, tl: Timeline, timeout: float = 180.0) -> None:
    """Restart until every component runs (a fault may have ended in a crash loop)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        _supervise(stack, tl)
        if all(proc.running() for _, proc in stack.all_components()):
            return
        time.sleep(1.0)
    tl.add("soak", "components still down after the faults", {})


def _wait_drained(client: Any, timeout: float, tl: Timeline) -> None:
    """Wait until the namespace has no pods and no claims (the checker judges what is left)."""
    pods, claims = Resource(client, PODS), Resource(client, RESOURCE_CLAIMS)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            left = len(pods.list(NAMESPACE).items) + len(claims.list(NAMESPACE).items)
        except (ApiError, OSError):
            left = -1
        if left == 0:
            tl.add("soak", "drained", {})
            return
        time.sleep(1.0)
    tl.add("soak", "not drained in time", {"timeout": timeout})


class SafetyLoop:
    """Calls ``checker.check_safety()`` every second on a thread; keeps the violations."""

    def __init__(self, checker: Checker, timeline: Timeline) -> None:
        self.checker = checker
        self.timeline = timeline
        self.violations: list[Violation] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="safety", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=60)

    def extend(self, found: list[Violation]) -> None:
        """Keep ``found`` (the checker reports each episode of a finding once)."""
        for violation in found:
            self.violations.append(violation)
            self.timeline.add(
                "checker",
                "VIOLATION",
                {
                    "invariant": violation.invariant,
                    "subject": violation.subject,
                    "detail": violation.detail,
                },
            )

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            try:
                self.extend(self.checker.check_safety())
            except Exception as err:
                self.timeline.add("checker", "check failed", {"error": f"{err}"[:300]})


# -- reproduction -----------------------------------------------------------------------------


def save_reproduction(
    opts: SoakOptions,
    stack: SoakStack,
    timeline: Timeline,
    schedule: list[Fault],
    result: SoakResult,
) -> Path:
    """Write the seed, the schedule, the violations, the timeline and the component logs
    to a new folder and print what a reader needs first; returns the folder."""
    base = opts.out_dir or Path(tempfile.gettempdir()) / "drakit-soak"
    folder = base / f"soak-failure-seed{opts.seed}-{time.strftime('%Y%m%dT%H%M%S')}"
    folder.mkdir(parents=True, exist_ok=True)
    command = f"make soak DURATION={opts.duration:g}s SEED={opts.seed}"
    if opts.real_node:
        command += " SOAK_ARGS=--real-node"
    (folder / "README.txt").write_text(
        f"{result.summary_line()}\nreplay: {command}\n"
        f"nodes={opts.nodes} fault_interval={opts.fault_interval:g}\n"
    )
    (folder / "schedule.txt").write_text("".join(f.describe() + "\n" for f in schedule))
    timeline.save(folder / "timeline.jsonl")
    logs = folder / "logs"
    shutil.copytree(stack.root / "logs", logs, dirs_exist_ok=True)
    with contextlib.suppress(OSError):
        shutil.copytree(stack.root / "cluster" / "logs", logs / "cluster", dirs_exist_ok=True)
    if stack.real is not None:
        with contextlib.suppress(OSError):
            stack.real.copy_logs(logs / "real-node")
    report = [result.summary_line(), f"replay: {command}", f"saved in {folder}", ""]
    for violation in result.violations:
        report.append(f"VIOLATION {violation.invariant} {violation.subject}: {violation.detail}")
        seen = _timeline_time(violation, timeline)
        first = seen - violation.lasted_s
        report.append(
            f"  first found at t={first:.1f}s, reported at t={seen:.1f}s; faults, workload "
            f"and API writes of {violation.subject} from 30 s before:"
        )
        name = violation.subject.rsplit("/", 1)[-1].split()[0]
        report.extend(
            f"    {e.line()}"
            for e in timeline.around(first, before=30.0, after=seen - first + 1.0)
            if e.source != "api" or name in json.dumps(e.data)
        )
    report.append("")
    report.extend(_log_tails(stack))
    (folder / "violations.txt").write_text("\n".join(report) + "\n")
    opts.log("\n".join(report[:80]))
    return folder


def _timeline_time(violation: Violation, timeline: Timeline) -> float:
    for entry in timeline.entries():
        if entry.what == "VIOLATION" and entry.data.get("subject") == violation.subject:
            return entry.at
    return timeline.elapsed()


def _log_tails(stack: SoakStack) -> Iterator[str]:
    for name, proc in stack.all_components():
        yield f"last log lines of {name} (all of it in logs/):"
        yield from (f"    {line}" for line in proc.log_tail(15).splitlines())


def _plain(value: Any) -> Any:
    """The checker's summary as JSON-friendly data."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, int | float | str | bool) or value is None:
        return value
    return str(value)


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM ends the run like Ctrl-C, so that clean-up runs (SIGKILL: the next run's sweep)."""

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def exit_code(result: SoakResult) -> int:
    return 1 if result.violations else 0
