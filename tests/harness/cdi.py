"""Check CDI device IDs against the CDI spec files a container runtime would read.

A CDI device ID is ``vendor/class=name``. A runtime resolves it by finding a
spec file (JSON or YAML, ``*.json``/``*.yaml``/``*.yml`` directly in a spec
folder) whose ``kind`` is ``vendor/class`` and which lists a device named
``name``. The kubelet never opens these files, so the tests do it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

SPEC_SUFFIXES = (".json", ".yaml", ".yml")


class CDISpecError(ValueError):
    """A spec file cannot be read the way a runtime reads it."""


def load_cdi_devices(cdi_root: Path) -> dict[str, set[str]]:
    """Map each ``kind`` in the spec files of ``cdi_root`` to its device names.

    Raises CDISpecError naming the file and the problem for an unreadable
    spec: a runtime would refuse it, so a test must not silently skip it.
    """
    kinds: dict[str, set[str]] = {}
    for path in sorted(cdi_root.iterdir()) if cdi_root.is_dir() else []:
        if path.suffix not in SPEC_SUFFIXES or not path.is_file():
            continue
        spec = _parse(path)
        kind = spec.get("kind")
        if not isinstance(kind, str) or "/" not in kind:
            raise CDISpecError(f"{path}: field kind: want 'vendor/class', got {kind!r}")
        devices = spec.get("devices")
        if not isinstance(devices, list):
            raise CDISpecError(f"{path}: field devices: want a list, got {type(devices).__name__}")
        names = kinds.setdefault(kind, set())
        for i, device in enumerate(devices):
            name = device.get("name") if isinstance(device, dict) else None
            if not isinstance(name, str) or not name:
                raise CDISpecError(f"{path}: field devices[{i}].name: missing or not a string")
            names.add(name)
    return kinds


def unresolved_cdi_ids(ids: Iterable[str], cdi_root: Path) -> list[str]:
    """Return the IDs in ``ids`` that no spec file in ``cdi_root`` defines, in order."""
    kinds = load_cdi_devices(cdi_root)
    missing = []
    for device_id in ids:
        kind, sep, name = device_id.partition("=")
        if not sep or name not in kinds.get(kind, set()):
            missing.append(device_id)
    return missing


def assert_cdi_ids_resolve(ids: Iterable[str], cdi_root: Path) -> None:
    """Fail with the unresolved IDs and the kinds on disk unless every ID resolves."""
    ids = list(ids)
    missing = unresolved_cdi_ids(ids, cdi_root)
    if missing:
        known = {kind: sorted(names) for kind, names in load_cdi_devices(cdi_root).items()}
        raise AssertionError(
            f"CDI IDs not defined by any spec in {cdi_root}: {missing}; spec files define {known}"
        )


def _parse(path: Path) -> dict[str, Any]:
    text = path.read_text()
    try:
        spec = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as err:
        raise CDISpecError(f"{path}: not valid {path.suffix[1:].upper()}: {err}") from err
    if not isinstance(spec, dict):
        raise CDISpecError(f"{path}: want a mapping at the top level, got {type(spec).__name__}")
    return spec
