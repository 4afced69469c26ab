"""OCI archives for the real node: valid layouts, deterministic bytes."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest

from drakit.localcluster.images import BUSYBOX, ImageSpec, busybox_spec, write_oci_archive


def _read(archive: Path) -> dict[str, bytes]:
    with tarfile.open(archive) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]


def _spec() -> ImageSpec:
    return ImageSpec(
        name="localhost/test/tool:1",
        files=[("bin/tool", b"#!/bin/sh\necho hi\n", 0o755)],
        symlinks=[("bin/alias", "tool")],
        entrypoint=["/bin/tool"],
    )


def test_archive_is_an_oci_layout_whose_digests_match_their_blobs(tmp_path: Path) -> None:
    archive = tmp_path / "image.tar"
    digest = write_oci_archive(_spec(), archive)
    files = _read(archive)
    assert json.loads(files["oci-layout"]) == {"imageLayoutVersion": "1.0.0"}
    for name, data in files.items():
        if name.startswith("blobs/sha256/"):
            assert hashlib.sha256(data).hexdigest() == name.rsplit("/", 1)[1]
    [entry] = json.loads(files["index.json"])["manifests"]
    assert entry["digest"] == digest
    assert entry["annotations"]["io.containerd.image.name"] == "localhost/test/tool:1"
    manifest = json.loads(files[f"blobs/sha256/{digest[7:]}"])
    config = json.loads(files[f"blobs/sha256/{manifest['config']['digest'][7:]}"])
    layer = files[f"blobs/sha256/{manifest['layers'][0]['digest'][7:]}"]
    uncompressed = gzip.decompress(layer)
    assert config["rootfs"]["diff_ids"] == ["sha256:" + hashlib.sha256(uncompressed).hexdigest()]
    assert config["config"]["Entrypoint"] == ["/bin/tool"]
    with tarfile.open(fileobj=io.BytesIO(uncompressed)) as tar:
        members = {m.name: m for m in tar.getmembers()}
    assert members["bin/tool"].mode == 0o755
    assert members["bin/alias"].issym() and members["bin/alias"].linkname == "tool"
    assert members["tmp"].isdir() and members["tmp"].mode == 0o1777


def test_same_inputs_give_byte_identical_archives(tmp_path: Path) -> None:
    write_oci_archive(_spec(), tmp_path / "a.tar")
    write_oci_archive(_spec(), tmp_path / "b.tar")
    assert (tmp_path / "a.tar").read_bytes() == (tmp_path / "b.tar").read_bytes()


@pytest.mark.skipif(not BUSYBOX.is_file(), reason="Debian's busybox-static is not installed")
def test_busybox_image_links_every_applet_to_the_static_binary() -> None:
    spec = busybox_spec()
    links = dict(spec.symlinks)
    for applet in ("sh", "env", "stat", "sleep", "od", "head"):
        assert links[f"bin/{applet}"] == "busybox"
    assert [p for p, _, _ in spec.files if p == "bin/busybox"]
