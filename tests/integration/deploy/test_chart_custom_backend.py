"""The chart values of the guide's "Ship it" (docs/examples/fpga-values.yaml) install a
custom ``module:Class`` backend from the driver's own image, with its DeviceClass."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml
from deploy_support import CHART, KUBE_VERSION, ROOT, Helm, by_kind, load_objects, one

pytestmark = pytest.mark.integration

VALUES = ROOT / "docs" / "examples" / "fpga-values.yaml"
GUIDE = ROOT / "docs" / "writing-a-driver.md"


def _render(helm: Helm) -> list[dict[str, Any]]:
    proc = helm.run(
        "template", "fpga", str(CHART), "--namespace", "fpga-system",
        "--kube-version", KUBE_VERSION, "-f", str(VALUES),
    )  # fmt: skip
    return load_objects(proc.stdout)


def test_the_guides_values_are_the_file_the_chart_test_renders() -> None:
    blocks = re.findall(r"```yaml\n(.*?)```", GUIDE.read_text(), re.S)
    shown = [yaml.safe_load(b) for b in blocks if "nodePlugin:" in b]
    assert shown == [yaml.safe_load(VALUES.read_text())]


def test_custom_backend_values_run_its_class_from_its_image_with_its_device_class(
    helm: Helm,
) -> None:
    objects = _render(helm)
    container = one(objects, "DaemonSet")["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "registry.example.com/fpga-driver:1.0.0"
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert (env["BACKEND"], env["DRIVER_NAME"]) == ("fpga_driver:FpgaBackend", "fpga.example.com")
    assert "BACKEND_CONFIG" not in env  # the backend takes none: no ConfigMap to read
    (device_class,) = by_kind(objects, "DeviceClass")
    assert device_class["metadata"]["name"] == "fpga.example.com"
    assert device_class["spec"]["selectors"] == [
        {"cel": {"expression": 'device.driver == "fpga.example.com"'}}
    ]
