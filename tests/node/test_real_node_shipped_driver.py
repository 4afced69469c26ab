"""The guide's "Ship it" on the real node: the FPGA driver's image built from drakit's image
with docs/examples/Containerfile, installed with drakit's chart and
docs/examples/fpga-values.yaml (plus this node's folders), publishes its two FPGAs under
the DeviceClass the values create, and the real kubelet has the plugin prepare a claim that
kube-scheduler allocated: the claim's CDI spec carries the bitstream. (No container starts:
the guide's /dev/fpga0 and /dev/fpga1 do not exist on this machine, and the runtime refuses
a device node it cannot find, which the test checks too.)"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import NodeAssets, make_stack
from node_rig import EXAMPLE_IMAGE, ROOT, RealNodeStack, eventually

from drakit.kubeapi.resources import DEVICE_CLASSES, EVENTS, PODS, RESOURCE_CLAIMS

pytestmark = pytest.mark.node

EXAMPLES = ROOT / "docs" / "examples"
RELEASE = "fpga"
DRIVER = "fpga.example.com"
IMAGE = "localhost/fpga-driver"
TAG = "test"


def build_fpga_image(base_archive: Path, work: Path) -> Path:
    """docs/examples/Containerfile built on drakit's image (buildah, a store of its own in
    ``work``, removed afterwards); returns the OCI archive."""
    store, context = work / "buildah", work / "context"
    context.mkdir(parents=True)
    for name in ("Containerfile", "fpga_driver.py"):
        shutil.copy(EXAMPLES / name, context / name)
    buildah = ["buildah", "--root", str(store / "root"), "--runroot", str(store / "run"),
               "--storage-driver", "vfs"]  # fmt: skip
    cache = Path(os.environ.get("DRAKIT_CACHE_DIR", Path.home() / ".cache" / "drakit"))
    env = {**os.environ, "CONTAINERS_CONF": str(cache / "buildah" / "containers.conf")}
    archive = work / "fpga-driver.oci.tar"

    def run(*args: str) -> str:
        proc = subprocess.run([*buildah, *args], capture_output=True, text=True, env=env,
                              timeout=900, check=False)  # fmt: skip
        assert proc.returncode == 0, f"buildah {' '.join(args)}:\n{proc.stderr}"
        return proc.stdout.strip()

    try:
        base = run("pull", "--quiet", f"oci-archive:{base_archive}")
        run("tag", base, "localhost/drakit:fpga-base")
        run("build", "--quiet", "--isolation", "chroot", "--pull-never", "--layers=false",
            "--build-arg", "DRAKIT_IMAGE=localhost/drakit:fpga-base", "-t", f"{IMAGE}:{TAG}",
            "-f", str(context / "Containerfile"), str(context))  # fmt: skip
        run("push", "--quiet", f"{IMAGE}:{TAG}", f"oci-archive:{archive}:{IMAGE}:{TAG}")
    finally:
        subprocess.run([*buildah, "rmi", "--all", "--force"], capture_output=True, env=env,
                       timeout=300, check=False)  # fmt: skip
        shutil.rmtree(store, ignore_errors=True)
    return archive


@pytest.fixture(scope="module")
def stack(
    node_assets: NodeAssets, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RealNodeStack]:
    work = tmp_path_factory.mktemp("shipped")
    archive = build_fpga_image(node_assets.image_archive, work)
    with make_stack(node_assets, work, controllers="*") as s:
        s.node.import_image(archive, base_name=IMAGE)
        values: dict[str, Any] = yaml.safe_load((EXAMPLES / "fpga-values.yaml").read_text())
        values["image"] = {"repository": IMAGE, "tag": TAG, "pullPolicy": "Never"}
        s.install(RELEASE, s.chart_values(**values))
        s.running_plugin_pod(RELEASE)
        yield s


def test_the_shipped_fpga_driver_publishes_prepares_and_names_its_device_nodes(
    stack: RealNodeStack,
) -> None:
    device_class = stack.resource(DEVICE_CLASSES).get(DRIVER)
    assert device_class["spec"]["selectors"] == [
        {"cel": {"expression": f'device.driver == "{DRIVER}"'}}
    ]
    slices = eventually(lambda: stack.node_slices(DRIVER), "the FPGA driver's ResourceSlices")
    assert sorted(d["name"] for s in slices for d in s["spec"]["devices"]) == ["fpga-0", "fpga-1"]

    namespace = stack.create_namespace()
    try:
        stack.resource(RESOURCE_CLAIMS).create(
            {
                "metadata": {"name": "fpga"},
                "spec": {
                    "devices": {
                        "requests": [{"name": "fpga", "exactly": {"deviceClassName": DRIVER}}],
                        "config": [
                            {"opaque": {"driver": DRIVER, "parameters": {"bitstream": "crypto"}}}
                        ],
                    }
                },
            },
            namespace,
        )
        stack.resource(PODS).create(
            {
                "metadata": {"name": "fpga-user"},
                "spec": {
                    "resourceClaims": [{"name": "fpga", "resourceClaimName": "fpga"}],
                    "containers": [
                        {
                            "name": "main",
                            "image": EXAMPLE_IMAGE,
                            "command": ["sleep", "3600"],
                            "resources": {"claims": [{"name": "fpga"}]},
                        }
                    ],
                },
            },
            namespace,
        )
        claim = eventually(
            lambda: (
                (c := stack.claims.get("fpga", namespace)).get("status", {}).get("allocation") and c
            ),
            "kube-scheduler to allocate the claim",
        )
        (result,) = claim["status"]["allocation"]["devices"]["results"]
        index = result["device"].removeprefix("fpga-")
        uid = claim["metadata"]["uid"]
        spec_file = eventually(
            lambda: next(iter(stack.node.cdi_root.glob(f"*{uid}*")), None),
            "the plugin's CDI spec for the claim",
        )
        spec = json.loads(spec_file.read_text())
        (device,) = spec["devices"]
        assert device["containerEdits"]["env"] == [f"FPGA_{index}_BITSTREAM=crypto"]
        assert device["containerEdits"]["deviceNodes"][0]["path"] == f"/dev/fpga{index}"
        eventually(
            lambda: f"/dev/fpga{index}" in json.dumps(stack.resource(EVENTS).list(namespace).items),
            "the runtime to refuse the missing device node",
        )
    finally:
        stack.delete_namespace(namespace)
