"""What a container gets from its CDI devices, read from the spec files the plugin wrote.

The kubelet hands a container runtime CDI device IDs (``vendor/class=name``); the runtime
finds each in the spec files of its CDI folders (``*.json``, ``*.yaml``, ``*.yml``) and
applies the edits: for each device in order, its spec's common ``containerEdits`` (once per
spec), then the device's own. A later variable of the same name replaces the earlier value
in place, a later mount at the same container path replaces the earlier mount, and mounts
are ordered by the depth of their container path, as the CDI library
(tags.cncf.io/container-device-interface, ``Cache.InjectDevices``) does.
:func:`container_edits` computes that result, so a test asserts on what the container
would see without running one.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

__all__ = ["CDIContainer", "CDIMount", "cdi_specs", "container_edits", "unresolved_cdi_ids"]

SPEC_SUFFIXES = (".json", ".yaml", ".yml")


@dataclass(frozen=True)
class CDIMount:
    """One mount a CDI device gives a container."""

    host_path: str
    container_path: str
    options: tuple[str, ...] = ()
    type: str = ""


@dataclass(frozen=True)
class CDIContainer:
    """What a container runtime gives a container with some CDI devices."""

    #: ``NAME=VALUE`` in the order the runtime sets them.
    env: tuple[str, ...] = ()
    #: The device nodes' paths in the container.
    device_nodes: tuple[str, ...] = ()
    mounts: tuple[CDIMount, ...] = ()
    #: The OCI hooks, as the specs write them (``hookName``, ``path``, ``args``, ...).
    hooks: tuple[dict[str, Any], ...] = ()

    @property
    def environ(self) -> dict[str, str]:
        """``env`` as a mapping, the way a process in the container sees it."""
        return dict(entry.partition("=")[::2] for entry in self.env)


def cdi_specs(folder: Path) -> list[dict[str, Any]]:
    """The CDI spec files in ``folder`` (sorted by name), each parsed; an unreadable one
    raises AssertionError naming the file, since a runtime would refuse it."""
    specs = []
    for path in sorted(folder.iterdir()) if folder.is_dir() else []:
        if path.suffix in SPEC_SUFFIXES and path.is_file():
            specs.append(_parse(path))
    return specs


def unresolved_cdi_ids(folder: Path, ids: Iterable[str]) -> list[str]:
    """The IDs of ``ids`` that no spec in ``folder`` defines (a runtime refuses the
    container then), in order; [] when every one resolves."""
    known = _devices(cdi_specs(folder))
    return [device_id for device_id in ids if device_id not in known]


def container_edits(folder: Path, ids: Iterable[str]) -> CDIContainer:
    """What a runtime reading the specs in ``folder`` gives a container with the CDI devices
    ``ids`` (the kubelet's list for one container). AssertionError, naming what the specs
    define, when an ID does not resolve."""
    ids = list(ids)
    specs = cdi_specs(folder)
    devices = _devices(specs)
    missing = [i for i in ids if i not in devices]
    if missing:
        raise AssertionError(
            f"CDI IDs not defined by any spec in {folder}: {missing}; "
            f"the specs define {sorted(devices)}"
        )
    applied: list[dict[str, Any]] = []
    seen_specs: set[int] = set()
    for device_id in ids:
        spec, device = devices[device_id]
        if id(spec) not in seen_specs:
            seen_specs.add(id(spec))
            applied.append(spec.get("containerEdits") or {})
        applied.append(device.get("containerEdits") or {})
    return _apply(applied)


def _apply(edits: list[dict[str, Any]]) -> CDIContainer:
    env: dict[str, str] = {}
    nodes: dict[str, None] = {}
    mounts: dict[str, CDIMount] = {}
    hooks: list[dict[str, Any]] = []
    for edit in edits:
        for entry in edit.get("env") or ():
            name, _, value = str(entry).partition("=")
            env[name] = value  # an existing name keeps its place
        for node in edit.get("deviceNodes") or ():
            nodes[str(node["path"])] = None
        for mount in edit.get("mounts") or ():
            mounts.pop(mount["containerPath"], None)  # replaced, and moved to the end
            mounts[mount["containerPath"]] = CDIMount(
                host_path=str(mount["hostPath"]),
                container_path=str(mount["containerPath"]),
                options=tuple(mount.get("options") or ()),
                type=str(mount.get("type") or ""),
            )
        hooks.extend(edit.get("hooks") or ())
    return CDIContainer(
        env=tuple(f"{k}={v}" for k, v in env.items()),
        device_nodes=tuple(nodes),
        # Shallower container paths first (stable), as the runtime orders mounts.
        mounts=tuple(sorted(mounts.values(), key=lambda m: _depth(m.container_path))),
        hooks=tuple(hooks),
    )


def _depth(path: str) -> int:
    return os.path.normpath(path).count("/")


def _devices(specs: list[dict[str, Any]]) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    """``vendor/class=name`` -> (its spec, the device)."""
    found = {}
    for spec in specs:
        for device in spec.get("devices") or ():
            found[f"{spec['kind']}={device['name']}"] = (spec, device)
    return found


def _parse(path: Path) -> dict[str, Any]:
    text = path.read_text()
    try:
        spec = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as err:
        what = path.suffix[1:].upper()
        raise AssertionError(f"CDI spec {path}: not valid {what}: {err}") from err
    if not isinstance(spec, dict) or not isinstance(spec.get("kind"), str):
        raise AssertionError(f"CDI spec {path}: no 'kind' (vendor/class) at the top level")
    if not isinstance(spec.get("devices"), list):
        raise AssertionError(f"CDI spec {path}: 'devices' is not a list")
    return spec
