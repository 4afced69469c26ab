"""The node plugin's checkpoint: which claims are prepared, crash-safe.

One JSON file (``<plugin data dir>/checkpoint.json``)::

    {"apiVersion": "drakit.dev/v1", "kind": "NodePluginCheckpoint",
     "bootID": "<kernel boot id>",
     "claims": {"<uid>": {"namespace", "name", "state": "PrepareStarted"|"PrepareCompleted",
                          "results": [<allocation results of this driver>],
                          "devices": [<answer returned to the kubelet>],
                          "backendState": {...}}}}

Rules:

* Every write replaces the file atomically (temp file, fsync, rename, fsync of
  the directory); a crash leaves the old or the new file.
* Prepare is two-phase per claim: ``PrepareStarted`` is written *before* the
  backend touches anything, ``PrepareCompleted`` after the CDI spec exists. A
  claim found ``PrepareStarted`` was interrupted; the core completes it (next
  prepare) or rolls it back (next unprepare).
* The kernel boot id is recorded; prepared state from an earlier boot is
  stale (devices were reset, ``/var/run/cdi`` is empty) and is dropped.
* Fields this version does not know are kept and written back, so a newer
  and an older plugin (rolling update, downgrade) read each other's files.
* A file that cannot be parsed is moved aside (``checkpoint.json.corrupt-<time>``),
  reported through ``on_corrupt``, and rebuilt with ``rebuild`` (the core
  rebuilds from its CDI specs); the plugin keeps serving.

Not thread-safe: callers hold the plugin's serialize lock, which also orders
two plugin processes during a rolling update; :meth:`refresh` picks up the
other process's writes.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from node_plugin.atomic import atomic_write
from node_plugin.driver import PreparedDevice
from telemetry.logs import get_logger

API_VERSION = "drakit.dev/v1"
KIND = "NodePluginCheckpoint"
FILE_NAME = "checkpoint.json"
BOOT_ID_PATH = Path("/proc/sys/kernel/random/boot_id")

STARTED = "PrepareStarted"
COMPLETED = "PrepareCompleted"

_log = get_logger(__name__)

_ENTRY_KEYS = ("namespace", "name", "state", "results", "devices", "backendState")
_TOP_KEYS = ("apiVersion", "kind", "bootID", "claims")


class CorruptCheckpointError(ValueError):
    """The checkpoint file is not a checkpoint this plugin can read."""


def read_boot_id(path: Path = BOOT_ID_PATH) -> str:
    """The kernel's boot id ("" when unavailable, which never matches a stored one)."""
    try:
        return path.read_text().strip()
    except OSError:
        return ""


@dataclass(frozen=True)
class ClaimEntry:
    """One claim's record. ``results`` are raw allocation-result dicts of this driver."""

    uid: str
    namespace: str
    name: str
    state: str
    results: tuple[Mapping[str, Any], ...] = ()
    devices: tuple[PreparedDevice, ...] = ()
    backend_state: Mapping[str, Any] = field(default_factory=dict)
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def completed(self) -> bool:
        return self.state == COMPLETED

    def to_json(self) -> dict[str, Any]:
        return {
            **self.extra,
            "namespace": self.namespace,
            "name": self.name,
            "state": self.state,
            "results": [dict(r) for r in self.results],
            "devices": [device_to_json(d) for d in self.devices],
            "backendState": dict(self.backend_state),
        }

    @classmethod
    def from_json(cls, uid: str, data: Any) -> ClaimEntry:
        if not isinstance(data, dict):
            raise CorruptCheckpointError(f"claims[{uid}] is not an object")
        state = data.get("state")
        if state not in (STARTED, COMPLETED):
            raise CorruptCheckpointError(
                f"claims[{uid}].state {state!r} is not {STARTED}/{COMPLETED}"
            )
        results = data.get("results", [])
        devices = data.get("devices", [])
        backend_state = data.get("backendState", {})
        if not isinstance(results, list) or not all(isinstance(r, dict) for r in results):
            raise CorruptCheckpointError(f"claims[{uid}].results is not a list of objects")
        if not isinstance(devices, list) or not isinstance(backend_state, dict):
            raise CorruptCheckpointError(
                f"claims[{uid}].devices or backendState has the wrong type"
            )
        return cls(
            uid=uid,
            namespace=str(data.get("namespace", "")),
            name=str(data.get("name", "")),
            state=state,
            results=tuple(results),
            devices=tuple(device_from_json(uid, d) for d in devices),
            backend_state=backend_state,
            extra={k: v for k, v in data.items() if k not in _ENTRY_KEYS},
        )


def device_to_json(device: PreparedDevice) -> dict[str, Any]:
    out: dict[str, Any] = {
        "requestNames": list(device.request_names),
        "poolName": device.pool_name,
        "deviceName": device.device_name,
        "cdiDeviceIDs": list(device.cdi_device_ids),
    }
    if device.share_id is not None:
        out["shareID"] = device.share_id
    return out


