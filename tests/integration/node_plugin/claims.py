"""Helpers for node-plugin core tests: allocated ResourceClaims in the real apiserver."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from drakit.kubeapi.resources import RESOURCE_CLAIMS, Resource
from drakit.node_plugin.driver import CallContext, PluginConfig
from drakit.node_plugin.serialize import SerializeLock
from drakit.plugin import ClaimRef

DRIVER = "gpu.example.com"
NODE = "node-a"


def make_config(root: Path, **overrides: Any) -> PluginConfig:
    values: dict[str, Any] = {
        "driver_name": DRIVER,
        "node_name": NODE,
        "kubeconfig": None,
        "registrar_dir": root / "registry",
        "plugins_dir": root / "plugins",
        "cdi_root": root / "cdi",
        "backend": "example",
        **overrides,
    }
    for key in ("registrar_dir", "plugins_dir", "cdi_root"):
        Path(values[key]).mkdir(parents=True, exist_ok=True)
    (Path(values["plugins_dir"]) / DRIVER).mkdir(parents=True, exist_ok=True)
    return PluginConfig(**values)


def call(config: PluginConfig) -> CallContext:
    return CallContext(
        request_id=uuid.uuid4().hex[:8],
        serialize=SerializeLock(config.plugin_data_dir / "serialize.lock"),
    )


def result(request: str, device: str, driver: str = DRIVER, **extra: Any) -> dict[str, Any]:
    return {"request": request, "driver": driver, "pool": NODE, "device": device, **extra}


def create_claim(
    claims: Resource,
    namespace: str,
    results: Sequence[Mapping[str, Any]] | None,
    *,
    requests: Sequence[str] = ("gpu",),
    config: Sequence[Mapping[str, Any]] = (),
    name: str | None = None,
    subrequests: Mapping[str, Sequence[str]] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> ClaimRef:
    """Create a claim and, unless ``results`` is None, allocate it via the status subresource."""
    spec_requests = []
    for r in requests:
        if subrequests and r in subrequests:
            spec_requests.append(
                {
                    "name": r,
                    "firstAvailable": [
                        {"name": s, "deviceClassName": DRIVER} for s in subrequests[r]
                    ],
                }
            )
        else:
            spec_requests.append({"name": r, "exactly": {"deviceClassName": DRIVER}})
    metadata: dict[str, Any] = {
        "name": name or f"claim-{uuid.uuid4().hex[:8]}",
        "namespace": namespace,
    }
    if annotations:
        metadata["annotations"] = dict(annotations)
    obj = claims.create({"metadata": metadata, "spec": {"devices": {"requests": spec_requests}}})
    if results is not None:
        obj["status"] = {
            "allocation": {
                "devices": {"results": list(results), "config": list(config)},
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {
                            "matchFields": [
                                {"key": "metadata.name", "operator": "In", "values": [NODE]}
                            ]
                        }
                    ]
                },
            }
        }
        obj = claims.update_status(obj)
    meta = obj["metadata"]
    return ClaimRef(namespace=meta["namespace"], uid=meta["uid"], name=meta["name"])


def opaque(
    parameters: Any, source: str = "FromClaim", requests: Sequence[str] = ()
) -> dict[str, Any]:
    return {
        "source": source,
        "requests": list(requests),
        "opaque": {"driver": DRIVER, "parameters": parameters},
    }


def claims_resource(api: Any) -> Resource:
    return Resource(api, RESOURCE_CLAIMS)
