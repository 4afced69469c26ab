"""The README stays short and true: every link, path, make target, chart value, Kubernetes
version and reference-parity fact it states is checked against the repository here. Its
driver example is run by test_writing_a_driver.py; everything moved out of it lives in the
docs site, whose own checks are tests/site/."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
README = (ROOT / "README.md").read_text()


def test_the_readme_is_at_most_250_lines() -> None:
    assert len(README.splitlines()) <= 250


def test_every_relative_link_of_the_readme_resolves() -> None:
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README)
    local = [link for link in links if "://" not in link]
    assert local, "the README links to no file"
    assert [link for link in local if not (ROOT / link).exists()] == []


def test_every_path_the_readme_names_exists() -> None:
    paths = re.findall(r"`((?:deploy|docs|hack|tests)/[\w./-]+)`", README)
    paths += re.findall(r"(?:-f|apply -f) ((?:deploy)/[\w./-]+)", README)
    assert paths
    assert [p for p in paths if not (ROOT / p.rstrip("/")).exists()] == []


def test_every_make_target_the_readme_names_exists() -> None:
    targets = set(re.findall(r"(?:^|`|\$ )make ([a-z][\w-]*)", README, re.M))
    makefile = (ROOT / "Makefile").read_text()
    defined = set(re.findall(r"^([a-z][\w-]*):", makefile, re.M))
    assert {"demo", "test", "docs", "bench"} <= targets
    assert targets - defined == set()


def test_every_chart_value_the_readme_sets_is_in_the_charts_schema() -> None:
    schema = json.loads((ROOT / "deploy/helm/drakit/values.schema.json").read_text())
    names = set(re.findall(r"--set ([\w.]+)=", README))
    names |= set(re.findall(r"`(nodePlugin\.\w+)`", README))
    assert names
    for name in names:
        node = schema
        for part in name.split("."):
            assert part in node.get("properties", {}), f"{name}: no {part!r} in the schema"
            node = node["properties"][part]


def test_the_compatibility_table_lists_the_tested_kubernetes_versions() -> None:
    env = (ROOT / "hack/versions.env").read_text()
    versions = re.search(r'^KUBE_VERSIONS="([^"]+)"', env, re.M)
    assert versions is not None
    section = README.split("## Compatibility")[1].split("\n## ")[0]
    assert re.findall(r"\| (v1\.\d+\.\d+):", section) == sorted(
        versions.group(1).split(), reverse=True
    )
    assert "docs/reference-parity.md" in section


def test_the_reference_parity_summary_matches_the_parity_page() -> None:
    section = README.split("## Compatibility")[1].split("\n## ")[0]
    parity = (ROOT / "docs/reference-parity.md").read_text()
    version = re.search(r"dra-example-driver (v\d+\.\d+\.\d+)", section)
    specs = re.search(r"\((\d+) specs\)", section)
    assert version is not None and specs is not None
    assert f"`sigs.k8s.io/dra-example-driver` {version.group(1)}" in parity
    assert f"{specs.group(1)} Ginkgo specs" in parity


def _table_rows(text: str, columns: int) -> list[list[str]]:
    """The cells of every markdown table row with ``columns`` cells, headers and rules too."""
    rows = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) == columns:
            rows.append(cells)
    return rows


def _outcomes(rows: list[list[str]], columns: tuple[int, int]) -> dict[str, tuple[str, ...]]:
    """Spec -> the outcome words (passed, failed, skipped) of ``columns``, footnotes dropped."""
    words = ("passed", "failed", "skipped")
    found = {}
    for row in rows:
        outcome = tuple(row[c].split(" ")[0] for c in columns)
        if all(word in words for word in outcome):
            found[row[0]] = outcome
    return found


def test_the_readme_spec_table_is_the_parity_pages_1_36_columns() -> None:
    section = README.split("## Compatibility")[1].split("\n## ")[0]
    readme = _outcomes(_table_rows(section, 3), (1, 2))
    parity = (ROOT / "docs/reference-parity.md").read_text()
    # The parity page's results: spec, Go 1.36.3, Go 1.37.2, drakit 1.36.3, drakit 1.37.2.
    page = _outcomes(_table_rows(parity, 5), (3, 1))
    assert len(readme) == 23
    assert readme == page
