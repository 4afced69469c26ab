"""The benchmark plots in docs/bench/ are hack/bench_plots.py's drawing of docs/bench/results.json,
byte for byte: nobody edits them by hand, and a results file changed without redrawing fails."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
BENCH = ROOT / "docs" / "bench"
PLOTS = ("ratios.svg", "scale-nodes.svg", "scale-pods.svg")
REDRAW = "docs/bench/*.svg differ from their results file: run .venv/bin/python hack/bench_plots.py"


def _draw(out: Path, results: dict[str, object]) -> list[Path]:
    pytest.importorskip("matplotlib", reason="the docs extra (matplotlib) is not installed")
    spec = importlib.util.spec_from_file_location("bench_plots", ROOT / "hack" / "bench_plots.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_plots"] = module
    spec.loader.exec_module(module)
    paths: list[Path] = module.draw(results, out)
    return paths


def test_the_committed_plots_are_the_drawing_of_the_committed_results(tmp_path: Path) -> None:
    drawn = _draw(tmp_path, json.loads((BENCH / "results.json").read_text()))
    assert [p.name for p in drawn] == list(PLOTS)
    for path in drawn:
        assert path.read_bytes() == (BENCH / path.name).read_bytes(), REDRAW


def test_a_changed_figure_changes_its_plot(tmp_path: Path) -> None:
    results = json.loads((BENCH / "results.json").read_text())
    results["figures"][0]["ratio"] *= 3
    drawn = _draw(tmp_path, results)
    assert drawn[0].read_bytes() != (BENCH / "ratios.svg").read_bytes()
    assert drawn[1].read_bytes() == (BENCH / "scale-nodes.svg").read_bytes()


def test_every_plot_draws_a_bar_per_figure_and_a_line_per_side(tmp_path: Path) -> None:
    results = json.loads((BENCH / "results.json").read_text())
    ratios, nodes, pods = (p.read_text() for p in _draw(tmp_path, results))
    for f in results["figures"]:
        assert f'id="bar-{f["id"]}"' in ratios, f["id"]
    for svg in (nodes, pods):
        for line in ("throughput-drakit", "throughput-go", "rss-drakit", "rss-go"):
            assert f'id="{line}"' in svg, line
