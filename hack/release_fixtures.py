"""Writes the node plugin state of one drakit release: run by hack/release-fixtures.sh.

Runs under the release's own interpreter (its venv, its tree): everything imported here is
that release's code. Its real prepare path (``PrepareCore`` with the example backend, real
files, the serialize lock) prepares a set of claims that covers what a node keeps between
calls, then unprepares one, and the files it left are copied to ``--out``:

    manifest.json          the release, the claims (their objects and what prepare returned)
    plugin-data/           <plugins-dir>/<driver>: checkpoint.json and its journal, the
                           device metadata files (dra-device-metadata/<claim UID>/...)
    cdi/                   the CDI root: one spec per prepared claim

With ``--take-over MANIFEST`` it does the reverse, a rollback's part: the release takes over
the state another drakit left under ``--root`` for MANIFEST's claims, prepares each again
and unprepares it, and prints what it got (tests/integration/deploy/
test_release_takes_over_state.py).

The claims come from a map of ResourceClaim objects as the API server returns them (the
claim reader checks them as it checks the API server's). Everything that could vary from run
to run is fixed (UIDs from the claim names, the boot ID, the folder the state is written in),
so a second run writes the same files but for the journal's epoch (the release draws it at
random: checkpoint.json's ``journalEpoch`` and the journal's first line).

Imports go by the names of drakit 0.1.0 first, then of later releases (a release that moves a
name adds its place here).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import uuid
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from drakit.kubeapi.errors import NotFound
from drakit.node_plugin.core import PrepareCore
from drakit.node_plugin.driver import CallContext, PluginConfig
from drakit.node_plugin.metrics import PluginMetrics
from drakit.node_plugin.serialize import SerializeLock
from drakit.version import __version__

try:  # drakit 0.1.0
    from drakit.node_plugin.backends.registry import load_backend  # type: ignore[import-not-found]
    from drakit.node_plugin.driver import ClaimRef  # type: ignore[attr-defined]
except ImportError:  # later releases
    from drakit.node_plugin.backend_loader import load_backend
    from drakit.plugin import ClaimRef

DRIVER = "gpu.example.com"
NODE = "fixture-node"
BOOT_ID = "0e5c2b7a-7f0d-4c1e-9d64-release-fixture"
NAMESPACE = "fixtures"
UID_NAMESPACE = uuid.UUID("5b4f0d2e-44a1-4c3e-8a0b-6f1d2c3b4a59")
BACKEND_CONFIG: dict[str, Any] = {
    "gpus": 3,
    "partitionable": {"gpus": 1, "memory": "40Gi", "partitions": 2},
    "consumable": {"devices": 1, "memory": "80Gi", "default": "10Gi", "step": "1Gi"},
    "deviceMetadata": True,
}
TIME_SLICING = {
    "apiVersion": "gpu.example.com/v1alpha1",
    "kind": "GpuConfig",
    "sharing": {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Long"}},
}


def result(request: str, device: str, **extra: Any) -> dict[str, Any]:
    return {"request": request, "driver": DRIVER, "pool": NODE, "device": device, **extra}


#: name -> (status.allocation.devices, metadata.annotations, prepared at the end)
CLAIMS: dict[str, tuple[dict[str, Any], dict[str, str], bool]] = {
    # one whole device, from a template (its metadata file is named by the pod's claim name)
    "exclusive": (
        {"results": [result("gpu", "gpu-0")]},
        {"resource.kubernetes.io/pod-claim-name": "gpu"},
        True,
    ),
    # opaque config of the driver, for the request
    "opaque-config": (
        {
            "results": [result("gpu", "gpu-1")],
            "config": [
                {
                    "source": "FromClaim",
                    "requests": ["gpu"],
                    "opaque": {"driver": DRIVER, "parameters": TIME_SLICING},
                }
            ],
        },
        {},
        True,
    ),
    # two claims sharing one device by capacity (a share ID each)
    "shared-a": (
        {
            "results": [
                result(
                    "mem",
                    "shared-gpu-0",
                    shareID="00000000-0000-4000-8000-00000000000a",
                    consumedCapacity={"memory": "10Gi"},
                )
            ]
        },
        {},
        True,
    ),
    "shared-b": (
        {
            "results": [
                result(
                    "mem",
                    "shared-gpu-0",
                    shareID="00000000-0000-4000-8000-00000000000b",
                    consumedCapacity={"memory": "20Gi"},
                )
            ]
        },
        {},
        True,
    ),
    # a partition of a partitionable device, and a second request of the same claim
    "partition": (
        {"results": [result("part", "pgpu-0-part-0"), result("part2", "pgpu-0-part-1")]},
        {},
        True,
    ),
    # prepared, then unprepared: the journal's remove record
    "gone": ({"results": [result("gpu", "gpu-2")]}, {}, False),
}


def claim_object(name: str) -> dict[str, Any]:
    devices, annotations, _ = CLAIMS[name]
    requests = [
        {"name": request, "exactly": {"deviceClassName": DRIVER}}
        for request in dict.fromkeys(r["request"] for r in devices["results"])
    ]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "uid": str(uuid.uuid5(UID_NAMESPACE, name)),
            **({"annotations": annotations} if annotations else {}),
        },
        "spec": {"devices": {"requests": requests}},
        "status": {"allocation": {"devices": devices}},
    }


class Claims:
    """The claims by (namespace, name), as the API server returns them."""

    def __init__(self, objects: Mapping[str, dict[str, Any]]) -> None:
        self.objects = objects

    def get(self, name: str, namespace: str | None = None) -> Mapping[str, Any]:
        if namespace != NAMESPACE or name not in self.objects:
            raise NotFound(f"{namespace}/{name} not found", code=404)
        return self.objects[name]


def plugin(
    root: Path, objects: Mapping[str, dict[str, Any]], backend_config: Mapping[str, Any]
) -> tuple[PluginConfig, Any, Any, Any]:
    """The release's core on the state under ``root`` (made if missing): config, core, its
    backend and a call context."""
    for sub in ("registry", "plugins", "cdi"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    config = PluginConfig(
        driver_name=DRIVER,
        node_name=NODE,
        kubeconfig=None,
        registrar_dir=root / "registry",
        plugins_dir=root / "plugins",
        cdi_root=root / "cdi",
        backend="example",
    )
    backend = load_backend("example", driver_name=DRIVER, node_name=NODE, config=backend_config)
    core = PrepareCore(config, PluginMetrics(), backend, Claims(objects), boot_id=lambda: BOOT_ID)
    call = CallContext("fixtures", SerializeLock(config.plugin_data_dir / "serialize.lock"))
    return config, core, backend, call


def run(root: Path) -> dict[str, Any]:
    """Prepare and unprepare the claims with state under ``root``; the manifest."""
    objects = {name: claim_object(name) for name in CLAIMS}
    config, core, backend, call = plugin(root, objects, BACKEND_CONFIG)
    claims = []
    core.start()
    try:
        for name, obj in objects.items():  # one call each: the first snapshot, then records
            meta = obj["metadata"]
            ref = ClaimRef(meta["namespace"], meta["uid"], meta["name"])
            outcome = core.prepare([ref], call)[ref.uid]
            if outcome.error:
                raise SystemExit(f"prepare {name}: {outcome.error}")
            claims.append(
                {"object": obj, "prepared": [asdict(d) for d in outcome.devices], "ref": ref}
            )
        for claim in claims:
            if not CLAIMS[claim["object"]["metadata"]["name"]][2]:
                error = core.unprepare([claim["ref"]], call)[claim["ref"].uid]
                if error:
                    raise SystemExit(f"unprepare {claim['ref'].name}: {error}")
    finally:
        core.stop()
        backend.close()
    return {
        "release": {"version": __version__},
        "driver": DRIVER,
        "node": NODE,
        "bootID": BOOT_ID,
        "root": str(root),
        "pluginDataDir": str(config.plugin_data_dir),
        "cdiRoot": str(config.cdi_root),
        "backendConfig": BACKEND_CONFIG,
        "claims": [
            {
                "object": c["object"],
                "preparedAtEnd": CLAIMS[c["object"]["metadata"]["name"]][2],
                "prepareResult": c["prepared"],
            }
            for c in claims
        ],
    }


def take_over(root: Path, manifest: Mapping[str, Any]) -> dict[str, Any]:
    """The rollback: the release takes over the state another drakit left under ``root``
    for ``manifest``'s claims. It prepares each claim prepared there again (the kubelet's
    retry) and unprepares it; what it returned, and the files left."""
    objects = {c["object"]["metadata"]["name"]: c["object"] for c in manifest["claims"]}
    _config, core, backend, call = plugin(root, objects, manifest["backendConfig"])
    report: dict[str, Any] = {"release": __version__, "claims": {}}
    core.start()
    try:
        for claim in manifest["claims"]:
            if not claim["preparedAtEnd"]:
                continue
            meta = claim["object"]["metadata"]
            ref = ClaimRef(meta["namespace"], meta["uid"], meta["name"])
            outcome = core.prepare([ref], call)[ref.uid]
            report["claims"][meta["name"]] = {
                "prepareError": outcome.error,
                "prepared": [asdict(d) for d in outcome.devices],
                "unprepareError": core.unprepare([ref], call)[ref.uid],
            }
    finally:
        core.stop()
        backend.close()
    report["left"] = sorted(
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_file() and p.name != "serialize.lock"
    )
    return report


def copy_state(manifest: dict[str, Any], out: Path) -> None:
    """The files the release left, without the lock (no state: an empty file)."""
    shutil.copytree(
        manifest["pluginDataDir"],
        out / "plugin-data",
        ignore=shutil.ignore_patterns("serialize.lock", "*.sock"),
    )
    shutil.copytree(manifest["cdiRoot"], out / "cdi")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--source", type=Path, required=True, help="the release's tree")
    parser.add_argument("--root", type=Path, required=True, help="where the plugin's state is")
    parser.add_argument("--out", type=Path, help="the fixture folder (replaced)")
    parser.add_argument("--tag")
    parser.add_argument("--commit")
    parser.add_argument(
        "--take-over", type=Path, metavar="MANIFEST",
        help="take over the state under --root of MANIFEST's claims; print a JSON report",
    )  # fmt: skip
    args = parser.parse_args(argv)
    imported = Path(sys.modules["drakit"].__file__ or "").resolve()
    if not imported.is_relative_to(args.source.resolve()):
        raise SystemExit(f"drakit is imported from {imported}, not from {args.source}")
    if args.take_over:
        manifest = json.loads(args.take_over.read_text(encoding="utf-8"))
        print(json.dumps(take_over(args.root, manifest)))
        return 0
    if not (args.out and args.tag and args.commit):
        parser.error("writing fixtures needs --out, --tag and --commit")
    shutil.rmtree(args.root, ignore_errors=True)
    manifest = run(args.root)
    manifest["release"].update(tag=args.tag, commit=args.commit)
    shutil.rmtree(args.out, ignore_errors=True)
    args.out.mkdir(parents=True)
    copy_state(manifest, args.out)
    text = json.dumps(manifest, indent=2, sort_keys=True) + "\n"
    (args.out / "manifest.json").write_text(text, encoding="utf-8")
    shutil.rmtree(args.root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
