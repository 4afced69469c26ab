"""What a real local node changes on the machine, and how every change is undone.

A kubelet and containerd running as root touch the host outside their work
folder: cgroups in every hierarchy, mounts (the kubelet's shared bind mount of
its root folder, projected volumes, overlay root filesystems, network
namespaces), kernel sysctls the kubelet tunes, folders with hard-coded paths
(``/var/lib/kubelet/device-plugins``, ``/var/log/containers``,
``/run/containerd/s``), and processes that are not its children (runc shims,
container processes).

The contract:

- ``NodeRecord`` (``noderecord.py``) is written *before* the change it
  describes (sysctl values as they were), or right after it for what can only
  be known then (a created path's device and inode), so that a launcher
  killed at any moment leaves a record complete enough to undo everything. A
  launcher killed between a mkdir and the save after it leaves that one empty
  folder behind: a path whose identity was not recorded is never removed.
- ``restore(record)`` undoes it all and is idempotent: processes by pid and
  executable (a recycled pid is never hit), mounts deepest first, cgroups
  bottom-up, sysctls to their recorded values, created host paths removed.
  It acts only on a valid record and only on what is still the node's: mounts
  and files under a path whose device and inode still match the record, never
  across a mount point (an unmount that failed leaves the other file system
  untouched), the processes of the node's own ``drakit-<token>`` cgroup.
- ``sweep_nodes()`` restores what dead launchers left behind; a new node
  calls it before it changes anything. A record that fails its checks is
  refused, reported and left in place: nothing it names is touched.
- ``snapshot()`` captures the machine-visible state that ``restore`` must
  bring back, so tests can compare before and after.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from drakit.localcluster.hostnet import restore_links
from drakit.localcluster.leftovers import process_alive, process_exe, registry_dir
from drakit.localcluster.noderecord import (
    HostPath,
    NodeRecord,
    RecordError,
    check_cgroup_name,
)
from drakit.localcluster.onefs import mounts, remove_tree

#: Sysctls the kubelet sets at start (``setupKernelTunables``) when
#: protectKernelDefaults is false; restored at teardown.
KUBELET_SYSCTLS = (
    "vm.overcommit_memory",
    "vm.panic_on_oom",
    "kernel.panic",
    "kernel.panic_on_oops",
    "kernel.keys.root_maxkeys",
    "kernel.keys.root_maxbytes",
)

#: Host paths the kubelet, containerd, its shims or CNI use whatever their
#: configuration says. One that did not exist before ``up`` is removed by
#: ``down``; one that existed is left alone (another runtime may own it).
HARD_CODED_HOST_PATHS = (
    "/var/lib/kubelet",
    "/var/log/containers",
    "/var/log/pods",
    "/run/containerd",
    "/var/lib/cni",
    "/run/netns",
    "/etc/cni",
    "/opt/cni",
    "/run/nri",
    "/var/lib/nri",
    "/opt/containerd",
    "/var/lib/containerd",
    "/etc/containerd",
    "/run/cdi",
)

HOSTS_FILE = Path("/etc/hosts")
_MNT_DETACH = 2


class MachineLock:
    """An exclusive, machine-wide lock for running a real node (``flock``; freed on exit)."""

    def __init__(self, fd: int) -> None:
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, timeout: float) -> MachineLock:
        """Wait up to ``timeout`` seconds for the lock; raise TimeoutError naming the holder."""
        path = registry_dir() / "nodes" / ".machine.lock"
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if time.monotonic() > deadline:
                    holder = os.pread(fd, 64, 0).decode(errors="replace").strip()
                    os.close(fd)
                    raise TimeoutError(
                        f"another real node runs on this machine (launcher pid {holder or '?'}); "
                        f"waited {timeout:.0f}s"
                    ) from None
                time.sleep(0.5)
                continue
            os.ftruncate(fd, 0)
            os.pwrite(fd, str(os.getpid()).encode(), 0)
            return cls(fd)

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None


# -- recording (before the change) ----------------------------------------


def read_sysctls(names: tuple[str, ...] = KUBELET_SYSCTLS) -> dict[str, str]:
    """Current values of ``names`` (those this kernel has)."""
    values: dict[str, str] = {}
    for name in names:
        with contextlib.suppress(OSError):
            values[name] = _sysctl_path(name).read_text().strip()
    return values


def create_host_paths(record: NodeRecord, paths: tuple[str, ...], mode: int = 0o755) -> None:
    """Make the folders of ``paths`` that do not exist yet (missing parents too), recording
    each one's device and inode right after its mkdir.

    The node makes them itself, before its daemons would, so that the identity
    ``restore`` checks is that of the folder the node made.
    """
    for path in paths:
        missing = [p for p in (*reversed(Path(path).parents), Path(path)) if not p.exists()]
        for folder in missing:
            folder.mkdir(mode=mode)
            record.created_paths.append(HostPath.of(folder))
            record.save()


def create_cgroup_root(name: str) -> None:
    """Make ``/<name>`` in every cgroup hierarchy (the kubelet's cgroupRoot must exist).

    cpuset needs its cpus and mems filled before a task can join a child.
    """
    for path in _node_cgroups(name):
        hierarchy = path.parent
        path.mkdir(exist_ok=True)
        for knob in ("cpuset.cpus", "cpuset.mems"):
            parent_value = hierarchy / knob
            if parent_value.exists() and not (path / knob).read_text().strip():
                (path / knob).write_text(parent_value.read_text())


def add_hosts_entry(record: NodeRecord, name: str) -> None:
    """Resolve ``name`` to 127.0.0.1, so the apiserver reaches the kubelet on loopback.

    The record is saved first: a launcher killed right after still gets the
    line removed.
    """
    record.hosts_entry = True
    record.save()
    text = HOSTS_FILE.read_text()
    if record.hosts_marker not in text:
        sep = "" if text.endswith("\n") or not text else "\n"
        _write_in_place(HOSTS_FILE, f"{text}{sep}127.0.0.1 {name} {record.hosts_marker}\n")


def _remove_hosts_entry(record: NodeRecord) -> list[str]:
    if not record.hosts_entry or not HOSTS_FILE.exists():
        return []
    lines = HOSTS_FILE.read_text().splitlines(keepends=True)
    kept = [line for line in lines if not line.rstrip().endswith(record.hosts_marker)]
    if len(kept) == len(lines):
        return []
    _write_in_place(HOSTS_FILE, "".join(kept))
    return ["removed the /etc/hosts entry"]


def _write_in_place(path: Path, text: str) -> None:
    # In place, not by rename: /etc/hosts is often a bind mount (containers),
    # which cannot be replaced.
    with path.open("r+") as f:
        f.write(text)
        f.truncate()


def _node_cgroups(name: str) -> list[Path]:
    """``name``'s folder in every hierarchy; RecordError unless it is a node's cgroup name."""
    check_cgroup_name(name)
    return [hierarchy / name for hierarchy in cgroup_hierarchies()]


def cgroup_hierarchies() -> list[Path]:
    """Every mounted cgroup hierarchy (v1 controllers, named ones and cgroup2)."""
    found: list[Path] = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        sep = fields.index("-")
        if fields[sep + 1] in ("cgroup", "cgroup2"):
            found.append(Path(fields[4]))
    return found


# -- restoring --------------------------------------------------------------


def restore(record: NodeRecord) -> list[str]:
    """Undo everything ``record`` describes; returns what was done and what was left, and
    why. Idempotent.

    Raises RecordError, before touching anything, unless ``record`` is valid.
    """
    record.validate()
    done: list[str] = []
    done += _kill_recorded(record)
    done += _kill_shims(record)
    done += _kill_cgroup_members(record.cgroup_name)
    # Only under what is still the node's: a path made again by someone else has their mounts.
    roots = [p.path for p in (record.work_dir, *record.created_paths) if p.is_current()]
    done += _unmount_under(roots)
    done += restore_links(record)
    done += _remove_cgroups(record.cgroup_name)
    done += _restore_sysctls(record.sysctls)
    done += _remove_hosts_entry(record)
    removable = [*record.created_paths, *([record.work_dir] if record.owns_work_dir else [])]
    for created in sorted(removable, key=lambda p: -len(p.path)):  # children before parents
        done += _remove_created(created)
    return done


def _remove_created(created: HostPath) -> list[str]:
    if not os.path.lexists(created.path):
        return []
    left = remove_tree(created.path, created.device, created.inode)
    return left or [f"removed {created.path}"]


def sweep_nodes() -> list[str]:
    """Restore the host for every node record whose launcher is gone."""
    done: list[str] = []
    folder = registry_dir() / "nodes"
    if not folder.is_dir():
        return done
    records: list[tuple[Path, NodeRecord]] = []
    for path in sorted(folder.glob("*.json")):
        try:
            records.append((path, NodeRecord.load(path)))
        except RecordError as err:
            done.append(f"refused {err}; nothing it names was touched: check it, then delete it")
    # A group's network goes after its nodes, whose veths are on its bridge.
    for path, record in sorted(records, key=lambda item: item[1].kind == "network"):
        if record.owner_pid != os.getpid() and process_alive(record.owner_pid):
            continue
        if record.owner_pid == os.getpid():
            continue  # this process's own node: its stop() restores it
        done += restore(record)
        path.unlink(missing_ok=True)
    return done


def _kill_recorded(record: NodeRecord) -> list[str]:
    done = []
    for pid, exe in record.processes:
        if process_exe(pid) == exe:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            done.append(f"killed {Path(exe).name} (pid {pid})")
    return done


def _kill_shims(record: NodeRecord) -> list[str]:
    if not record.shim_exe:
        return []
    done = []
    for pid in _pids():
        if process_exe(pid) != record.shim_exe:
            continue
        if record.containerd_address and record.containerd_address not in _cmdline(pid):
            continue  # another containerd's shim
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        done.append(f"killed shim (pid {pid})")
    return done


def _kill_cgroup_members(name: str, attempts: int = 100) -> list[str]:
    """SIGKILL every process in the node's cgroups until they are empty.

    RecordError, before anything is killed, unless ``name`` is ``drakit-<token>``.
    """
    check_cgroup_name(name)
    killed: set[int] = set()
    for _ in range(attempts):
        _thaw(name)
        pids = _cgroup_pids(name)
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            killed.add(pid)
        time.sleep(0.05)
    return [f"killed {len(killed)} container processes"] if killed else []


def _cgroup_pids(name: str) -> set[int]:
    pids: set[int] = set()
    for top in _node_cgroups(name):
        if not top.is_dir():
            continue
        for procs in top.rglob("cgroup.procs"):
            with contextlib.suppress(OSError, ValueError):
                pids.update(int(x) for x in procs.read_text().split())
    return pids


def _thaw(name: str) -> None:
    """A frozen task cannot die: thaw the freezer hierarchy's cgroups first."""
    for top in _node_cgroups(name):
        for state in top.rglob("freezer.state") if top.is_dir() else ():
            with contextlib.suppress(OSError):
                state.write_text("THAWED")


def _remove_cgroups(name: str) -> list[str]:
    done = []
    for top in _node_cgroups(name):
        if not top.is_dir():
            continue
        # Deepest first: a cgroup with children cannot be removed.
        dirs = sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts))
        for d in [*dirs, top]:
            for _ in range(50):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.05)  # a task that was just killed may not have left yet
        done.append(f"removed cgroup {top}")
    return done


