"""A home CPU for the node plugin's threads: all of them on one CPU, the least busy one.

Why: the GIL runs one thread of the plugin at a time, so the plugin never uses much
more than one CPU, yet its threads hand work to each other all the time. A gRPC call
on grpcio's pool passes from its poller thread to a worker and back three times
(prepare and unprepare skip that: ``service/direct.py``), and a claim GET wakes the
thread waiting for it. Spread over CPUs, each hand-over wakes a thread on
another CPU: an inter-processor interrupt, on a VM the exit of a halted vCPU, and a
GIL that bounces between caches. With all threads on one CPU the woken thread just
runs when the waker blocks. On the benchmark machine a call without claims took
0.62 ms spread and 0.44 ms at home (``docs/benchmarks.md``).

Rules:

* The home is one of the CPUs the process may use: the affinity of the keeper thread,
  which is never moved itself, so it keeps what the process was given (an operator's
  ``taskset``, isolated CPUs left out) within the container's cpuset as the kernel
  updates it. A cpuset the kubelet's CPU manager shrinks is followed; with one CPU
  there is nothing to choose.
* The home is the allowed CPU with the least busy time (``/proc/stat``: all but
  idle and iowait, steal included) over the last period, the plugin's own CPU time
  taken off its current home. It is chosen again every ``period`` seconds and moves
  only when another CPU was less busy by at least :data:`MOVE_MARGIN` of a CPU: a
  CPU a busy workload takes over is left within a period, and the plugin does not
  hop between equally idle CPUs.
* Every thread of the process but the keeper is moved (``/proc/self/task``). Threads started later
  inherit the home from the thread that starts them. Processes the plugin starts
  inherit it too (the built-in backends start none; a custom backend that runs
  CPU-heavy programs should widen their affinity or run with ``--cpu-home off``).
* Nothing here may take the plugin down: a failure (no ``/proc/stat``, a CPU that
  left the cpuset between reading and moving) gives every thread the keeper's CPUs
  again and is logged once; the next period tries again.
* :meth:`CpuHome.stop` ends the keeper, which gives every thread its CPUs back.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path

from drakit.telemetry.logs import get_logger

_log = get_logger(__name__)

#: Seconds between choices of the home.
DEFAULT_PERIOD = 10.0
#: Seconds from start to the first choice: long enough for a first sample of the load.
FIRST_CHOICE_AFTER = 1.0
#: How much less busy (fraction of one CPU) another CPU must have been to move there.
MOVE_MARGIN = 0.2
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
_IDLE_FIELDS = (3, 4)  # idle, iowait: the CPU had nothing to run


@dataclass(frozen=True)
class CpuTimes:
    """Cumulative ticks of one CPU: all of them and the busy ones."""

    total: int
    busy: int


def parse_proc_stat(text: str) -> dict[int, CpuTimes]:
    """Per-CPU times from the text of ``/proc/stat`` (the ``cpuN`` lines)."""
    times: dict[int, CpuTimes] = {}
    for line in text.splitlines():
        name, _, rest = line.partition(" ")
        if not name.startswith("cpu") or not name[3:].isdigit():
            continue
        ticks = [int(v) for v in rest.split()[:8]]  # guest time is already in user
        idle = sum(ticks[i] for i in _IDLE_FIELDS if i < len(ticks))
        times[int(name[3:])] = CpuTimes(total=sum(ticks), busy=sum(ticks) - idle)
    return times


def busy_share(before: Mapping[int, CpuTimes], after: Mapping[int, CpuTimes]) -> dict[int, float]:
    """Each CPU's busy fraction between two samples (CPUs in both, with time passed)."""
    shares: dict[int, float] = {}
    for cpu, end in after.items():
        start = before.get(cpu)
        if start is not None and end.total > start.total:
            shares[cpu] = (end.busy - start.busy) / (end.total - start.total)
    return shares


def choose_home(
    allowed: Collection[int],
    busy: Mapping[int, float],
    current: int | None,
    own_share: float,
) -> int | None:
    """The CPU to be at home on, or None when there is no choice to make.

    ``busy``: each CPU's busy fraction over the last period; ``own_share``: the fraction
    of one CPU the plugin itself used then, all of it on ``current``. Stays on
    ``current`` unless another allowed CPU was less busy by :data:`MOVE_MARGIN`.
    """
    known = sorted(cpu for cpu in allowed if cpu in busy)
    if len(allowed) < 2 or not known:
        return None

    def others_load(cpu: int) -> float:
        return busy[cpu] - own_share if cpu == current else busy[cpu]

    best = min(known, key=lambda cpu: (others_load(cpu), cpu))
    if current in known and others_load(current) <= others_load(best) + MOVE_MARGIN:
        return current
    return best


