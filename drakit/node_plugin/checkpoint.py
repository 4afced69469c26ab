"""The node plugin's checkpoint: which claims are prepared, crash-safe.

One JSON file (``<plugin data dir>/checkpoint.json``)::

    {"apiVersion": "drakit.dev/v1", "kind": "NodePluginCheckpoint",
     "bootID": "<kernel boot id>",
     "claims": {"<uid>": {"namespace", "name", "state": "PrepareStarted"|"PrepareCompleted",
                          "results": [<allocation results of this driver>],
                          "devices": [<answer returned to the kubelet>],
                          "backendState": {...}}}}

Rules:

* Durable state is a snapshot plus a journal. The snapshot
  (``checkpoint.json``, the document above plus ``journalEpoch``) is replaced
  atomically (temp file, fsync, rename, fsync of the directory). Every
  :meth:`Checkpoint.save` between snapshots appends *one* record to
  ``checkpoint.json.journal`` and ``fdatasync``s it: one flush per save
  instead of two (file and directory) plus a whole-file rewrite. When the
  journal grows past :data:`COMPACT_BYTES` the next save writes a fresh
  snapshot and starts a new journal (compaction).
* A journal record is one line, ``<JSON>\t<crc32 of the JSON, 8 hex>\n``;
  its JSON is ``{"put": {uid: entry}, "remove": [uid]}``. The journal's first
  line is a header ``{"epoch": E, "version": 1}``; records count only when ``E``
  equals the snapshot's ``journalEpoch``, so a crash between writing a new
  snapshot and resetting the journal never replays records the snapshot already
  holds.
* A record cut short by a crash (no newline, or a checksum mismatch) at the end
  of the journal was never acknowledged: :meth:`save` had not returned, so the
  caller had not moved on. It is dropped and the journal truncated to its last
  whole record. A damaged record *followed by* whole ones is corruption.
* Prepare is two-phase per claim: ``PrepareStarted`` is written *before* the
  backend touches anything, ``PrepareCompleted`` after the CDI spec exists. A
  claim found ``PrepareStarted`` was interrupted; the core completes it (next
  prepare) or rolls it back (next unprepare).
* The ``PrepareStarted`` record is appended without its own flush
  (``save(flush=False)``); the ``PrepareCompleted`` record's fdatasync flushes
  both before the kubelet is answered. No crash that leaves state worth
  recovering can lose it: after a crash of the process (or container) the
  record is in the kernel's page cache, which the next reader shares; a crash
  of the machine is a reboot, and every prepared state of an earlier boot is
  dropped unread anyway (next rule). Its own flush cost a prepare about a third
  of a millisecond for no recoverable state.
* The kernel boot id is recorded; prepared state from an earlier boot is
  stale (devices were reset, ``/var/run/cdi`` is empty) and is dropped, and
  the snapshot is rewritten with the current boot id at once (also when it
  held no claims). The core then removes every CDI spec of the driver, also
  those no surviving record names (a CDI root on a disk keeps them).
* Formats are versioned: the snapshot by its ``apiVersion`` (``drakit.dev/v1``
  since drakit 0.1.0), the journal by its header's ``version`` (1; a header
  without one, as drakit 0.1.0 writes it, is version 1). A change an older
  reader would misread bumps the version; a file of a version newer than this
  release reads raises :class:`UnsupportedCheckpointError` on every load and is
  left as it is (never moved aside, rebuilt or rewritten), so the plugin refuses
  each prepare and unprepare with that message instead of acting on state it
  cannot read. docs/upgrade.md has the table of versions and releases.
* Fields this version does not know are kept and written back, so a newer
  and an older plugin (rolling update, downgrade) read each other's files:
  unknown top-level fields of the snapshot and unknown fields of a claim's
  entry. A device entry (``devices[]``) and a journal record have a fixed set
  of fields: a new field goes into the claim's entry, or the format's version
  changes.
  A snapshot without ``journalEpoch`` (written by a version before the journal)
  is read as the whole state. The reverse is not covered: a version before the
  journal reads only the snapshot and misses records appended since the last
  compaction, so a downgrade across this change must start from a compacted
  checkpoint.
* A snapshot or journal that cannot be parsed is moved aside
  (``checkpoint.json.corrupt-<time>``, the journal next to it),
  reported through ``on_corrupt``, and rebuilt with ``rebuild`` (the core
  rebuilds from its CDI specs); the plugin keeps serving.

Not thread-safe: callers hold the plugin's serialize lock, which also orders
two plugin processes during a rolling update; :meth:`refresh` picks up the
other process's writes.
"""

