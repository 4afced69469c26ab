"""The fault schedule (a pure function of the seed) and the injector that applies it.

:func:`plan` turns (seed, duration, nodes) into a list of :class:`Fault`: the same seed and
duration always give the same list, printed at the start of a run and saved with a
violation. Targets are fixed by the plan except a controller replica, which is named by
role (``leader``/``standby``) and resolved when the fault fires (the log says which one).

Faults on the same target never overlap (the plan keeps each target busy for the fault's
duration plus a settling margin); faults on different targets do, which is the point.

:class:`Injector` applies faults and undoes them (SIGCONT, proxy back to ``pass``, holding
a killed component down for its downtime) on the thread that calls :meth:`Injector.tick`:
restarts spawn processes, and ``PR_SET_PDEATHSIG`` ties a child to the thread that forked it.
"""

from __future__ import annotations

import base64
import functools
import heapq
import json
import random
import signal
import urllib.request
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from soak.realnode import REAL_NODE
from soak.stack import SoakStack

#: (kind, weight). Kill kinds restart the component after ``duration`` seconds down.
KINDS: tuple[tuple[str, int], ...] = (
    ("kill-plugin", 6),
    ("rolling-update-kill", 3),
    ("kill-controller-leader", 5),
    ("kill-controller-standby", 1),
    ("pause-controller-leader", 2),
    ("kill-harness", 3),
    ("kill-scheduler", 2),
    ("kill-controller-manager", 1),
    ("kill-apiserver", 2),
    ("kill-etcd", 1),
    ("pause", 4),
    ("proxy", 8),
    ("compact-etcd", 2),
    ("checkpoint-fs-full", 2),
    ("checkpoint-fs-readonly", 2),
)
#: The real node's kinds (``--real-node``), planned from a random stream of their own so that
#: a seed's schedule without the real node stays what it was. ``proxy`` faults there cut
#: the real kubelet's or the real plugin's connection to the apiserver.
REAL_KINDS: tuple[tuple[str, int], ...] = (
    ("kill-real-plugin", 4),
    ("kill-real-kubelet", 3),
    ("kill-real-containerd", 2),
    ("rolling-update-real-plugin", 3),
    ("proxy", 2),
)
PROXY_MODES = ("drop_new", "reset_all", "delay", "blackhole", "cut")
#: Components a plain ``pause`` may stop (controllers have a kind of their own).
PAUSABLE_CLUSTER = ("kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd")
#: Seconds a target stays reserved after its fault ends (restart, re-registration).
SETTLE = 20.0


class Clock(Protocol):
    def elapsed(self) -> float: ...


@dataclass(frozen=True)
class Fault:
    """One planned fault: at ``at`` seconds after the start, ``kind`` on ``target``."""

    at: float
    kind: str
    target: str
    duration: float
    param: str = ""

    def describe(self) -> str:
        extra = f" {self.param}" if self.param else ""
        return (
            f"t={self.at:7.1f}s {self.kind:<24} {self.target:<24} for {self.duration:4.1f}s{extra}"
        )


def plan(
    seed: int,
    duration: float,
    nodes: list[str],
    mean_interval: float,
    *,
    real_node: bool = False,
) -> list[Fault]:
    """The fault schedule for a run of ``duration`` seconds (faults end by ``duration``).

    With ``real_node``, the real node's faults (``REAL_KINDS``, at the same mean interval)
    are merged in; the other faults are the same as without it.
    """
    base = random.Random(f"faults-{seed}")
    faults = _stream(base, duration, mean_interval, KINDS, nodes, draw=_draw)
    if real_node:
        real = random.Random(f"real-node-faults-{seed}")
        faults += _stream(real, duration, mean_interval, REAL_KINDS, nodes, draw=_draw_real)
        faults.sort(key=lambda f: f.at)  # stable: equal times keep the base fault first
    return faults


