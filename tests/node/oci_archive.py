"""Unpacking an image's OCI archive into a root filesystem, as a container runtime would.

``unpack(archive, work)`` extracts the archive's one image layer by layer (lowest first,
whiteouts applied, device files skipped: no mknod) and returns the root folder. ``image_name``
is the name the archive's index records (``localhost/drakit:<tag>``).
"""

from __future__ import annotations

import json
import shutil
import tarfile
from pathlib import Path

WHITEOUT = ".wh."
OPAQUE = ".wh..wh..opq"
REF_NAME = "org.opencontainers.image.ref.name"


def unpack(archive: Path, work: Path) -> Path:
    """The root filesystem of ``archive``'s image, unpacked under ``work`` (``work/rootfs``)."""
    with tarfile.open(archive) as tar:
        tar.extractall(work / "oci", filter="data")
    root = work / "rootfs"
    root.mkdir()
    for layer in _layers(work / "oci"):
        _apply_layer(layer, root)
    return root


def image_name(archive: Path) -> str:
    """The image name recorded in the archive's index (its one manifest's ref name)."""
    with tarfile.open(archive) as tar:
        member = tar.extractfile("index.json")
        assert member is not None, f"{archive} has no index.json"
        (entry,) = json.load(member)["manifests"]
    return str(entry.get("annotations", {}).get(REF_NAME, ""))


def _layers(oci: Path) -> list[Path]:
    """The layer blobs of the archive's one image, lowest first."""
    (entry,) = json.loads((oci / "index.json").read_text())["manifests"]
    manifest = json.loads(_blob(oci, entry["digest"]).read_text())
    return [_blob(oci, layer["digest"]) for layer in manifest["layers"]]


def _blob(oci: Path, digest: str) -> Path:
    algorithm, value = digest.split(":")
    return oci / "blobs" / algorithm / value


def _apply_layer(layer: Path, root: Path) -> None:
    """Unpack one layer over ``root``: whiteouts delete, device files are skipped (no mknod)."""
    with tarfile.open(layer) as archive:
        members = []
        for member in archive:
            folder, _, name = member.name.rpartition("/")
            if name == OPAQUE:
                _remove_children(root / folder)
            elif name.startswith(WHITEOUT):
                _remove(root / folder / name.removeprefix(WHITEOUT))
            elif not (member.ischr() or member.isblk() or member.isfifo()):
                members.append(member)
        archive.extractall(root, members=members, filter="tar")


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def _remove_children(folder: Path) -> None:
    if folder.is_dir():
        for child in folder.iterdir():
            _remove(child)