from __future__ import annotations

import json
import os
import time
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from drakit.node_plugin.atomic import atomic_write, fsync_dir
from drakit.node_plugin.driver import PreparedDevice
from drakit.telemetry.logs import get_logger

API_VERSION = "drakit.dev/v1"
KIND = "NodePluginCheckpoint"
#: The journal format this release writes and the newest it reads (a header without a
#: version, as drakit 0.1.0 writes it, is version 1).
JOURNAL_VERSION = 1
FILE_NAME = "checkpoint.json"
JOURNAL_SUFFIX = ".journal"
COMPACT_BYTES = 256 * 1024  # journal size that makes the next save write a snapshot
BOOT_ID_PATH = Path("/proc/sys/kernel/random/boot_id")

STARTED = "PrepareStarted"
COMPLETED = "PrepareCompleted"

_log = get_logger(__name__)

_ENTRY_KEYS = ("namespace", "name", "state", "results", "devices", "backendState")
_TOP_KEYS = ("apiVersion", "kind", "bootID", "claims", "journalEpoch")


class CorruptCheckpointError(ValueError):
    """The checkpoint file is not a checkpoint this plugin can read."""


class UnsupportedCheckpointError(ValueError):
    """The checkpoint is of a format version newer than this release reads (written by a
    newer drakit): it is left as it is, and the message says what to do."""


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
    """The in-memory view of the checkpoint plus its durable snapshot and journal."""

    def __init__(
        self,
        path: Path,
        *,
        boot_id: Callable[[], str] = read_boot_id,
        on_corrupt: OnCorrupt | None = None,
        rebuild: Rebuild | None = None,
        compact_bytes: int = COMPACT_BYTES,
    ) -> None:
        self.path = path
        self.journal_path = journal_path_of(path)
        self._boot_id = boot_id
        self._on_corrupt = on_corrupt
        self._rebuild = rebuild
        self._compact_bytes = compact_bytes
        self._claims: dict[str, ClaimEntry] = {}
        self._extra: dict[str, Any] = {}
        self._stamp: tuple[object, object] | None = None
        self._loaded = False
        self._epoch = ""  # "" until a snapshot with a journal epoch was read or written
        self._journal_bytes = 0
        self._dirty: set[str] = set()  # uids put or removed since the last save
        self.dropped_after_reboot: list[ClaimEntry] = []
        # True once a snapshot of an earlier boot was found: every prepared state of ours
        # outside this checkpoint (CDI specs) is stale too. The core resets it.
        self.rebooted = False
        self._unflushed = False  # a record was appended by save(flush=False), not yet flushed

    # -- reading -------------------------------------------------------------------------

    def refresh(self) -> None:
        """Load the files if they changed since we last read or wrote them (or never loaded).

        UnsupportedCheckpointError when they are of a newer format: nothing is changed on
        disk, and every later refresh raises it again until a release that reads the
        format has rewritten them."""
        if self._loaded and self._stamp == self._current_stamp():
            return
        self._load()

    def _current_stamp(self) -> tuple[object, object]:
        return (_stamp(self.path), _stamp(self.journal_path))

    def _load(self) -> None:
        self._loaded = True
        self._dirty.clear()
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            self._claims, self._extra, self._epoch = {}, {}, ""
            self._journal_bytes = 0
            self._stamp = self._current_stamp()
            return
        try:
            claims, extra, stored_boot, epoch = _parse(text)
            journal_bytes = _replay_journal(self.journal_path, epoch, claims)
        except CorruptCheckpointError as exc:
            self._recover_from_corruption(str(exc))
            return
        except UnsupportedCheckpointError as exc:
            raise UnsupportedCheckpointError(f"checkpoint {self.path}: {exc}") from None
        boot = self._boot_id()
        # no usable journal of this snapshot: the next save writes a snapshot and a new one
        self._epoch = epoch if journal_bytes is not None else ""
        self._journal_bytes = journal_bytes or 0
        self._claims, self._extra = claims, extra
        self._stamp = self._current_stamp()
        if stored_boot != boot:
            if claims:
                _log.warning(
                    "Checkpoint is from an earlier boot; dropping its prepared claims",
                    stored_boot_id=stored_boot,
                    boot_id=boot,
                    claims=sorted(claims),
                )
            self.rebooted = True
            self.dropped_after_reboot.extend(claims.values())
            self._claims = {}
            # Even without claims: a snapshot left with the earlier boot's id would make
            # the claims this boot journals on top of it look like the earlier boot's on
            # the next load, and they would be dropped.
            self._compact()

    def _recover_from_corruption(self, reason: str) -> None:
        aside = self.path.with_name(f"{self.path.name}.corrupt-{time.strftime('%Y%m%dT%H%M%S')}")
        self.path.replace(aside)
        if self.journal_path.exists():
            self.journal_path.replace(aside.with_name(aside.name + JOURNAL_SUFFIX))
        _log.error(
            "Checkpoint is corrupt; moved aside and rebuilding", reason=reason, moved_to=str(aside)
        )
        rebuilt = list(self._rebuild()) if self._rebuild else []
        self._claims = {e.uid: e for e in rebuilt}
        self._extra = {}
        self._compact()
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
            self._dirty.add(entry.uid)

    def remove(self, *uids: str) -> None:
        for uid in uids:
            self._claims.pop(uid, None)
            self._dirty.add(uid)

    def save(self, *, flush: bool = True) -> None:
        """Persist the current state: one journal record, or a new snapshot.

        ``flush=True`` (the default): when this returns, a crash of the process or of
        the machine at any later point recovers exactly this state. It also flushes
        records appended earlier with ``flush=False``, even when nothing changed since.

        ``flush=False``: the record is handed to the kernel but not flushed to the disk.
        A crash of the process (SIGKILL, OOM kill) at any later point still recovers
        exactly this state: what ``write`` handed to the kernel is in the page cache,
        which every later reader shares. Only a crash of the machine can lose it, and a
        crash of the machine is a reboot, after which every prepared state of the
        earlier boot is dropped unread (see the module docstring). A snapshot written
        instead (compaction) is always flushed.
        """
        if not self._epoch or self._journal_bytes >= self._compact_bytes:
            self._compact()
            return
        if not self._dirty:
            if flush and self._unflushed:
                try:
                    _flush_journal(self.journal_path)
                except FileNotFoundError:
                    self._compact()  # the journal vanished: a snapshot holds everything
                self._unflushed = False
            return
        record = {
            "put": {
                uid: self._claims[uid].to_json()
                for uid in sorted(self._dirty)
                if uid in self._claims
            },
            "remove": sorted(uid for uid in self._dirty if uid not in self._claims),
        }
        try:
            self._journal_bytes += _append_record(self.journal_path, record, flush=flush)
        except FileNotFoundError:
            self._compact()  # the journal vanished: a snapshot holds everything
            return
        except BaseException:
            # A failed append may have left part of a record; a snapshot written by the
            # next save supersedes it (new epoch), so nothing reads past the damage.
            self._epoch = ""
            raise
        # A flushing append also flushed every record before it (one file, one fdatasync).
        self._unflushed = not flush
        self._dirty.clear()
        # Only the journal changed: the snapshot's stamp from the last refresh still holds
        # (the caller has held the serialize lock since then).
        snapshot = self._stamp[0] if self._stamp is not None else _stamp(self.path)
        self._stamp = (snapshot, _stamp(self.journal_path))

    def _compact(self) -> None:
        """Write the whole state as a snapshot with a new epoch, then start its journal.

        Until both are written there is no journal to append to: a failure in between
        leaves ``_epoch`` empty, so the next save compacts again instead of appending to
        a journal whose header no longer matches the snapshot (records nobody replays).
        """
        self._epoch = ""
        epoch = os.urandom(8).hex()
        document = {
            **self._extra,
            "apiVersion": API_VERSION,
            "kind": KIND,
            "bootID": self._boot_id(),
            "journalEpoch": epoch,
            "claims": {uid: e.to_json() for uid, e in sorted(self._claims.items())},
        }
        atomic_write(self.path, json.dumps(document, indent=1, sort_keys=False) + "\n", 0o600)
        self._journal_bytes = _start_journal(self.journal_path, epoch)
        self._epoch = epoch
        self._unflushed = False  # the snapshot holds everything, flushed
        self._dirty.clear()
        self._stamp = self._current_stamp()