def _unmount_under(roots: list[str]) -> list[str]:
    done = []
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    prefixes = [os.path.realpath(r).rstrip("/") + "/" for r in roots]
    for _ in range(10):  # a lazy unmount can uncover a mount below it
        targets = sorted(
            {m for m, _ in mounts() if any((m + "/").startswith(p) for p in prefixes)},
            key=lambda m: -len(m),
        )
        if not targets:
            break
        for target in targets:
            if libc.umount2(target.encode(), _MNT_DETACH) == 0:
                done.append(f"unmounted {target}")
    return done


def _restore_sysctls(values: dict[str, str]) -> list[str]:
    done = []
    for name, value in values.items():
        if name not in KUBELET_SYSCTLS:
            done.append(f"left {name}: not a sysctl the kubelet changes")
            continue
        path = _sysctl_path(name)
        with contextlib.suppress(OSError):
            if path.read_text().strip() != value:
                path.write_text(value)
                done.append(f"restored {name}={value}")
    return done


def _sysctl_path(name: str) -> Path:
    return Path("/proc/sys") / name.replace(".", "/")


def _pids() -> list[int]:
    return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]


def _cmdline(pid: int) -> str:
    try:
        return (
            Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        )
    except OSError:
        return ""


# -- comparing ---------------------------------------------------------------


