"""Every Helm chart in the repository checks its values: a schema that exists, refuses an
unknown key and a wrongly typed value, whatever the chart (the example driver's values.yaml
promised a schema that was not there)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from deploy_support import ROOT, Helm

#: Every chart under version control.
CHARTS = sorted(
    (ROOT / line).parent
    for line in subprocess.run(
        ["git", "ls-files", "--", "*Chart.yaml"],
        cwd=ROOT, capture_output=True, text=True, check=True, timeout=60,
    ).stdout.split()
)  # fmt: skip


def _id(chart: Path) -> str:
    return str(chart.relative_to(ROOT))


def test_the_repository_has_the_charts_this_test_knows() -> None:
    assert {_id(c) for c in CHARTS} >= {
        "deploy/helm/drakit",
        "examples/example-driver/deployments/helm/example-driver",
    }


@pytest.mark.parametrize("chart", CHARTS, ids=_id)
def test_each_chart_has_a_schema_that_refuses_unknown_keys_at_every_level(
    helm: Helm, chart: Path
) -> None:
    schema_file = chart / "values.schema.json"
    assert schema_file.is_file(), f"{_id(chart)} has no values.schema.json"
    schema = json.loads(schema_file.read_text())
    assert schema.get("additionalProperties") is False
    for key, prop in schema["properties"].items():
        if prop.get("type") == "object" and "properties" in prop:
            assert prop.get("additionalProperties") is False, f"{_id(chart)}: {key}"
    for bad in ("noSuchValue=1", "image.noSuchValue=1"):
        proc = helm.run(
            "template", "r", str(chart), "--kube-version", "1.37.2", "--set", bad, check=False
        )
        assert proc.returncode != 0, bad
        assert "additional properties 'noSuchValue' not allowed" in proc.stderr, proc.stderr