def journal_path_of(path: Path) -> Path:
    return path.with_name(path.name + JOURNAL_SUFFIX)


def read_document(path: Path) -> dict[str, Any]:
    """The checkpoint as one document (snapshot with its journal applied), for tools and tests.

    Does not repair anything; raises :class:`CorruptCheckpointError` on a damaged file.
    """
    document: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    claims, _, _, epoch = _parse(json.dumps(document))
    _replay_journal(journal_path_of(path), epoch, claims, repair=False)
    document["claims"] = {uid: e.to_json() for uid, e in sorted(claims.items())}
    return document


def _encode_record(record: Mapping[str, Any]) -> bytes:
    body = json.dumps(record, separators=(",", ":")).encode("utf-8")
    return body + b"\t" + f"{zlib.crc32(body):08x}".encode("ascii") + b"\n"


def _decode_record(line: bytes) -> dict[str, Any] | None:
    """A whole record's JSON object, or None when the line is damaged."""
    body, tab, crc = line.rpartition(b"\t")
    if not tab or crc != f"{zlib.crc32(body):08x}".encode("ascii"):
        return None
    try:
        record = json.loads(body)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def _append_record(journal: Path, record: Mapping[str, Any], *, flush: bool) -> int:
    """Append one record, fdatasync it when ``flush``; returns its size. The journal must
    exist."""
    data = _encode_record(record)
    fd = os.open(journal, os.O_WRONLY | os.O_APPEND)
    try:
        written = os.write(fd, data)
        if written != len(data):
            raise OSError(f"short write to {journal}: {written} of {len(data)} bytes")
        if flush:
            os.fdatasync(fd)
    finally:
        os.close(fd)
    return len(data)