@dataclass(frozen=True)
class MachineSnapshot:
    """The host state a node must leave as it found it."""

    mounts: frozenset[tuple[str, str]]
    top_cgroups: frozenset[str]
    sysctls: tuple[tuple[str, str], ...]
    host_paths: frozenset[str]
    hosts_file: str
    netns: frozenset[str]
    processes: frozenset[tuple[int, str]]
    #: The host's network as a group of nodes could change it: link names, routes (all
    #: tables), the netfilter rules (iptables-save, counters left out) and the sysctls of
    #: forwarding and of bridged traffic.
    links: frozenset[str] = frozenset()
    routes: frozenset[str] = frozenset()
    netfilter: str = ""
    net_sysctls: tuple[tuple[str, str], ...] = ()


#: Host sysctls a node group or its kube-proxies could touch (each must stay as it was).
NET_SYSCTLS = (
    "net.ipv4.ip_forward",
    "net.ipv4.conf.all.route_localnet",
    "net.bridge.bridge-nf-call-iptables",
    "net.bridge.bridge-nf-call-ip6tables",
    "net.netfilter.nf_conntrack_max",
)


def snapshot(process_exe_prefix: str) -> MachineSnapshot:
    """The machine as a node could change it.

    ``process_exe_prefix``: processes whose executable lies under it (drakit's
    binary cache) are listed, so a leftover kubelet, containerd or shim shows.
    """
    cgroups = frozenset(
        str(d) for h in cgroup_hierarchies() if h.is_dir() for d in h.iterdir() if d.is_dir()
    )
    netns_dir = Path("/run/netns")
    procs = frozenset(
        (pid, exe)
        for pid in _pids()
        if (exe := process_exe(pid)) and exe.startswith(process_exe_prefix)
    )
    return MachineSnapshot(
        mounts=frozenset(mounts()),
        top_cgroups=cgroups,
        sysctls=tuple(sorted(read_sysctls().items())),
        host_paths=frozenset(p for p in HARD_CODED_HOST_PATHS if os.path.lexists(p)),
        hosts_file=Path("/etc/hosts").read_text(),
        netns=frozenset(p.name for p in netns_dir.iterdir()) if netns_dir.is_dir() else frozenset(),
        processes=procs,
        links=frozenset(p.name for p in Path("/sys/class/net").iterdir()),
        routes=frozenset(_command_lines(["ip", "-4", "route", "show", "table", "all"])),
        netfilter=_netfilter_rules(),
        net_sysctls=tuple(sorted(_read_any(NET_SYSCTLS).items())),
    )


def _command_lines(argv: list[str]) -> list[str]:
    """The output lines of ``argv`` ([] when it cannot run)."""
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=30)
    except OSError:
        return []
    return proc.stdout.splitlines()


def _netfilter_rules() -> str:
    """iptables-save without its comments and counters: the rules and chains alone."""
    lines = _command_lines(["iptables-save"])
    return "\n".join(
        line.split(" [", 1)[0] if line.startswith(":") else line
        for line in lines
        if not line.startswith("#")
    )


def _read_any(names: tuple[str, ...]) -> dict[str, str]:
    values = {}
    for name in names:
        with contextlib.suppress(OSError):
            values[name] = _sysctl_path(name).read_text().strip()
    return values
