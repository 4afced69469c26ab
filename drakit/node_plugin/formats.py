"""The node plugin's persisted formats, and the version of each one this release writes.

What a node plugin leaves behind outlives it: the next plugin (an upgrade, a rollback, a
restart) reads it. Each such format has a version, carried where a reader sees it before it
acts on the data:

* in a field, where the file has one: the checkpoint snapshot's ``apiVersion``, the
  journal header's ``version``, the device metadata file's ``apiVersion`` (upstream's);
* in the name, where the name *is* the format (a CDI spec's class, the metadata folder, a
  ResourceSlice's name prefix, a taint key): a changed layout takes a new name, so a reader
  of the old layout never takes the new one for its own.

A change an older reader would misread makes a new version; a field added to the
checkpoint's claim entries is no such change (unknown fields are kept). docs/upgrade.md has
the table of formats and of the releases that read and write each version;
tests/unit/node_plugin/test_state_formats.py keeps the table, this module and each format's
actual shape in step, and tests/unit/node_plugin/test_release_checkpoints.py reads the state
each tagged release really wrote.
"""

from __future__ import annotations

from dataclasses import dataclass

from drakit.node_plugin.cdi import CDI_CLASS
from drakit.node_plugin.checkpoint import API_VERSION, JOURNAL_VERSION
from drakit.node_plugin.device_metadata import API_VERSION as METADATA_API_VERSION
from drakit.node_plugin.device_metadata import HOST_SUBDIR

__all__ = ["CDI_NAMING", "FORMATS", "METADATA_LAYOUT", "SLICE_LAYOUT", "TAINT_KEYS", "StateFormat"]

#: CDI spec naming: kind ``k8s.<driver>/claim``, file ``k8s.<driver>-claim_<claim UID>.json``,
#: device ``<claim UID>-<device>[-<share ID>]`` (drakit.node_plugin.cdi). Its mark: the class.
CDI_NAMING = "1"
#: Where the device metadata files are on the host:
#: ``<plugin data dir>/dra-device-metadata/<claim UID>/<request>/metadata.json``.
METADATA_LAYOUT = "1"
#: The ResourceSlice layout: names ``<index, hex, at least 5 digits>-<driver>-<node>-`` and
#: the sticky split of a pool (drakit.node_plugin.publisher.naming and .layout).
SLICE_LAYOUT = "1"
#: The device taint key the health policy sets: ``<driver>/unhealthy``.
TAINT_KEYS = "1"


@dataclass(frozen=True)
class StateFormat:
    """One persisted format: the version this release writes and reads, and the mark a
    reader tells that version by (a field's value, or the name itself)."""

    name: str
    version: str
    mark: str


FORMATS: tuple[StateFormat, ...] = (
    StateFormat("checkpoint snapshot", API_VERSION, f"apiVersion: {API_VERSION}"),
    StateFormat("checkpoint journal", str(JOURNAL_VERSION), "header version (none: 1)"),
    StateFormat("CDI spec naming", CDI_NAMING, f"class {CDI_CLASS} of kind k8s.<driver>/"),
    StateFormat("device metadata files", METADATA_API_VERSION, "apiVersion of each file"),
    StateFormat("device metadata folders", METADATA_LAYOUT, f"folder {HOST_SUBDIR}/"),
    StateFormat("ResourceSlice layout", SLICE_LAYOUT, "name prefix <hex index>-<driver>-<node>-"),
    StateFormat("device taint keys", TAINT_KEYS, "key <driver>/unhealthy"),
)
