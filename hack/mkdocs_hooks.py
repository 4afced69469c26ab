"""MkDocs hooks for drakit's site (mkdocs.yml ``hooks:``).

``docs/benchmarks.md`` holds two markers that become tables from docs/bench/results.json at
build time, so the page's numbers are always the results file's (the same file the plots
are drawn from, hack/bench_plots.py):

* ``<!-- bench:figures -->``: one row per figure: drakit, Go, drakit / Go, target, run;
* ``<!-- bench:scale -->``: one row per scale point, both sides side by side.

A marker whose data is missing fails the build (mkdocs raises the error) rather than leaving
a page with an empty table.

``docs/reference/plugin.md`` groups the names of ``drakit.plugin`` by topic, one
``::: module.Name`` line each (mkdocstrings renders it from the docstrings). Its marker
``<!-- api:unlisted -->`` becomes a section with every name of ``drakit.plugin.__all__`` that
the page does not list yet, so a name added to the public API is in the reference from the
first build, before anyone files it under a topic.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
import re
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "bench" / "results.json"
Obj = dict[str, Any]


def _value(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    text = f"{value:,.3f}".rstrip("0").rstrip(".") if value < 10 else f"{value:,.1f}"
    return f"{text} {unit}"


def _ratio(f: Obj) -> str:
    better = f["ratio"] > 1 if f["better"] == "higher" else f["ratio"] < 1
    text = f"{f['ratio']:.2f}x"
    return f"**{text}**" if better else text


def figures_table(results: Obj) -> str:
    """The figures as a markdown table."""
    rows = [
        "| figure | drakit | Go | drakit / Go | target | run |",
        "|---|---|---|---|---|---|",
    ]
    for f in results["figures"]:
        unit = "" if f["unit"] == "ratio" else f["unit"]
        rows.append(
            f"| {f['figure']} ({f['better']} is better) | {_value(f['drakit'], unit)} "
            f"| {_value(f['go'], unit)} | {_ratio(f)} | {f.get('target') or ''} "
            f"| {f['date']}, {f['commit']} |"
        )
    return "\n".join(rows)


def scale_table(results: Obj) -> str:
    """The scale points, drakit and Go in one row per size."""
    sizes: dict[tuple[int, int], dict[str, Obj]] = {}
    for p in results["scale"]:
        sizes.setdefault((p["nodes"], p["pods"]), {})[p["side"]] = p
    rows = [
        "| nodes | pods | pods/s drakit / Go | ratio | peak RSS MiB drakit / Go | ratio | run |",
        "|---|---|---|---|---|---|---|",
    ]
    for (nodes, pods), sides in sorted(sizes.items()):
        d, g = sides["drakit"], sides["go"]
        rows.append(
            f"| {nodes:,} | {pods:,} | {d['pods_per_s']:.1f} / {g['pods_per_s']:.1f} "
            f"| {d['pods_per_s'] / g['pods_per_s']:.2f}x "
            f"| {d['peak_rss_mib']:,.0f} / {g['peak_rss_mib']:,.0f} "
            f"| {d['peak_rss_mib'] / g['peak_rss_mib']:.2f}x | {d['date']}, {d['commit']} |"
        )
    return "\n".join(rows)


def reference_target(name: str) -> str:
    """Where public name ``name`` of ``drakit.plugin`` is defined, as ``module.Name`` (a
    public module: its own name). Classes and functions say it (``__module__``); a constant
    or a type alias is found in the ``drakit.plugin`` module that binds it first."""
    import drakit.plugin  # noqa: PLC0415 (only the API reference page needs it)

    obj = getattr(drakit.plugin, name)
    if isinstance(obj, ModuleType):
        return obj.__name__
    module = getattr(obj, "__module__", None)
    if isinstance(module, str) and module.startswith("drakit."):
        return f"{module}.{name}"
    for info in sorted(pkgutil.iter_modules(drakit.plugin.__path__), key=lambda m: m.name):
        defining = importlib.import_module(f"drakit.plugin.{info.name}")
        if vars(defining).get(name) is obj:
            return f"{defining.__name__}.{name}"
    raise LookupError(f"drakit.plugin.{name}: no module of drakit.plugin defines it")


def unlisted_api(markdown: str) -> str:
    """``::: module.Name`` lines for the public names ``markdown`` does not document yet."""
    import drakit.plugin  # noqa: PLC0415 (only the API reference page needs it)

    lines = []
    for name in drakit.plugin.__all__:
        line = f"::: {reference_target(name)}"
        if line not in markdown.splitlines():
            lines.append(line)
    if not lines:
        return ""
    return "## Not yet filed under a topic\n\n" + "\n\n".join(lines) + "\n"


def on_page_markdown(markdown: str, **_: Any) -> str:
    """Replaces the benchmark and API markers of a page with their generated content."""
    if "<!-- api:unlisted -->" in markdown:
        markdown = markdown.replace("<!-- api:unlisted -->", unlisted_api(markdown))
    if "<!-- bench:" not in markdown:
        return markdown
    results = json.loads(RESULTS.read_text())
    if not results.get("figures") or not results.get("scale"):
        raise ValueError(f"{RESULTS}: no figures or no scale points to show")
    markdown = markdown.replace("<!-- bench:figures -->", figures_table(results))
    return markdown.replace("<!-- bench:scale -->", scale_table(results))


#: A Sphinx role left in front of a rendered code span (``:class:`X``` -> ``<code>X</code>``).
SPHINX_ROLE = re.compile(r":(?:class|func|meth|attr|data|mod|exc|obj|const):(?=<code>)")


def on_page_content(html: str, **_: Any) -> str:
    """Drops the Sphinx roles mkdocstrings leaves in rendered docstrings."""
    return SPHINX_ROLE.sub("", html)
