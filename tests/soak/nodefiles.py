"""The checker's own reading of a node plugin's files: its checkpoint and its CDI specs.

Written from the formats (documented in drakit/node_plugin/checkpoint.py and
drakit/node_plugin/cdi.py), not with their code, so that a bug in the plugin's reader cannot
hide itself:

* checkpoint: ``checkpoint.json`` is a snapshot ``{"apiVersion": "drakit.dev/...",
  "kind": "NodePluginCheckpoint", "journalEpoch": E, "claims": {uid: {"namespace",
  "name", "state", "devices": [{"cdiDeviceIDs": [...]}, ...]}}}``; the journal next to it
  (``checkpoint.json.journal``) holds lines ``<JSON>\\t<crc32 8 hex>``, a header
  ``{"epoch": E}`` first, then records ``{"put": {uid: entry}, "remove": [uid]}`` that
  count only when the header's epoch is the snapshot's. A torn last line was never
  acknowledged and is ignored.
* CDI: one spec per prepared claim, ``<cdi dir>/k8s.<driver>-claim_<uid>.json`` with
  ``kind`` ``k8s.<driver>/claim`` and device names that the checkpoint's CDI IDs
  (``<kind>=<name>``) refer to.

The plugin replaces the snapshot by rename and rewrites the journal when it compacts, so
a reader can see a snapshot and a journal from two different moments: the reading is
retried until the snapshot did not change while the journal was read.
"""

from __future__ import annotations

import json
import re
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PREPARE_COMPLETED = "PrepareCompleted"
PREPARE_STARTED = "PrepareStarted"
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
#: A checkpoint bigger than this is not one the soak's plugins wrote.
MAX_FILE_BYTES = 64 * 1024 * 1024
_READ_ATTEMPTS = 5


class UnreadableFileError(ValueError):
    """A checkpoint or spec the checker cannot read (the message names file and reason)."""


@dataclass(frozen=True)
class CheckpointEntry:
    uid: str
    namespace: str
    name: str
    state: str
    cdi_ids: tuple[str, ...]

    @property
    def completed(self) -> bool:
        return self.state == PREPARE_COMPLETED


def read_checkpoint(path: Path) -> dict[str, CheckpointEntry]:
    """The claims recorded in the checkpoint at ``path`` (empty when there is none yet).

    Raises :class:`UnreadableFileError` when the snapshot or a journal record before the last
    one is damaged, or when the files kept changing under the reader.
    """
    for _ in range(_READ_ATTEMPTS):
        before = _stamp(path)
        if before is None:
            return {}
        snapshot = _read_json(path)
        journal = _read_bytes(path.with_name(path.name + ".journal"))
        if _stamp(path) == before:
            return _apply_journal(path, snapshot, journal)
    raise UnreadableFileError(f"{path}: changed during {_READ_ATTEMPTS} readings in a row")


def _stamp(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def _read_bytes(path: Path) -> bytes:
    try:
        with path.open("rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        return b""
    if len(data) > MAX_FILE_BYTES:
        raise UnreadableFileError(f"{path}: larger than {MAX_FILE_BYTES} bytes")
    return data


def _read_json(path: Path) -> dict[str, Any]:
    data = _read_bytes(path)
    try:
        document = json.loads(data)
    except ValueError as err:
        raise UnreadableFileError(f"{path}: not JSON: {err}") from None
    if not isinstance(document, dict):
        raise UnreadableFileError(f"{path}: the top level is not an object")
    if document.get("kind") != "NodePluginCheckpoint" or not str(
        document.get("apiVersion", "")
    ).startswith("drakit.dev/"):
        raise UnreadableFileError(f"{path}: not a drakit.dev NodePluginCheckpoint")
    return document


def _apply_journal(
    path: Path, snapshot: dict[str, Any], journal: bytes
) -> dict[str, CheckpointEntry]:
    claims = snapshot.get("claims", {})
    if not isinstance(claims, dict):
        raise UnreadableFileError(f"{path}: field claims is not an object")
    entries = {str(uid): _entry(path, str(uid), data) for uid, data in claims.items()}
    epoch = snapshot.get("journalEpoch")
    lines = journal.split(b"\n")
    lines.pop()  # after the last newline: b"", or a torn record that was never acknowledged
    records = [_record(line) for line in lines]
    if not epoch or not records or records[0] is None or records[0].get("epoch") != epoch:
        return entries  # no journal of this snapshot: the snapshot is the whole state
    for index, record in enumerate(records[1:], start=1):
        if record is None:
            if index == len(records) - 1:
                break  # a damaged last whole line: torn by a crash before fdatasync returned
            raise UnreadableFileError(f"{path}.journal: record {index} is damaged")
        for uid, data in _dict(record.get("put")).items():
            entries[str(uid)] = _entry(path, str(uid), data)
        for uid in record.get("remove") or ():
            entries.pop(str(uid), None)
    return entries


def _record(line: bytes) -> dict[str, Any] | None:
    body, tab, crc = line.rpartition(b"\t")
    if not tab or crc != f"{zlib.crc32(body):08x}".encode():
        return None
    try:
        record = json.loads(body)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def _entry(path: Path, uid: str, data: Any) -> CheckpointEntry:
    if not isinstance(data, dict):
        raise UnreadableFileError(f"{path}: claims[{uid}] is not an object")
    ids: list[str] = []
    for device in data.get("devices") or ():
        ids.extend(str(i) for i in _dict(device).get("cdiDeviceIDs") or ())
    return CheckpointEntry(
        uid=uid,
        namespace=str(data.get("namespace", "")),
        name=str(data.get("name", "")),
        state=str(data.get("state", "")),
        cdi_ids=tuple(ids),
    )


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


# -- CDI ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class CdiSpec:
    uid: str
    path: Path
    kind: str
    device_names: frozenset[str]
    problem: str  # "" when the spec is readable

    def defines(self, cdi_id: str) -> bool:
        kind, sep, name = cdi_id.partition("=")
        return bool(sep) and kind == self.kind and name in self.device_names


def read_cdi_specs(cdi_dir: Path, driver: str) -> dict[str, CdiSpec]:
    """The claim specs of ``driver`` in ``cdi_dir`` by claim UID (temp files ignored).

    An unreadable spec is returned with ``problem`` set: a runtime would refuse it, so the
    checker reports it instead of skipping it.
    """
    prefix = f"k8s.{driver}-claim_"
    specs: dict[str, CdiSpec] = {}
    try:
        names = [p.name for p in cdi_dir.iterdir()]
    except (FileNotFoundError, NotADirectoryError):
        return specs
    for name in names:
        uid = name[len(prefix) : -len(".json")]
        if not (name.startswith(prefix) and name.endswith(".json") and _UUID.fullmatch(uid)):
            continue  # not a claim spec of this driver (temp files start with a dot)
        specs[uid] = _read_spec(cdi_dir / name, uid)
    return specs


def _read_spec(path: Path, uid: str) -> CdiSpec:
    try:
        document = json.loads(_read_bytes(path))
    except (ValueError, UnreadableFileError, OSError) as err:
        return CdiSpec(uid, path, "", frozenset(), f"unreadable: {err}")
    if not isinstance(document, dict):
        return CdiSpec(uid, path, "", frozenset(), "the top level is not an object")
    names = frozenset(
        str(d.get("name")) for d in document.get("devices") or () if isinstance(d, dict)
    )
    return CdiSpec(uid, path, str(document.get("kind", "")), names, "")