class CpuHome:
    """Keeps every thread of this process on one home CPU; see the module rules.

    ``start`` and ``stop`` are idempotent. ``read_stat`` and ``own_seconds`` are the
    sources of load (``/proc/stat`` and the process's CPU seconds), replaceable in tests.
    """

    def __init__(
        self,
        period: float = DEFAULT_PERIOD,
        *,
        read_stat: Callable[[], str] = lambda: Path("/proc/stat").read_text(),
        own_seconds: Callable[[], float] = lambda: sum(os.times()[:2]),
        first_choice_after: float = FIRST_CHOICE_AFTER,
    ) -> None:
        self.period = period
        self._read_stat = read_stat
        self._own_seconds = own_seconds
        self._first_choice_after = first_choice_after
        self.home: int | None = None
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._keeper_id = 0  # the keeper's native thread id, once it runs
        self._failed_before = False

    def start(self) -> None:
        """Start the keeper thread (a daemon); the first home is chosen shortly after."""
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._keep, name="cpu-home", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop choosing; every thread gets the CPUs the process may use back."""
        self._stopping.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    def _keep(self) -> None:
        # The keeper itself is never moved: its affinity stays what the process was
        # given (the kernel keeps it within the cpuset), so it always reads the CPUs
        # the process may use.
        self._keeper_id = threading.get_native_id()
        with contextlib.suppress(OSError):  # its name in top -H and /proc: tells it apart
            Path("/proc/thread-self/comm").write_text("cpu-home")
        wait = self._first_choice_after
        sample = self._sample()
        while not self._stopping.wait(wait):
            wait = self.period
            latest = self._sample()
            if sample is not None and latest is not None:
                self._choose(sample, latest)
            sample = latest
        self._leave_home()

    def _sample(self) -> tuple[dict[int, CpuTimes], float] | None:
        try:
            return parse_proc_stat(self._read_stat()), self._own_seconds()
        except (OSError, ValueError) as exc:
            self._give_up(f"cannot read the CPUs' load: {exc}")
            return None

    def _choose(
        self, before: tuple[dict[int, CpuTimes], float], after: tuple[dict[int, CpuTimes], float]
    ) -> None:
        shares = busy_share(before[0], after[0])
        elapsed = _elapsed_seconds(before[0], after[0], self.home)
        own = (after[1] - before[1]) / elapsed if elapsed > 0 else 0.0
        try:
            allowed = os.sched_getaffinity(0)
            home = choose_home(allowed, shares, self.home, own)
            if home is None:
                self._leave_home()
                return
            # Also when staying: threads started since the last choice by a thread
            # the kernel had put elsewhere (a cpuset change resets every affinity).
            _move_threads({home}, but=self._keeper_id)
            if home != self.home:
                _log.info("Threads moved to their home CPU", cpu=home, allowed=sorted(allowed))
            self.home = home
        except OSError as exc:
            self._give_up(f"cannot move the threads: {exc}")

    def _leave_home(self) -> None:
        """Give every thread the CPUs the process may use (the keeper's own affinity)."""
        if self.home is None:
            return
        self.home = None
        with contextlib.suppress(OSError):
            _move_threads(os.sched_getaffinity(0), but=self._keeper_id)

    def _give_up(self, reason: str) -> None:
        """Leave the home for this period; log the first time only."""
        self._leave_home()
        if not self._failed_before:
            self._failed_before = True
            _log.warning("No home CPU for the plugin's threads this period", reason=reason)


def _move_threads(cpus: set[int], *, but: int) -> None:
    """Set the affinity of every thread of the process but one; threads that ended are
    skipped."""
    for task in Path("/proc/self/task").iterdir():
        tid = int(task.name)
        if tid != but:
            with contextlib.suppress(ProcessLookupError):
                os.sched_setaffinity(tid, cpus)


def _elapsed_seconds(
    before: Mapping[int, CpuTimes], after: Mapping[int, CpuTimes], cpu: int | None
) -> float:
    """Seconds between two samples, from one CPU's total ticks (every CPU's clock agrees)."""
    key = cpu if cpu in before and cpu in after else next(iter(after), None)
    if key is None or key not in before:
        return 0.0
    return (after[key].total - before[key].total) / _CLOCK_TICKS
