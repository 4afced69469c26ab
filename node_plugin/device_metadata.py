"""Device metadata in containers (KEP-5304, "DRA device metadata").

The kubelet has no part in it beyond CDI: as k8s.io/dynamic-resource-allocation v0.37.2's
``kubeletplugin`` helper does, the driver writes one file per request of a prepared claim
and hands the kubelet one more CDI device ID that bind-mounts it read-only into every
container using the claim. The DRA gRPC protos (v1 and v1beta1) carry no metadata field:
the CDI ID on the request's first device is how the plugin "returns" it.

Inside the container the file is (``api/metadata`` of that module)::

    /var/run/kubernetes.io/dra-device-attributes/resourceclaims/<claim>/<request>/<driver>-metadata.json
    /var/run/kubernetes.io/dra-device-attributes/resourceclaimtemplates/<podClaimName>/<request>/<driver>-metadata.json

the second for claims made from a template (the claim carries the pod's name for it in
the ``resource.kubernetes.io/pod-claim-name`` annotation). The file is a JSON stream of
one ``DeviceMetadata`` object per API version, newest first; drakit writes
``metadata.resource.k8s.io/v1beta1``, the version upstream's helper requires.

On the host the files live under ``<plugin data dir>/dra-device-metadata/<claim UID>/``
(the UID, not upstream's ``<namespace>_<name>``: a re-created claim of the same name
never shares a folder with the old one); the mount is one more device of the claim's
own CDI spec, so the spec and the checkpoint's record of it come and go together.

Every part of those paths that comes from the claim is checked before a path is built,
because whoever creates a claim chooses its annotations: the pod claim name must be a DNS
label (as Kubernetes requires of ``spec.resourceClaims[].name``, whose value the resource
claim controller copies into the annotation), the claim's name a DNS subdomain, each request
name a DNS label, the UID a UUID. Upstream's helper joins the annotation into the path
unchecked (``filepath.Join`` folds ``..`` away, so ``../../etc`` lands outside
``dra-device-attributes``); here it is :class:`UnsafeClaimNameError`, one claim's error.
"""

from __future__ import annotations

import json
import posixpath
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from drakit.allocator.model import DeviceAttribute
from drakit.node_plugin.atomic import atomic_write
from drakit.node_plugin.backends.base import (
    ContainerEdits,
    DeviceMetadata,
    DeviceToPrepare,
    MountEdit,
)
from drakit.node_plugin.claimcheck import is_claim_uid, label_problem, shown, subdomain_problem
from drakit.node_plugin.config import base_request

API_VERSION = "metadata.resource.k8s.io/v1beta1"
KIND = "DeviceMetadata"
CONTAINER_DIR = "/var/run/kubernetes.io/dra-device-attributes"
POD_CLAIM_NAME_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
HOST_SUBDIR = "dra-device-metadata"
HOST_FILE = "metadata.json"
# The apiserver's limit for metadata attributes (and a ResourceSlice device's).
MAX_ATTRIBUTES = 32


class DeviceMetadataError(ValueError):
    """A backend's metadata cannot be written; the message names the device and the field."""


class UnsafeClaimNameError(DeviceMetadataError):
    """A string of the claim (an annotation, its name, a request name) cannot be part of a
    path; the message names the field, the value (cut) and the reason."""


@dataclass(frozen=True)
class ClaimIdentity:
    """The claim as the metadata file names it."""

    uid: str
    namespace: str
    name: str
    pod_claim_name: str | None = None

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> ClaimIdentity:
        """From a ResourceClaim object read from the API server; UnsafeClaimNameError
        when a part of it cannot name a folder (see the module docstring)."""
        meta = obj.get("metadata") or {}
        annotations = meta.get("annotations") or {}
        identity = cls(
            uid=str(meta.get("uid", "")),
            namespace=str(meta.get("namespace", "")),
            name=str(meta.get("name", "")),
            pod_claim_name=annotations.get(POD_CLAIM_NAME_ANNOTATION) or None,
        )
        identity.check()
        return identity

    def check(self) -> None:
        """UnsafeClaimNameError unless every part that names a folder is safe as one."""
        problem = (
            label_problem(f"annotation {POD_CLAIM_NAME_ANNOTATION}", self.pod_claim_name)
            if self.pod_claim_name is not None
            else ""
        )
        problem = problem or subdomain_problem("metadata.name", self.name)
        problem = problem or label_problem("metadata.namespace", self.namespace)
        if not problem and not is_claim_uid(self.uid):
            problem = f"metadata.uid {shown(self.uid)} is not a UUID"
        if problem:
            raise UnsafeClaimNameError(
                f"{problem}; it would be part of the device metadata file's path"
            )


@dataclass(frozen=True)
class MetadataMount:
    """One request's metadata file: the CDI device that mounts it, by base request name."""

    request: str
    cdi_name: str
    edits: ContainerEdits


