"""The record of what one local node changed on the host, and the checks a
record must pass before anything acts on it.

Restoring a record kills processes and deletes folders as root, so a record
is trusted only when:

- its file is a regular file owned by the user applying it (root, for a real
  node) with mode 0600: nobody else can have written or swapped it;
- it matches the schema exactly (every field present, of its type, no other
  field); the cgroup it names is ``drakit-<token>``, never empty, so a
  restore can only empty the node's own cgroup tree;
- every path it may delete carries the device and inode it had when the node
  created it: a path removed and made again by someone else (a later real
  kubelet install) is another object and is left alone;
- every link it names is one its token names (``netplan.py``): a restore can only
  delete what that node made. A node's network namespace is a file in its run folder
  (a created path), unmounted with the rest.

A record that fails is refused with a ``RecordError`` naming the file, the
field and the reason, and nothing it names is touched.
"""

from __future__ import annotations

import json
import os
import re
import stat
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from drakit.localcluster.leftovers import registry_dir
from drakit.localcluster.netplan import bridge_name, veth_name

_TOKEN = re.compile(r"[a-z0-9]{1,32}")
_SYSCTL_NAME = re.compile(r"[a-z0-9_]+(\.[a-z0-9_-]+)+")
_RECORD_MODE = 0o600
#: What a record describes: one node (its kubelet and runtime), or what a group of nodes in
#: their own network namespaces shares (``nodegroup.py``): restored after its nodes.
KINDS = ("node", "network")


class RecordError(ValueError):
    """A node record that must not be acted on."""


def node_cgroup_name(token: str) -> str:
    """The top-level cgroup of the node with ``token``: ``drakit-<token>``."""
    if not _TOKEN.fullmatch(token):
        raise RecordError(f"token {token!r} is not 1-32 lowercase letters or digits")
    return f"drakit-{token}"


def check_cgroup_name(name: str) -> str:
    """``name`` if it is a node's cgroup (``drakit-<token>``); RecordError otherwise.

    Everything that kills, thaws or removes cgroups by name goes through this:
    an empty name would mean every cgroup of the machine.
    """
    token = name.removeprefix("drakit-")
    if token == name or node_cgroup_name(token) != name:
        raise RecordError(f"cgroup name {name!r} is not drakit-<token>")
    return name


@dataclass(frozen=True)
class HostPath:
    """A path and the identity (device, inode) of the object it named when recorded."""

    path: str
    device: int
    inode: int

    @classmethod
    def of(cls, path: str | Path) -> HostPath:
        """The identity ``path`` has now (it must exist; a symbolic link is not followed)."""
        found = os.lstat(path)
        return cls(str(path), found.st_dev, found.st_ino)

    def is_current(self) -> bool:
        """Whether ``path`` still names the recorded object."""
        try:
            found = os.lstat(self.path)
        except OSError:
            return False
        return (found.st_dev, found.st_ino) == (self.device, self.inode)


@dataclass
class NodeRecord:
    """Everything one local node may have changed on the host."""

    owner_pid: int
    token: str
    #: The node's work folder; removed by ``restore`` only when ``owns_work_dir``.
    work_dir: HostPath
    owns_work_dir: bool
    #: Top-level cgroup (in every hierarchy) that holds the node's pods: ``drakit-<token>``.
    cgroup_name: str
    sysctls: dict[str, str] = field(default_factory=dict)
    #: Host paths the node made (each recorded right after its mkdir).
    created_paths: list[HostPath] = field(default_factory=list)
    #: (pid, executable) of processes the launcher started itself.
    processes: list[tuple[int, str]] = field(default_factory=list)
    #: Shims are started by containerd and outlive it; they are found by
    #: executable and by the containerd address on their command line.
    shim_exe: str = ""
    containerd_address: str = ""
    #: Whether /etc/hosts got a line for the node name (removed by its marker).
    hosts_entry: bool = False
    kind: str = "node"
    #: Links it made on the host: its bridge ``dkb<token>`` or its veth ``dkv<token>`` only.
    links: list[str] = field(default_factory=list)

    @property
    def hosts_marker(self) -> str:
        return f"# drakit-node {self.token}"

    @property
    def path(self) -> Path:
        return registry_dir() / "nodes" / f"{self.owner_pid}-{self.token}.json"

    def validate(self) -> None:
        """Raise RecordError unless this record would pass ``load``'s schema check."""
        _from_json(json.loads(json.dumps(asdict(self))), f"node record {self.token!r}")

    def save(self) -> None:
        """Write the record (mode 0600, atomically); RecordError if it is not valid."""
        self.validate()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.unlink(missing_ok=True)  # O_EXCL below: a file someone else left is never reused
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, _RECORD_MODE)
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(asdict(self)))
        tmp.replace(self.path)

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)

    @classmethod
    def load(cls, path: Path) -> NodeRecord:
        """Read a record; RecordError (naming the file and the reason) unless it is trusted."""
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError as err:
            raise RecordError(f"node record {path}: cannot open: {err.strerror}") from None
        with os.fdopen(fd) as f:
            _check_file(os.fstat(fd), path)
            try:
                data = json.loads(f.read())
            except ValueError as err:
                raise RecordError(f"node record {path}: not JSON: {err}") from None
        return _from_json(data, f"node record {path}")


def _check_file(found: os.stat_result, path: Path) -> None:
    if not stat.S_ISREG(found.st_mode):
        raise RecordError(f"node record {path}: not a regular file")
    if found.st_uid != os.geteuid():
        raise RecordError(
            f"node record {path}: owned by uid {found.st_uid}, not by uid {os.geteuid()} "
            "(the user restoring it): someone else may have written it"
        )
    mode = stat.S_IMODE(found.st_mode)
    if mode != _RECORD_MODE:
        raise RecordError(f"node record {path}: mode {mode:04o}, want {_RECORD_MODE:04o}")


