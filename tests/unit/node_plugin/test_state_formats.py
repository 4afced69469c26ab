"""Each persisted format has the shape its version says, and docs/upgrade.md lists them all.

A failure of ``test_each_format_has_the_shape_of_its_version`` means a format changed: if an
older release would misread the new shape, declare a new version (drakit.node_plugin.formats,
the reader's refusal of newer versions, docs/upgrade.md's table) and add its shape below; a
field added to a checkpoint claim entry is no new version (unknown fields are kept), only a
new line here. The state each tagged release really wrote: test_release_checkpoints.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from helpers.releases import REPO_ROOT

from drakit.allocator.validation import MAX_COUNTER_SETS, MAX_DEVICES
from drakit.node_plugin.cdi import CDISpecs
from drakit.node_plugin.checkpoint import COMPLETED, Checkpoint, ClaimEntry, journal_path_of
from drakit.node_plugin.device_metadata import (
    API_VERSION as METADATA_API_VERSION,
)
from drakit.node_plugin.device_metadata import (
    HOST_FILE,
    ClaimIdentity,
    MetadataFiles,
    container_path,
)
from drakit.node_plugin.driver import PreparedDevice
from drakit.node_plugin.formats import FORMATS
from drakit.node_plugin.health.engine import HealthEngine
from drakit.node_plugin.health.policy import HealthPolicy
from drakit.node_plugin.publisher.naming import generate_name
from drakit.telemetry.metrics import Registry

DRIVER, NODE = "gpu.example.com", "node-a"
UID = "5d0c3a9e-0f59-4a53-9e7e-2b4f6f0d3c11"
SHARE = "00000000-0000-4000-8000-00000000000a"


def checkpoint_shape(tmp_path: Path) -> dict[str, Any]:
    path = tmp_path / "checkpoint.json"
    checkpoint = Checkpoint(path, boot_id=lambda: "b", compact_bytes=0)
    checkpoint.refresh()
    device = PreparedDevice(("gpu",), NODE, "gpu-0", (f"k8s.{DRIVER}/claim={UID}-gpu-0",), SHARE)
    checkpoint.put(ClaimEntry(UID, "ns", "c", COMPLETED, ({"request": "gpu"},), (device,), {}))
    checkpoint.save()
    document = json.loads(path.read_text())
    entry = document["claims"][UID]
    header = journal_path_of(path).read_bytes().split(b"\n")[0].rpartition(b"\t")[0]
    return {
        "snapshot": (document["apiVersion"], document["kind"], sorted(document)),
        "entry": (sorted(entry), sorted(entry["devices"][0])),
        "journal": sorted(json.loads(header)),
    }


def names_shape(tmp_path: Path) -> dict[str, Any]:
    cdi = CDISpecs(tmp_path / "cdi", DRIVER)
    metadata = MetadataFiles(tmp_path / "plugin", DRIVER)
    engine = HealthEngine(DRIVER, NODE, HealthPolicy(), registry=Registry(), notify=lambda *_: None)
    return {
        "cdi": (cdi.kind, cdi.spec_path(UID).name, cdi.device_id(cdi.device_name(UID, "g", SHARE))),
        "metadata folders": (
            str(metadata.claim_dir(UID).relative_to(tmp_path / "plugin")),
            HOST_FILE,
            container_path(DRIVER, ClaimIdentity(UID, "ns", "c", "pc"), "gpu"),
        ),
        "slices": (generate_name(0, 1, DRIVER, NODE), generate_name(0x1F, 0x100000, DRIVER, NODE),
                   MAX_DEVICES, MAX_COUNTER_SETS),
        "taint": engine.taint_key,
    }  # fmt: skip


#: (format, version) -> the shape of that version, as this release's code makes it.
SHAPES: dict[tuple[str, str], Any] = {
    ("checkpoint snapshot", "drakit.dev/v1"): (
        "drakit.dev/v1", "NodePluginCheckpoint",
        ["apiVersion", "bootID", "claims", "journalEpoch", "kind"],
    ),
    ("checkpoint journal", "1"): ["epoch", "version"],
    ("CDI spec naming", "1"): (
        "k8s.gpu.example.com/claim", f"k8s.gpu.example.com-claim_{UID}.json",
        f"k8s.gpu.example.com/claim={UID}-g-{SHARE}",
    ),
    ("device metadata files", "metadata.resource.k8s.io/v1beta1"): METADATA_API_VERSION,
    ("device metadata folders", "1"): (
        f"dra-device-metadata/{UID}", "metadata.json",
        "/var/run/kubernetes.io/dra-device-attributes/resourceclaimtemplates/pc/gpu/"
        "gpu.example.com-metadata.json",
    ),
    ("ResourceSlice layout", "1"): (
        "00000-gpu.example.com-node-a-", "0001f-gpu.example.com-node-a-", 128, 8,
    ),
    ("device taint keys", "1"): "gpu.example.com/unhealthy",
}  # fmt: skip
#: Fields of a claim entry and of its devices (a new one: add it, same version).
ENTRY_FIELDS = (
    ["backendState", "devices", "name", "namespace", "results", "state"],
    ["cdiDeviceIDs", "deviceName", "poolName", "requestNames", "shareID"],
)


def test_each_format_has_the_shape_of_its_version(tmp_path: Path) -> None:
    checkpoint, names = checkpoint_shape(tmp_path), names_shape(tmp_path)
    actual = {
        "checkpoint snapshot": checkpoint["snapshot"],
        "checkpoint journal": checkpoint["journal"],
        "CDI spec naming": names["cdi"],
        "device metadata files": METADATA_API_VERSION,
        "device metadata folders": names["metadata folders"],
        "ResourceSlice layout": names["slices"],
        "device taint keys": names["taint"],
    }
    assert {f.name for f in FORMATS} == set(actual)
    for state_format in FORMATS:
        assert (state_format.name, state_format.version) in SHAPES, state_format
        assert actual[state_format.name] == SHAPES[state_format.name, state_format.version]
    assert checkpoint["entry"] == tuple(ENTRY_FIELDS)


def test_the_upgrade_guide_has_a_row_for_each_format_and_version() -> None:
    text = (REPO_ROOT / "docs" / "upgrade.md").read_text(encoding="utf-8")
    section = text.partition("## State formats and their versions")[2].partition("\n## ")[0]
    rows = [
        [cell.strip().strip("`") for cell in line.strip().strip("|").split("|")]
        for line in section.splitlines()
        if line.startswith("|") and not re.match(r"^\|[\s|:-]+\|$", line)
    ]
    documented = {(row[0], row[1]) for row in rows[1:]}
    assert documented == {(f.name, f.version) for f in FORMATS}
