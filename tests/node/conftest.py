"""Fixtures of the real-node tier (marker ``node``).

``node_assets`` builds (or reuses) what a real node needs once per session:
the control-plane and node binaries, helm, and drakit's image from
deploy/Dockerfile. It skips the tier, with one line saying why, where a real
node cannot run (not root, not Linux, no buildah).

``earlier_release`` is each release this checkout upgrades from (every ``v*`` tag older than
drakit's version, one test per tag): its chart and its image, built from the tag by
hack/build-release.sh and cached like drakit's own image.

``make_stack`` starts one control plane and one real node for a test module
and tears both down at the module's end: two real nodes never run at once
(the kubelet's device-plugin folder is a fixed host path).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers.releases import Release, ReleaseUnavailableError, build_release, earlier_release_tags
from node_rig import ROOT, Helm, RealNodeStack

from drakit.demo.real_node import IMAGE_REPOSITORY, import_images
from drakit.kubeapi.client import load_client
from drakit.localcluster import ClusterConfig, LocalCluster
from drakit.localcluster.assets import build_binaries, require_binary
from drakit.localcluster.node import LocalNode, NodeConfig


@dataclass(frozen=True)
class NodeAssets:
    image_archive: Path
    image_tag: str
    helm: Path


def _skip_reason() -> str | None:
    if not sys.platform.startswith("linux"):
        return "the real-node tier needs Linux"
    if os.geteuid() != 0:
        return (
            "the real-node tier needs root (kubelet, containerd and runc manage cgroups "
            "and mounts); CI runs it as root"
        )
    if shutil.which("buildah") is None or shutil.which("mmdebstrap") is None:
        return (
            "the real-node tier needs buildah and mmdebstrap "
            "(apt-get install buildah mmdebstrap); .ci/run installs them"
        )
    return None


@pytest.fixture(scope="session")
def node_assets() -> NodeAssets:
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    build_binaries(("kube", "etcd", "node", "helm"))
    proc = subprocess.run(
        [str(ROOT / "hack" / "build-image.sh")],
        capture_output=True,
        text=True,
        check=False,
        timeout=1800,
    )
    if proc.returncode != 0:
        pytest.fail(f"hack/build-image.sh failed:\n{proc.stderr}")
    archive = Path(proc.stdout.strip().splitlines()[-1])
    tag = archive.name.removeprefix("drakit-").removesuffix(".oci.tar")
    return NodeAssets(image_archive=archive, image_tag=tag, helm=require_binary("helm"))


# Read at collection: each earlier release is one parameter, so a second tag adds a second
# run of every upgrade test with nothing else to change.
_EARLIER_RELEASES = earlier_release_tags()


@pytest.fixture(scope="session", params=_EARLIER_RELEASES or [None], ids=str)
def earlier_release(request: pytest.FixtureRequest) -> Release:
    """One release to upgrade from: its chart, and its image as an OCI archive whose image is
    ``localhost/drakit:<image_tag>`` (import it with ``import_images``). It needs no image of
    this checkout (``node_assets``): a test of the release alone builds nothing else."""
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    tag = request.param
    if tag is None:
        pytest.skip("this checkout has no release tag older than its version (git fetch --tags)")
    try:
        return build_release(tag)
    except ReleaseUnavailableError as exc:
        pytest.skip(f"release {tag} cannot be built here: {exc}")


@contextmanager
def make_stack(assets: NodeAssets, work: Path, controllers: str) -> Iterator[RealNodeStack]:
    """A control plane (with kube-scheduler and kube-controller-manager) and one real node."""
    config = ClusterConfig(
        with_scheduler=True, with_controller_manager=True, real_nodes=True, controllers=controllers
    )
    with LocalCluster(config) as cluster:
        node = LocalNode(NodeConfig(kubeconfig=Path(cluster.kubeconfig)))
        try:
            node.start()
            import_images(node, assets.image_archive)
            helm = Helm(assets.helm, work / "helm", cluster.kubeconfig)
            client = load_client(cluster.kubeconfig)
            stack = RealNodeStack(
                cluster=cluster,
                node=node,
                helm=helm,
                image_repository=IMAGE_REPOSITORY,
                image_tag=assets.image_tag,
                client=client,
            )
            try:
                yield stack
            finally:
                stack.uninstall_all()
                client.close()
        finally:
            node.stop()
