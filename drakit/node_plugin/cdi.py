"""Transient CDI specs: one file per prepared claim in ``--cdi-root``.

Naming follows the conventions container runtimes and the Go helpers use:

* kind ``k8s.<driver>/claim`` (vendor from the driver name, one fixed class);
* file ``k8s.<driver>-claim_<claimUID>.json``;
* device names ``<claimUID>-<device>`` (plus ``-<shareID>`` for a share of a
  multi-allocatable device), so a runtime's CDI cache never serves a stale
  entry for a re-created claim with the same device;
* CDI IDs ``<kind>=<device name>``, passed to the kubelet unchanged.

A backend's claim-wide edits (``BackendPrepared.claim_edits``) are the spec's own
``containerEdits``: the CDI library runtimes use (containerd, CRI-O) applies a spec's
``containerEdits`` once for a container that gets any device of the spec, before the
devices' own edits. With one spec per claim, that is once per claim and container, whether
the container uses all of the claim's devices or one request of it. (A CDI device of its
own could not do that: the kubelet collects the IDs per device, so an ID on each request's
first device reaches a container using the whole claim once per request.)

Files are written atomically (temp file in the same directory, fsync, rename,
fsync of the directory): a runtime reading the directory sees either no spec
or the complete one. ``cdiVersion`` is the lowest version that can express
the spec, so older runtimes still parse it.

The spec's annotations carry the prepared claim (devices, backend state) so a
lost or corrupt checkpoint can be rebuilt from the specs on disk.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from drakit.node_plugin.atomic import atomic_write, fsync_dir
from drakit.node_plugin.claimcheck import is_claim_uid, shown
from drakit.plugin.edits import ContainerEdits

CDI_CLASS = "claim"
SPEC_SUFFIX = ".json"
# The spec annotation that holds the prepared claim (JSON), used to rebuild
# the checkpoint; a "drakit.dev/" prefix keeps it apart from runtime keys.
PREPARED_ANNOTATION = "drakit.dev/prepared-claim"

_VERSIONS = ("0.3.0", "0.4.0", "0.5.0", "0.6.0")
_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9_.:-]")


@dataclass(frozen=True)
class CDIDevice:
    """One device entry of a claim's spec."""

    name: str
    edits: ContainerEdits


def minimum_version(spec: Mapping[str, Any]) -> str:
    """The lowest CDI spec version able to express ``spec`` (rules of the CDI library)."""
    devices = spec.get("devices", [])
    all_edits = [d.get("containerEdits", {}) for d in devices] + [spec.get("containerEdits", {})]
    class_part = str(spec.get("kind", "")).partition("/")[2]
    if spec.get("annotations") or any(d.get("annotations") for d in devices) or "." in class_part:
        return "0.6.0"
    if any(d.get("name", "")[:1].isdigit() for d in devices) or any(
        n.get("hostPath") for e in all_edits for n in e.get("deviceNodes", [])
    ):
        return "0.5.0"
    if any(m.get("type") for e in all_edits for m in e.get("mounts", [])):
        return "0.4.0"
    return _VERSIONS[0]


def edits_to_json(edits: ContainerEdits) -> dict[str, Any]:
    """CDI ``containerEdits`` JSON for ``edits`` (empty lists left out)."""
    out: dict[str, Any] = {}
    if edits.env:
        out["env"] = list(edits.env)
    if edits.device_nodes:
        out["deviceNodes"] = [
            {
                k: v
                for k, v in (
                    ("path", n.path),
                    ("hostPath", n.host_path),
                    ("type", n.type),
                    ("major", n.major),
                    ("minor", n.minor),
                    ("permissions", n.permissions),
                )
                if v is not None
            }
            for n in edits.device_nodes
        ]
    if edits.mounts:
        out["mounts"] = [
            {
                "hostPath": m.host_path,
                "containerPath": m.container_path,
                **({"options": list(m.options)} if m.options else {}),
                **({"type": m.type} if m.type else {}),
            }
            for m in edits.mounts
        ]
    return out


class CDISpecs:
    """Writes and removes the transient specs of one driver in one directory; thread-safe."""

    def __init__(self, cdi_root: Path, driver_name: str) -> None:
        self.cdi_root = cdi_root
        self.vendor = f"k8s.{driver_name}"
        self.kind = f"{self.vendor}/{CDI_CLASS}"

    def device_name(self, claim_uid: str, device: str, share_id: str | None = None) -> str:
        """The CDI device name of ``device`` in claim ``claim_uid``."""
        name = f"{claim_uid}-{device}" + (f"-{share_id}" if share_id else "")
        return _NAME_UNSAFE.sub("-", name)

    def device_id(self, device_name: str) -> str:
        """The fully-qualified CDI device ID the kubelet passes to the runtime."""
        return f"{self.kind}={device_name}"

    def spec_path(self, claim_uid: str) -> Path:
        """The spec file of ``claim_uid``; ValueError unless the UID is UUID-shaped.

        The UID comes from whoever reached the DRA socket: only a UUID is sure to
        make one short file name inside ``cdi_root``.
        """
        if not is_claim_uid(claim_uid):
            raise ValueError(f"claim uid {shown(claim_uid)} is not a UUID")
        return self.cdi_root / f"{self.vendor}-{CDI_CLASS}_{claim_uid}{SPEC_SUFFIX}"

    def render(
        self,
        devices: Sequence[CDIDevice],
        annotations: Mapping[str, str] | None = None,
        claim_edits: ContainerEdits | None = None,
    ) -> dict[str, Any]:
        """The spec document (with its minimum ``cdiVersion``) for ``devices``, with
        ``claim_edits`` as the spec's own ``containerEdits`` (left out when empty)."""
        spec: dict[str, Any] = {"cdiVersion": "", "kind": self.kind}
        if annotations:
            spec["annotations"] = dict(annotations)
        if claim_edits is not None and not claim_edits.empty:
            spec["containerEdits"] = edits_to_json(claim_edits)
        spec["devices"] = [
            {"name": d.name, "containerEdits": edits_to_json(d.edits)} for d in devices
        ]
        spec["cdiVersion"] = minimum_version(spec)
        return spec

    def write(
        self,
        claim_uid: str,
        devices: Sequence[CDIDevice],
        annotations: Mapping[str, str] | None = None,
        claim_edits: ContainerEdits | None = None,
    ) -> Path:
        """Atomically (re)write the claim's spec; returns its path. Idempotent."""
        path = self.spec_path(claim_uid)
        spec = self.render(devices, annotations, claim_edits)
        # Compact JSON: an indented dump runs the pure-Python encoder (a third of a write).
        atomic_write(path, json.dumps(spec) + "\n")
        return path

    def remove(self, claim_uid: str) -> bool:
        """Delete the claim's spec; True if one existed. Idempotent."""
        path = self.spec_path(claim_uid)
        try:
            path.unlink()
        except FileNotFoundError:
            return False
        fsync_dir(path.parent)
        return True

    def read_all(self) -> Iterator[tuple[str, dict[str, Any]]]:
        """(claim UID, spec) for every readable spec of this driver; unreadable ones skipped."""
        prefix = f"{self.vendor}-{CDI_CLASS}_"
        if not self.cdi_root.is_dir():
            return
        for path in sorted(self.cdi_root.glob(f"{prefix}*{SPEC_SUFFIX}")):
            uid = path.name[len(prefix) : -len(SPEC_SUFFIX)]
            if not is_claim_uid(uid):
                continue  # not a spec drakit wrote: drakit names specs after UUIDs only
            try:
                spec = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            if isinstance(spec, dict):
                yield uid, spec
