"""The documentation site (`make docs`): a strict build, links that resolve, no stub pages,
and pages whose generated parts (benchmark tables, API reference) are complete."""

from __future__ import annotations

import json
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from docs_build import ROOT, build_site, nav_pages

import drakit.plugin

sys.path.insert(0, str(ROOT / "hack"))
import mkdocs_hooks  # hack/ is not a package: found through sys.path

#: Fewer words than this in a page's article is a stub (the shortest real page has ~400).
STUB_WORDS = 150


class _Page(HTMLParser):
    """The links, ids and article text of one built page."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.ids: set[str] = set()
        self.words = 0
        self._article = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if values.get("id"):
            self.ids.add(str(values["id"]))
        for name in ("href", "src"):
            if values.get(name) and tag in {"a", "img", "script", "link"}:
                self.links.append(str(values[name]))
        if tag == "article":
            self._article += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "article":
            self._article -= 1

    def handle_data(self, data: str) -> None:
        if self._article:
            self.words += len(data.split())


def _parse(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text())
    return page


def test_the_site_builds_with_strict_and_prints_no_warning() -> None:
    built = build_site()
    warnings = [line for line in built.output.splitlines() if "WARNING" in line]
    assert warnings == []


def test_every_internal_link_resolves_to_a_built_file_and_anchor() -> None:
    site = build_site().site
    # 404.html links from the site root (it is served for any missing path): not checked here.
    pages = {p: _parse(p) for p in site.rglob("*.html") if p.name != "404.html"}
    broken = []
    for path, page in pages.items():
        for link in page.links:
            parts = urlsplit(link)
            if parts.scheme or parts.netloc or link.startswith(("mailto:", "data:")):
                continue  # outside the site
            target = (path.parent / unquote(parts.path)).resolve() if parts.path else path
            if target.is_dir():
                target = target / "index.html"
            if not target.is_file():
                broken.append(f"{path.relative_to(site)}: {link} (no such file)")
            elif parts.fragment and target.suffix == ".html":
                ids = pages[target].ids if target in pages else _parse(target).ids
                if unquote(parts.fragment) not in ids:
                    broken.append(f"{path.relative_to(site)}: {link} (no such anchor)")
    assert broken == []


def test_a_broken_anchor_fails_the_strict_build(tmp_path: Path) -> None:
    """The check above is not the only guard: mkdocs itself refuses a dangling anchor."""
    pytest.importorskip("mkdocs")

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# Home\n\nSee [the missing part](other.md#nowhere).\n")
    (docs / "other.md").write_text("# Other\n\n## Somewhere\n")
    config = (ROOT / "mkdocs.yml").read_text()
    hooks = str(ROOT / "hack" / "mkdocs_hooks.py")
    config = config.split("\nnav:")[0].replace("hack/mkdocs_hooks.py", hooks)
    (tmp_path / "mkdocs.yml").write_text(config)
    run = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict"], cwd=tmp_path,
                         capture_output=True, text=True, check=False)  # fmt: skip
    assert run.returncode != 0
    assert "nowhere" in run.stdout + run.stderr


def test_every_page_of_the_nav_is_built_and_none_is_a_stub() -> None:
    site = build_site().site
    short = {}
    for name in nav_pages():
        path = site / name
        assert path.is_file(), f"{name} is in the nav but was not built"
        words = _parse(path).words
        if words < STUB_WORDS:
            short[name] = words
    assert short == {}, f"pages with fewer than {STUB_WORDS} words: {short}"


def test_the_benchmark_tables_show_every_figure_of_the_results_file() -> None:
    html = (build_site().site / "benchmarks.html").read_text()
    results = json.loads((ROOT / "docs" / "bench" / "results.json").read_text())
    assert "bench:" not in html  # every marker was replaced
    for figure in results["figures"]:
        assert f"{figure['ratio']:.2f}x" in html, figure["id"]
    for point in results["scale"]:
        assert f"<td>{point['nodes']:,}</td>" in html
    for plot in ("ratios.svg", "scale-nodes.svg", "scale-pods.svg"):
        assert f'src="bench/{plot}"' in html


def test_the_api_reference_documents_every_public_name_where_it_is_defined() -> None:
    html = (build_site().site / "reference" / "plugin.html").read_text()
    for name in drakit.plugin.__all__:
        where = mkdocs_hooks.reference_target(name)
        assert f'id="{where}"' in html, f"{where} was not rendered"
    for name in drakit.plugin.plainconfig.__all__:  # the public module's own names
        assert f'id="drakit.plugin.plainconfig.{name}"' in html, name
    assert ":class:<code>" not in html  # the hook drops the docstrings' Sphinx roles


def test_a_public_name_missing_from_the_reference_page_is_added_by_the_build_hook() -> None:
    source = (ROOT / "docs" / "reference" / "plugin.md").read_text()
    assert "<!-- api:unlisted -->" in source
    first = drakit.plugin.__all__[0]
    line = f"::: {mkdocs_hooks.reference_target(first)}"
    without = "\n".join(x for x in source.splitlines() if x != line)
    assert line in mkdocs_hooks.unlisted_api(without).splitlines()


@pytest.mark.parametrize(
    ("example", "names"),
    [
        ("embedding.py", ("InventoryBackend", "NPU_INVENTORY", "NPU driver stopped")),
        ("npu_driver.py", ("NpuBackend", "NPU_VISIBLE_DEVICES_", "DeviceCounterConsumption")),
    ],
)
def test_the_guide_shows_its_example_files_as_they_are(
    example: str, names: tuple[str, ...]
) -> None:
    # The guide includes docs/examples/ files with a snippet line; a formatter that took
    # that line for Python once broke it, and the page then showed no example at all.
    html = (build_site().site / "writing-a-driver.html").read_text()
    text = (ROOT / "docs" / "examples" / example).read_text()
    # Highlighting splits lines into spans: look for names that occur only in the file.
    for name in names:
        assert name in text
        assert name in html, name