def device_from_json(uid: str, data: Any) -> PreparedDevice:
    try:
        share_id = data.get("shareID")
        return PreparedDevice(
            request_names=tuple(str(r) for r in data.get("requestNames", [])),
            pool_name=str(data["poolName"]),
            device_name=str(data["deviceName"]),
            cdi_device_ids=tuple(str(i) for i in data.get("cdiDeviceIDs", [])),
            share_id=None if share_id is None else str(share_id),
        )
    except (AttributeError, KeyError, TypeError) as exc:
        raise CorruptCheckpointError(
            f"claims[{uid}].devices has a malformed device: {exc}"
        ) from exc


OnCorrupt = Callable[[str, Path], None]
Rebuild = Callable[[], Iterable[ClaimEntry]]


class Checkpoint:
    """The in-memory view of the checkpoint file plus atomic persistence."""

    def __init__(
        self,
        path: Path,
        *,
        boot_id: Callable[[], str] = read_boot_id,
        on_corrupt: OnCorrupt | None = None,
        rebuild: Rebuild | None = None,
    ) -> None:
        self.path = path
        self._boot_id = boot_id
        self._on_corrupt = on_corrupt
        self._rebuild = rebuild
        self._claims: dict[str, ClaimEntry] = {}
        self._extra: dict[str, Any] = {}
        self._stamp: tuple[int, int, int] | None = None
        self._loaded = False
        self.dropped_after_reboot: list[ClaimEntry] = []

    # -- reading -------------------------------------------------------------------------

    def refresh(self) -> None:
        """Load the file if it changed since we last read or wrote it (or never loaded)."""
        if self._loaded and self._stamp == _stamp(self.path):
            return
        self._load()

    def _load(self) -> None:
        self._loaded = True
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            self._claims, self._extra = {}, {}
            self._stamp = None
            return
        try:
            claims, extra, stored_boot = _parse(text)
        except CorruptCheckpointError as exc:
            self._recover_from_corruption(str(exc))
            return
        boot = self._boot_id()
        self._claims, self._extra = claims, extra
        self._stamp = _stamp(self.path)
        if stored_boot != boot and claims:
            _log.warning(
                "Checkpoint is from an earlier boot; dropping its prepared claims",
                stored_boot_id=stored_boot,
                boot_id=boot,
                claims=sorted(claims),
            )
            self.dropped_after_reboot.extend(claims.values())
            self._claims = {}
            self.save()

    def _recover_from_corruption(self, reason: str) -> None:
        aside = self.path.with_name(f"{self.path.name}.corrupt-{time.strftime('%Y%m%dT%H%M%S')}")
        self.path.replace(aside)
        _log.error(
            "Checkpoint is corrupt; moved aside and rebuilding", reason=reason, moved_to=str(aside)
        )
        rebuilt = list(self._rebuild()) if self._rebuild else []
        self._claims = {e.uid: e for e in rebuilt}
        self._extra = {}
        self.save()
        _log.warning("Checkpoint rebuilt", claims=sorted(self._claims))
        if self._on_corrupt is not None:
            self._on_corrupt(reason, aside)

    def get(self, uid: str) -> ClaimEntry | None:
        return self._claims.get(uid)

    def entries(self) -> list[ClaimEntry]:
        return list(self._claims.values())

    # -- writing -------------------------------------------------------------------------

    def put(self, *entries: ClaimEntry) -> None:
        """Record entries (in memory; call :meth:`save` to persist)."""
        for entry in entries:
            old = self._claims.get(entry.uid)
            if old is not None and old.extra and not entry.extra:
                self._claims[entry.uid] = replace(entry, extra=old.extra)
            else:
                self._claims[entry.uid] = entry

    def remove(self, *uids: str) -> None:
        for uid in uids:
            self._claims.pop(uid, None)

    def save(self) -> None:
        """Persist the current state atomically."""
        document = {
            **self._extra,
            "apiVersion": API_VERSION,
            "kind": KIND,
            "bootID": self._boot_id(),
            "claims": {uid: e.to_json() for uid, e in sorted(self._claims.items())},
        }
        atomic_write(self.path, json.dumps(document, indent=1, sort_keys=False) + "\n", 0o600)
        self._stamp = _stamp(self.path)


def _parse(text: str) -> tuple[dict[str, ClaimEntry], dict[str, Any], str]:
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise CorruptCheckpointError(f"not JSON: {exc}") from exc
    if not isinstance(document, dict):
        raise CorruptCheckpointError("top level is not an object")
    api_version = document.get("apiVersion")
    if document.get("kind") != KIND or not str(api_version).startswith("drakit.dev/"):
        raise CorruptCheckpointError(
            f"apiVersion/kind {api_version!r}/{document.get('kind')!r} is not {API_VERSION}/{KIND}"
        )
    claims = document.get("claims", {})
    if not isinstance(claims, dict):
        raise CorruptCheckpointError("claims is not an object")
    entries = {uid: ClaimEntry.from_json(uid, data) for uid, data in claims.items()}
    extra = {k: v for k, v in document.items() if k not in _TOP_KEYS}
    return entries, extra, str(document.get("bootID", ""))


def _stamp(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)