def _flush_journal(journal: Path) -> None:
    """fdatasync the journal: the records appended without a flush reach the disk."""
    fd = os.open(journal, os.O_WRONLY)
    try:
        os.fdatasync(fd)
    finally:
        os.close(fd)


def _start_journal(journal: Path, epoch: str) -> int:
    """Replace the journal's content by a header for ``epoch``, durably; returns its size."""
    created = not journal.exists()
    data = _encode_record({"epoch": epoch, "version": JOURNAL_VERSION})
    fd = os.open(journal, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    if created:
        fsync_dir(journal.parent)
    return len(data)


def _replay_journal(
    journal: Path, epoch: str, claims: dict[str, ClaimEntry], *, repair: bool = True
) -> int | None:
    """Apply the journal's records of ``epoch`` to ``claims``; returns the journal's good size.

    None when there is no journal of ``epoch`` to append to (missing, or of another epoch).

    A torn last record is dropped (and, with ``repair``, cut off the file); a damaged
    record before whole ones raises :class:`CorruptCheckpointError`. A journal of
    another epoch (or none) holds nothing the snapshot lacks.
    """
    try:
        data = journal.read_bytes()
    except FileNotFoundError:
        return None
    lines = data.split(b"\n")
    tail = lines.pop()  # b"" after a final newline; else an unterminated (torn) record
    records = [_decode_record(line) for line in lines]
    if not records or records[0] is None or records[0].get("epoch") != epoch or not epoch:
        return None  # stale journal: superseded by the snapshot
    _check_journal_version(records[0].get("version", 1))
    good = len(lines[0]) + 1
    for index, (line, record) in enumerate(zip(lines[1:], records[1:], strict=True), start=1):
        if record is None:
            if index != len(lines) - 1 or tail:
                raise CorruptCheckpointError(f"journal record {index} is damaged")
            break  # the last line: torn by a crash before its fdatasync returned
        _apply_record(index, record, claims)
        good += len(line) + 1
    if good != len(data):
        _log.warning(
            "Checkpoint journal ends in a torn record; dropping it",
            journal=str(journal),
            kept_bytes=good,
            dropped_bytes=len(data) - good,
        )
        if repair:
            os.truncate(journal, good)
    return good


def _check_journal_version(version: Any) -> None:
    """Raise unless the journal's header ``version`` is one this release reads."""
    if type(version) is not int:  # bool is an int to isinstance; JSON true is no version
        raise CorruptCheckpointError(f"journal header version {version!r} is not a number")
    if version == JOURNAL_VERSION:
        return
    if version > JOURNAL_VERSION:
        raise UnsupportedCheckpointError(
            f"the journal is format version {version}, written by a newer "
            f"drakit; this release reads version {JOURNAL_VERSION} (docs/upgrade.md: roll "
            "forward to the release that wrote it, or roll back only to releases that read it)"
        )
    raise CorruptCheckpointError(f"journal header version {version} is not a version")


def _apply_record(index: int, record: Mapping[str, Any], claims: dict[str, ClaimEntry]) -> None:
    puts, removes = record.get("put", {}), record.get("remove", [])
    if not isinstance(puts, dict) or not isinstance(removes, list):
        raise CorruptCheckpointError(f"journal record {index} has the wrong shape")
    for uid, data in puts.items():
        claims[uid] = ClaimEntry.from_json(uid, data)
    for uid in removes:
        claims.pop(str(uid), None)


def _parse(text: str) -> tuple[dict[str, ClaimEntry], dict[str, Any], str, str]:
    """Claims, unknown top-level fields, boot id and journal epoch of a snapshot."""
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
    if api_version != API_VERSION:
        _refuse_api_version(str(api_version))
    claims = document.get("claims", {})
    if not isinstance(claims, dict):
        raise CorruptCheckpointError("claims is not an object")
    entries = {uid: ClaimEntry.from_json(uid, data) for uid, data in claims.items()}
    extra = {k: v for k, v in document.items() if k not in _TOP_KEYS}
    epoch = document.get("journalEpoch") or ""
    return entries, extra, str(document.get("bootID", "")), str(epoch)


def _refuse_api_version(api_version: str) -> None:
    """UnsupportedCheckpointError for a newer ``drakit.dev/vN``; corrupt for anything else."""
    _, _, version = api_version.partition("/")
    number = version.removeprefix("v")
    current = int(API_VERSION.rpartition("/v")[2])
    newer = number.isascii() and number.isdigit() and len(number) < 7 and int(number) > current
    if version.startswith("v") and newer:
        raise UnsupportedCheckpointError(
            f"the snapshot is {api_version}, written by a newer drakit; this release reads "
            f"{API_VERSION} (docs/upgrade.md: roll forward to the release that wrote it, or "
            "roll back only to releases that read it)"
        )
    raise CorruptCheckpointError(f"apiVersion {api_version!r} is not {API_VERSION}")


def _stamp(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)