# -- schema -------------------------------------------------------------------


def _from_json(data: object, source: str) -> NodeRecord:
    """The record ``data`` describes; RecordError naming ``source``, the field and the reason."""
    fields = {**_NETWORK_DEFAULTS, **_object(data, _FIELDS, source, optional=_NETWORK_FIELDS)}
    token = _string(fields["token"], f"{source}: token")
    try:
        cgroup = node_cgroup_name(token)
    except RecordError as err:
        raise RecordError(f"{source}: {err}") from None
    if fields["cgroup_name"] != cgroup:
        raise RecordError(f"{source}: cgroup_name {fields['cgroup_name']!r} is not {cgroup!r}")
    kind = _string(fields["kind"], f"{source}: kind")
    if kind not in KINDS:
        raise RecordError(f"{source}: kind {kind!r} is not one of {', '.join(KINDS)}")
    return NodeRecord(
        owner_pid=_positive(fields["owner_pid"], f"{source}: owner_pid"),
        token=token,
        work_dir=_host_path(fields["work_dir"], f"{source}: work_dir"),
        owns_work_dir=_bool(fields["owns_work_dir"], f"{source}: owns_work_dir"),
        cgroup_name=cgroup,
        sysctls=_sysctls(fields["sysctls"], f"{source}: sysctls"),
        created_paths=[
            _host_path(p, f"{source}: created_paths[{i}]")
            for i, p in enumerate(_list(fields["created_paths"], f"{source}: created_paths"))
        ],
        processes=[
            _process(p, f"{source}: processes[{i}]")
            for i, p in enumerate(_list(fields["processes"], f"{source}: processes"))
        ],
        shim_exe=_optional_absolute(fields["shim_exe"], f"{source}: shim_exe"),
        containerd_address=_string(fields["containerd_address"], f"{source}: containerd_address"),
        hosts_entry=_bool(fields["hosts_entry"], f"{source}: hosts_entry"),
        kind=kind,
        links=_names(fields["links"], {bridge_name(token), veth_name(token)}, f"{source}: links"),
    )


#: Fields a record written before nodes had their own network namespaces lacks.
_NETWORK_DEFAULTS: dict[str, object] = {
    "kind": "node",
    "links": [],
}
_NETWORK_FIELDS = frozenset(_NETWORK_DEFAULTS)
_FIELDS = _NETWORK_FIELDS | frozenset(
    {
        "owner_pid",
        "token",
        "work_dir",
        "owns_work_dir",
        "cgroup_name",
        "sysctls",
        "created_paths",
        "processes",
        "shim_exe",
        "containerd_address",
        "hosts_entry",
    }
)
_HOST_PATH_FIELDS = frozenset({"path", "device", "inode"})


def _object(
    value: object, keys: frozenset[str], where: str, optional: frozenset[str] = frozenset()
) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise RecordError(f"{where}: want an object, got {type(value).__name__}")
    missing, unknown = keys - optional - value.keys(), value.keys() - keys
    if missing or unknown:
        raise RecordError(
            f"{where}: missing fields {sorted(missing)}, unknown fields {sorted(unknown)}"
        )
    return value


def _host_path(value: object, where: str) -> HostPath:
    fields = _object(value, _HOST_PATH_FIELDS, where)
    path = _absolute(fields["path"], f"{where}.path")
    if path == "/":
        raise RecordError(f"{where}.path: the root folder is never a node's")
    device = fields["device"]
    if not isinstance(device, int) or isinstance(device, bool) or device < 0:
        raise RecordError(f"{where}.device: want a device number, got {device!r}")
    return HostPath(path, device, _positive(fields["inode"], f"{where}.inode"))


def _names(value: object, allowed: set[str], where: str) -> list[str]:
    """A list of names, each one of ``allowed`` (those the record's token names)."""
    names = [_string(v, f"{where}[{i}]") for i, v in enumerate(_list(value, where))]
    for name in names:
        if name not in allowed:
            raise RecordError(f"{where}: {name!r} is not one of {sorted(allowed)}")
    return names


def _process(value: object, where: str) -> tuple[int, str]:
    pair = _list(value, where)
    if len(pair) != 2:
        raise RecordError(f"{where}: want [pid, executable], got {pair!r}")
    return _positive(pair[0], f"{where}[0]"), _absolute(pair[1], f"{where}[1]")


def _sysctls(value: object, where: str) -> dict[str, str]:
    if not isinstance(value, dict):
        raise RecordError(f"{where}: want an object, got {type(value).__name__}")
    for name, setting in value.items():
        if not _SYSCTL_NAME.fullmatch(name):
            raise RecordError(f"{where}: {name!r} is not a sysctl name")
        _string(setting, f"{where}.{name}")
    return dict(value)


def _list(value: object, where: str) -> list[object]:
    if not isinstance(value, list):
        raise RecordError(f"{where}: want a list, got {type(value).__name__}")
    return value


def _string(value: object, where: str) -> str:
    if not isinstance(value, str):
        raise RecordError(f"{where}: want a string, got {value!r}")
    return value


def _absolute(value: object, where: str) -> str:
    path = _string(value, where)
    if not path.startswith("/") or os.path.normpath(path) != path:
        raise RecordError(f"{where}: {path!r} is not a normalized absolute path")
    return path


def _optional_absolute(value: object, where: str) -> str:
    return "" if value == "" else _absolute(value, where)


def _positive(value: object, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise RecordError(f"{where}: want a positive integer, got {value!r}")
    return value


def _bool(value: object, where: str) -> bool:
    if not isinstance(value, bool):
        raise RecordError(f"{where}: want true or false, got {value!r}")
    return value
