"""Small container images written as OCI archives, for a node without a registry.

The real test node (``node.py``) has no registry to pull from, so the images
its pods need are made here from files already on the machine and imported
into containerd with ``ctr images import``:

- ``busybox``: Debian's static busybox (package ``busybox-static``) with a
  link for every applet, so test containers have ``sh``, ``env``, ``stat``...
- ``pause``: drakit's own static pause program (``hack/tools/pause``), the
  sandbox image containerd pins for every pod.

An archive is a tar of an OCI image layout (``oci-layout``, ``index.json``,
``blobs/sha256/...``) with one gzip layer. Output is deterministic: the same
inputs give byte-identical archives (fixed mtimes, sorted entries), so an
archive can be cached by content.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import subprocess
import tarfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

#: Where Debian's busybox-static installs its binary.
BUSYBOX = Path("/bin/busybox")
#: Names the node's containerd knows these images by (kubelet and pod specs use them).
BUSYBOX_IMAGE = "localhost/drakit/busybox:local"
PAUSE_IMAGE = "localhost/drakit/pause:local"

_MEDIA_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
_MEDIA_CONFIG = "application/vnd.oci.image.config.v1+json"
_MEDIA_MANIFEST = "application/vnd.oci.image.manifest.v1+json"


class ImageError(RuntimeError):
    """An image could not be made from what is on this machine."""


@dataclass
class ImageSpec:
    """What goes into a one-layer image."""

    name: str
    #: (path in the image, content, mode) for regular files.
    files: list[tuple[str, bytes, int]] = field(default_factory=list)
    #: (path in the image, link target) for symbolic links.
    symlinks: list[tuple[str, str]] = field(default_factory=list)
    entrypoint: list[str] = field(default_factory=list)
    cmd: list[str] = field(default_factory=list)
    env: list[str] = field(default_factory=lambda: ["PATH=/bin"])


def busybox_spec() -> ImageSpec:
    """Debian's static busybox, every applet linked in /bin.

    Raises ImageError when busybox-static is not installed.
    """
    if not BUSYBOX.is_file():
        raise ImageError(
            f"{BUSYBOX} not found: install Debian's busybox-static (apt-get install busybox-static)"
        )
    applets = _busybox_applets()
    spec = ImageSpec(name=BUSYBOX_IMAGE, cmd=["sh"])
    spec.files.append(("bin/busybox", BUSYBOX.read_bytes(), 0o755))
    spec.files.append(
        (
            "etc/passwd",
            b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534::/:/bin/false\n",
            0o644,
        )
    )
    spec.files.append(("etc/group", b"root:x:0:\nnobody:x:65534:\n", 0o644))
    spec.symlinks.extend((f"bin/{a}", "busybox") for a in applets if a != "busybox")
    return spec


def _busybox_applets() -> list[str]:
    try:
        out = subprocess.run(
            [str(BUSYBOX), "--list"], capture_output=True, text=True, check=True, timeout=10
        ).stdout
    except (OSError, subprocess.SubprocessError) as err:
        raise ImageError(f"{BUSYBOX} --list failed: {err}") from err
    # Only plain names: a hostile or odd list entry must not become a path elsewhere.
    return sorted({a for a in out.split() if a.isascii() and a.replace("-", "").isalnum()})


def pause_spec(pause_binary: Path) -> ImageSpec:
    """drakit's static pause program as the sandbox image."""
    return ImageSpec(
        name=PAUSE_IMAGE,
        files=[("pause", pause_binary.read_bytes(), 0o755)],
        entrypoint=["/pause"],
    )


def write_oci_archive(spec: ImageSpec, out: Path) -> str:
    """Write ``spec`` as an OCI layout tar to ``out`` (atomically); returns the manifest digest."""
    layer_tar = _layer_tar(spec)
    layer_gz = gzip.compress(layer_tar, compresslevel=6, mtime=0)
    config = _json_bytes(
        {
            "architecture": "amd64",
            "os": "linux",
            "config": {
                "Env": spec.env,
                "Entrypoint": spec.entrypoint or None,
                "Cmd": spec.cmd or None,
            },
            "rootfs": {"type": "layers", "diff_ids": [_digest(layer_tar)]},
        }
    )
    manifest = _json_bytes(
        {
            "schemaVersion": 2,
            "mediaType": _MEDIA_MANIFEST,
            "config": _descriptor(_MEDIA_CONFIG, config),
            "layers": [_descriptor(_MEDIA_LAYER, layer_gz)],
        }
    )
    index = _json_bytes(
        {
            "schemaVersion": 2,
            "manifests": [
                {
                    **_descriptor(_MEDIA_MANIFEST, manifest),
                    "annotations": {
                        "io.containerd.image.name": spec.name,
                        "org.opencontainers.image.ref.name": spec.name.rsplit(":", 1)[-1],
                    },
                }
            ],
        }
    )
    entries = [
        ("oci-layout", _json_bytes({"imageLayoutVersion": "1.0.0"})),
        ("index.json", index),
        *((f"blobs/sha256/{_digest(b)[7:]}", b) for b in (layer_gz, config, manifest)),
    ]
    tmp = out.with_name(out.name + ".tmp")
    out.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in entries:
            tar.addfile(_file_info(name, len(data), 0o644), io.BytesIO(data))
    tmp.replace(out)
    return _digest(manifest)


def _layer_tar(spec: ImageSpec) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for d in sorted(
            _parent_dirs(p for p, _, _ in spec.files)
            | _parent_dirs(p for p, _ in spec.symlinks)
            | {"tmp"}
        ):
            info = tarfile.TarInfo(d)
            info.type = tarfile.DIRTYPE
            info.mode = 0o1777 if d == "tmp" else 0o755
            tar.addfile(info)
        for path, data, mode in sorted(spec.files):
            tar.addfile(_file_info(path, len(data), mode), io.BytesIO(data))
        for path, target in sorted(spec.symlinks):
            info = tarfile.TarInfo(path)
            info.type = tarfile.SYMTYPE
            info.linkname = target
            info.mode = 0o777
            tar.addfile(info)
    return buf.getvalue()


def _parent_dirs(paths: Iterable[str]) -> set[str]:
    dirs: set[str] = set()
    for p in paths:
        parts = p.split("/")[:-1]
        dirs.update("/".join(parts[: i + 1]) for i in range(len(parts)))
    return dirs


def _file_info(name: str, size: int, mode: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size = size
    info.mode = mode
    return info  # mtime, uid and gid stay 0: deterministic output


def _json_bytes(obj: object) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _descriptor(media_type: str, data: bytes) -> dict[str, object]:
    return {"mediaType": media_type, "digest": _digest(data), "size": len(data)}