def _stream(
    rng: random.Random,
    duration: float,
    mean_interval: float,
    table: tuple[tuple[str, int], ...],
    nodes: list[str],
    *,
    draw: Callable[[random.Random, float, str, list[str]], Fault],
) -> list[Fault]:
    """Faults drawn from ``table`` at exponential gaps; each target busy until it settled."""
    kinds = [k for k, _ in table]
    weights = [w for _, w in table]
    busy: dict[str, float] = {}
    faults: list[Fault] = []
    t = rng.uniform(5.0, mean_interval)
    while t < duration:
        kind = rng.choices(kinds, weights)[0]
        fault = draw(rng, t, kind, nodes)
        end = fault.at + fault.duration
        if busy.get(fault.target, -1.0) <= t and end < duration:
            faults.append(fault)
            busy[fault.target] = end + SETTLE
        t += rng.expovariate(1.0 / mean_interval)
    return faults


def _draw_real(rng: random.Random, t: float, kind: str, nodes: list[str]) -> Fault:
    """A fault of the real node (``nodes``, the simulated ones, are not used)."""
    at = round(t, 1)
    if kind in ("kill-real-plugin", "rolling-update-real-plugin"):
        # The kubelet restarts the plugin (or the DaemonSet replaces it): nothing to hold
        # down; the duration only keeps the next plugin fault away a little longer.
        return Fault(at, kind, f"{REAL_NODE}/plugin", round(rng.uniform(5.0, 15.0), 1))
    if kind == "kill-real-kubelet":
        return Fault(at, kind, f"{REAL_NODE}/kubelet", round(rng.uniform(0.0, 4.0), 1))
    if kind == "kill-real-containerd":
        return Fault(at, kind, f"{REAL_NODE}/containerd", round(rng.uniform(0.0, 4.0), 1))
    if kind == "proxy":
        target = rng.choice([f"{REAL_NODE}/kubelet", f"{REAL_NODE}/plugin"])
        mode = rng.choice(PROXY_MODES)
        return Fault(at, kind, target, round(rng.uniform(2.0, 20.0), 1), mode)
    raise ValueError(f"unknown real-node fault kind {kind!r}")


def _draw(rng: random.Random, t: float, kind: str, nodes: list[str]) -> Fault:
    node = rng.choice(nodes)
    at = round(t, 1)
    if kind in ("kill-plugin", "rolling-update-kill"):
        return Fault(at, kind, f"{node}/plugin", round(rng.uniform(0.0, 4.0), 1))
    if kind == "kill-harness":
        return Fault(at, kind, f"{node}/harness", round(rng.uniform(0.0, 4.0), 1))
    if kind in ("kill-controller-leader", "kill-controller-standby"):
        return Fault(at, kind, "controller", round(rng.uniform(0.0, 5.0), 1))
    if kind == "pause-controller-leader":  # past the lease duration (10 s): lease lost while alive
        return Fault(at, kind, "controller", round(rng.uniform(6.0, 18.0), 1))
    cluster_kills = {
        "kill-scheduler": "kube-scheduler",
        "kill-controller-manager": "kube-controller-manager",
        "kill-apiserver": "kube-apiserver",
        "kill-etcd": "etcd",
    }
    if kind in cluster_kills:
        return Fault(at, kind, cluster_kills[kind], round(rng.uniform(0.0, 5.0), 1))
    if kind == "pause":
        target = rng.choice([*PAUSABLE_CLUSTER, f"{node}/plugin", f"{node}/harness"])
        return Fault(at, kind, target, round(rng.uniform(1.0, 12.0), 1))
    if kind == "proxy":
        components = [
            "kube-scheduler",
            "kube-controller-manager",
            "controller-0",
            "controller-1",
            f"{node}/plugin",
            f"{node}/harness",
        ]
        mode = rng.choice(PROXY_MODES)
        return Fault(at, kind, rng.choice(components), round(rng.uniform(2.0, 20.0), 1), mode)
    if kind == "compact-etcd":
        return Fault(at, kind, "etcd-compaction", 0.0)
    if kind.startswith("checkpoint-fs"):
        return Fault(at, kind, f"{node}/datafs", round(rng.uniform(2.0, 15.0), 1))
    raise ValueError(f"unknown fault kind {kind!r}")