def container_path(driver: str, claim: ClaimIdentity, request: str) -> str:
    """Where the container sees the metadata file of ``request`` (a base request name);
    UnsafeClaimNameError when a part is unsafe, so no caller can build a path that
    leaves :data:`CONTAINER_DIR`."""
    claim.check()
    _check_request(request)
    if claim.pod_claim_name:
        folder = f"resourceclaimtemplates/{claim.pod_claim_name}"
    else:
        folder = f"resourceclaims/{claim.name}"
    path = f"{CONTAINER_DIR}/{folder}/{request}/{driver}-metadata.json"
    if posixpath.normpath(path) != path:  # the driver name: checked at start-up; never trusted
        raise UnsafeClaimNameError(f"container path {shown(path)} is not a normal path")
    return path


def _check_request(request: str) -> None:
    problem = label_problem("request name", request)
    if problem:
        raise UnsafeClaimNameError(
            f"{problem}; it would be part of the device metadata file's path"
        )


def attribute_json(value: DeviceAttribute) -> dict[str, Any]:
    """``{"int": 1}``-style JSON of an attribute, as a ResourceSlice spells it."""
    return {value.kind: list(value.value) if isinstance(value.value, tuple) else value.value}


def device_json(
    driver: str, device: DeviceToPrepare, metadata: DeviceMetadata | None
) -> dict[str, Any]:
    """One ``requests[].devices[]`` entry of the metadata object."""
    out: dict[str, Any] = {"driver": driver, "pool": device.pool, "name": device.device}
    if metadata is None:
        return out
    if len(metadata.attributes) > MAX_ATTRIBUTES:
        raise DeviceMetadataError(
            f"device {device.pool}/{device.device}: metadata attributes: "
            f"{len(metadata.attributes)} given, at most {MAX_ATTRIBUTES} allowed"
        )
    if metadata.attributes:
        out["attributes"] = {k: attribute_json(v) for k, v in sorted(metadata.attributes.items())}
    if metadata.network_data is not None:
        net = metadata.network_data
        data: dict[str, Any] = {}
        if net.interface_name:
            data["interfaceName"] = net.interface_name
        if net.ips:
            data["ips"] = list(net.ips)
        if net.hardware_address:
            data["hardwareAddress"] = net.hardware_address
        out["networkData"] = data
    return out


def metadata_object(
    claim: ClaimIdentity, request: str, devices: Sequence[dict[str, Any]]
) -> dict[str, Any]:
    """The ``DeviceMetadata`` object of one request (``request`` as the allocation names it,
    ``req/sub`` included), generation 1 as upstream writes at prepare."""
    obj: dict[str, Any] = {
        "kind": KIND,
        "apiVersion": API_VERSION,
        "metadata": {
            "name": claim.name,
            "namespace": claim.namespace,
            "uid": claim.uid,
            "generation": 1,
        },
    }
    if claim.pod_claim_name:
        obj["podClaimName"] = claim.pod_claim_name
    obj["requests"] = [{"name": request, "devices": list(devices)}]
    return obj


class MetadataFiles:
    """Writes and removes the metadata files of one driver's claims; thread-safe per claim."""

    def __init__(self, plugin_data_dir: Path, driver: str) -> None:
        self.root = plugin_data_dir / HOST_SUBDIR
        self.driver = driver

    def claim_dir(self, uid: str) -> Path:
        """The claim's folder; ValueError unless the UID is UUID-shaped (it names a folder)."""
        if not is_claim_uid(uid):
            raise ValueError(f"claim uid {shown(uid)} is not a UUID")
        return self.root / uid

    def write(
        self,
        claim: ClaimIdentity,
        devices: Sequence[DeviceToPrepare],
        metadata: Sequence[DeviceMetadata | None],
    ) -> list[MetadataMount]:
        """Write one file per base request of ``devices`` (``metadata`` pairs with them);
        the CDI devices that mount them, in request order. DeviceMetadataError for
        metadata that cannot be written (nothing is written then)."""
        claim.check()
        by_request: dict[str, tuple[str, list[dict[str, Any]]]] = {}
        for device, meta in zip(devices, metadata, strict=True):
            base = base_request(device.request)
            _, entries = by_request.setdefault(base, (device.request, []))
            entries.append(device_json(self.driver, device, meta))
        mounts = []
        # Every path first: a name that cannot be one fails the claim before any write.
        paths = {
            base: (
                self.claim_dir(claim.uid) / base / HOST_FILE,
                container_path(self.driver, claim, base),
            )
            for base in by_request
        }
        for base, (request, entries) in by_request.items():
            host, in_container = paths[base]
            host.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(host, json.dumps(metadata_object(claim, request, entries)) + "\n")
            mount = MountEdit(
                host_path=str(host), container_path=in_container, options=("ro", "bind")
            )
            mounts.append(
                MetadataMount(base, f"{claim.uid}-metadata-{base}", ContainerEdits(mounts=(mount,)))
            )
        return mounts

    def remove(self, uid: str) -> None:
        """Delete the claim's files; idempotent."""
        shutil.rmtree(self.claim_dir(uid), ignore_errors=True)