@dataclass(order=True)
class _Undo:
    at: float
    seq: int
    what: str = field(compare=False)
    action: Callable[[], None] = field(compare=False)


class Injector:
    """Applies a plan against a :class:`SoakStack`; call :meth:`tick` often from one thread."""

    def __init__(
        self,
        stack: SoakStack,
        faults: list[Fault],
        record: Callable[[str, dict[str, Any]], None],
        clock: Clock,
    ) -> None:
        """``clock.elapsed()`` is the time the plan's ``at`` values count from."""
        self.stack = stack
        self.clock = clock
        self.pending = sorted(faults, key=lambda f: f.at)
        self.record = record
        self.injected: Counter[str] = Counter()
        self.failed: Counter[str] = Counter()
        #: Why a fault of each kind could not be applied, the last time it could not.
        self.failed_why: dict[str, str] = {}
        self._undo: list[_Undo] = []
        self._seq = 0

    def elapsed(self) -> float:
        return self.clock.elapsed()

    def tick(self) -> None:
        """Apply the faults that are due and undo those whose time is up."""
        now = self.elapsed()
        while self._undo and self._undo[0].at <= now:
            undo = heapq.heappop(self._undo)
            self._run(f"end {undo.what}", undo.action)
        while self.pending and self.pending[0].at <= now:
            fault = self.pending.pop(0)
            self.record(
                "fault",
                {
                    "kind": fault.kind,
                    "target": fault.target,
                    "duration": fault.duration,
                    "param": fault.param,
                },
            )
            error = self._run(fault.describe(), functools.partial(self._apply, fault))
            if error is None:
                self.injected[fault.kind] += 1
            else:
                self.failed[fault.kind] += 1
                self.failed_why[fault.kind] = error[:200]

    def finish(self) -> None:
        """Undo every fault still in effect now (faults stop before the liveness phase)."""
        self.pending.clear()
        while self._undo:
            undo = heapq.heappop(self._undo)
            self._run(f"end {undo.what}", undo.action)

    def _later(self, delay: float, what: str, action: Callable[[], None]) -> None:
        self._seq += 1
        heapq.heappush(self._undo, _Undo(self.elapsed() + delay, self._seq, what, action))

    def _run(self, what: str, action: Callable[[], None]) -> str | None:
        """Run ``action``; None when it worked, else the error (also recorded)."""
        try:
            action()
        except Exception as err:
            error = f"{type(err).__name__}: {err}"
            self.record("fault-error", {"what": what, "error": error})
            return error
        return None

    # -- the kinds ---------------------------------------------------------------------------

    def _apply(self, fault: Fault) -> None:
        kind = fault.kind
        if kind.startswith("kill-controller") or kind == "pause-controller-leader":
            self._controller_fault(fault)
        elif kind == "rolling-update-kill":
            self._rolling_update_kill(fault)
        elif kind in ("kill-real-plugin", "rolling-update-real-plugin"):
            self._real_plugin(fault)
        elif kind.startswith("kill-"):
            self._kill_and_hold(fault.target, fault.duration)
        elif kind == "pause":
            self._pause(fault.target, fault.duration)
        elif kind == "proxy":
            self._proxy(fault)
        elif kind == "compact-etcd":
            self._compact_etcd()
        elif kind.startswith("checkpoint-fs"):
            self._datafs(fault)
        else:
            raise ValueError(f"unknown fault kind {kind!r}")

    def _process(self, component: str) -> Any:
        for name, proc in self.stack.all_components():
            if name == component:
                return proc
        raise KeyError(f"no component {component!r}")

    def _kill_and_hold(self, component: str, down_for: float) -> None:
        """SIGKILL; the supervisor restarts it once ``down_for`` seconds have passed."""
        self.stack.held_down.add(component)
        self._process(component).kill()
        self._later(down_for, f"downtime of {component}", lambda: self._release(component))

    def _release(self, component: str) -> None:
        self.stack.held_down.discard(component)
        for name in self.stack.supervise():
            self.record("restarted", {"component": name})

    def _controller_fault(self, fault: Fault) -> None:
        leader = self.stack.leader()
        replicas = sorted(self.stack.controllers)
        if fault.kind == "kill-controller-standby":
            target = next((r for r in replicas if r != leader), replicas[-1])
        else:
            target = leader or replicas[0]
        self.record("resolved", {"kind": fault.kind, "target": target, "leader": leader})
        if fault.kind == "pause-controller-leader":
            self._pause(target, fault.duration)
        else:
            self._kill_and_hold(target, fault.duration)

    def _rolling_update_kill(self, fault: Fault) -> None:
        """A second plugin instance starts (new pod UID); the old one is SIGKILLed while the
        new one is still registering, ``fault.duration`` seconds later at most."""
        node = fault.target.split("/")[0]
        old = self.stack.nodes[node].plugin
        self.stack.start_rolling_update(node)
        self._later(min(fault.duration, 2.0), f"old plugin of {node}", old.kill)

    def _real_plugin(self, fault: Fault) -> None:
        """SIGKILL the real node's plugin container, or roll its DaemonSet (helm upgrade)."""
        real = self.stack.real
        if real is None:
            raise RuntimeError("no real node in this stack (run with --real-node)")
        if fault.kind == "kill-real-plugin":
            self.record("killed", {"target": fault.target, "pids": real.kill_plugin()})
        else:
            self.record("rolled", {"target": fault.target, "rollout": real.rolling_update()})

    def _pause(self, component: str, seconds: float) -> None:
        proc = self._process(component)
        proc.signal(signal.SIGSTOP)
        self._later(seconds, f"pause of {component}", lambda: proc.signal(signal.SIGCONT))

    def _proxy(self, fault: Fault) -> None:
        proxy = self.stack.proxies[fault.target].proxy
        if fault.param == "cut":
            proxy.cut_all()
            return
        if fault.param == "delay":
            proxy.set_mode("delay", delay=2.0)
        else:
            proxy.set_mode(fault.param)
        self._later(
            fault.duration, f"proxy {fault.param} of {fault.target}", lambda: proxy.set_mode("pass")
        )

    def _datafs(self, fault: Fault) -> None:
        """The plugin's data folder full (a filler file) or read-only for a while."""
        datafs = self.stack.nodes[fault.target.split("/")[0]].datafs
        if datafs is None:
            raise RuntimeError("the plugin data folders are not on a tmpfs (needs root)")
        if fault.kind == "checkpoint-fs-full":
            datafs.fill()
            self._later(fault.duration, f"{fault.target} full", datafs.unfill)
        else:
            datafs.read_only()
            self._later(fault.duration, f"{fault.target} read-only", datafs.read_write)

    def _compact_etcd(self) -> None:
        assert self.stack.cluster is not None
        revision = compact_etcd(self.stack.cluster.etcd_url)
        self.record("compacted", {"revision": revision})


def compact_etcd(etcd_url: str) -> int:
    """Compact etcd at its current revision (watches behind it get 410 Gone); returns it."""
    header = _etcd_post(etcd_url, "/v3/kv/range", {"key": base64.b64encode(b"/").decode()})
    revision = int(header["header"]["revision"])
    _etcd_post(etcd_url, "/v3/kv/compaction", {"revision": revision})
    return revision


def _etcd_post(base: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    """One call to etcd's v3 JSON gateway on its loopback client port."""
    req = urllib.request.Request(
        base + path,
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        answer: dict[str, Any] = json.loads(resp.read())
    return answer
