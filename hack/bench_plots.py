#!/usr/bin/env python3
"""Draws the benchmark plots of docs/benchmarks.md from docs/bench/results.json.

    hack/bench_plots.py [--results docs/bench/results.json] [--out docs/bench]

Writes three SVGs, never edited by hand (tests/unit/docs/test_bench_plots.py redraws them
and requires the same bytes):

* ``ratios.svg``: drakit / Go for every figure that has a ratio, on a log scale around 1.0;
  a bar is green where drakit is better (lower time or memory, higher throughput);
* ``scale-nodes.svg``: throughput and peak RSS against the number of nodes, at the pod count
  measured on most node counts;
* ``scale-pods.svg``: the same against the number of pods, on the largest node count.

The output is deterministic for a given matplotlib (no date, fixed element ids, the font
matplotlib ships), so a redraw of unchanged results changes no byte.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("svg")
import matplotlib.pyplot as plt  # after choosing the backend

ROOT = Path(__file__).resolve().parents[1]
Obj = dict[str, Any]
COLOURS = {"drakit": "#2e7d32", "go": "#1565c0", "worse": "#ef6c00"}


def _style() -> None:
    """Fixed fonts and ids, so the SVG bytes depend on the data alone."""
    plt.rcParams.update({
        "svg.hashsalt": "drakit-bench", "svg.fonttype": "path",
        "font.family": "DejaVu Sans", "font.size": 9, "axes.grid": True, "grid.alpha": 0.3,
    })  # fmt: skip


def _save(fig: Any, path: Path) -> None:
    fig.savefig(path, format="svg", metadata={"Date": None, "Creator": "hack/bench_plots.py"})
    plt.close(fig)


def drakit_is_better(f: Obj) -> bool:
    """Lower is better for times and memory, higher for throughput."""
    return bool(f["ratio"] > 1.0) if f["better"] == "higher" else bool(f["ratio"] < 1.0)


def plot_ratios(figures: list[Obj], path: Path) -> None:
    """One horizontal bar per figure: drakit / Go, 1.0 marked."""
    rows = [f for f in figures if f.get("ratio")]
    fig, ax = plt.subplots(figsize=(10, 0.3 * len(rows) + 1.4))
    colours = [COLOURS["drakit"] if drakit_is_better(f) else COLOURS["worse"] for f in rows]
    ratios = [f["ratio"] for f in rows]
    bars = ax.barh(range(len(rows)), ratios, color=colours, left=0)
    for bar, f in zip(bars, rows, strict=True):
        bar.set_gid(f"bar-{f['id']}")  # the SVG element's id: the test finds every figure's bar
    ax.set_xscale("log")
    ax.set_xlim(min(ratios) / 1.5, max(ratios) * 1.8)  # room for the value labels
    ax.axvline(1.0, color="black", linewidth=1)
    ax.set_yticks(range(len(rows)), [f["figure"] for f in rows], fontsize=7)
    ax.invert_yaxis()
    for i, f in enumerate(rows):
        ax.annotate(f"{f['ratio']:.2f}x", (f["ratio"], i), xytext=(3, 0),
                    textcoords="offset points", va="center", fontsize=7)  # fmt: skip
    ax.set_xlabel("drakit / Go (log scale; 1.0 = the same as Go)")
    fig.suptitle("drakit against the Go references: green where drakit is better "
                 "(less time or memory, more pods/s)", fontsize=9)  # fmt: skip
    fig.tight_layout()
    _save(fig, path)


def _series(points: list[Obj], axis: str, fixed: str, value: int) -> dict[str, list[Obj]]:
    """Points with ``fixed == value``, per side, sorted along ``axis``."""
    by_side: dict[str, list[Obj]] = collections.defaultdict(list)
    for p in sorted(points, key=lambda p: p[axis]):
        if p[fixed] == value:
            by_side[p["side"]].append(p)
    return dict(by_side)


def plot_scale(points: list[Obj], axis: str, fixed: str, value: int, path: Path) -> None:
    """Throughput and peak RSS against ``axis`` (nodes or pods), ``fixed`` held at ``value``."""
    series = _series(points, axis, fixed, value)
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.4))
    names = {"drakit": "drakit controller", "go": "kube-scheduler + kube-controller-manager"}
    for side, rows in series.items():
        xs = [p[axis] for p in rows]
        style = {"color": COLOURS[side], "marker": "o", "label": names[side]}
        left.plot(xs, [p["pods_per_s"] for p in rows], gid=f"throughput-{side}", **style)
        right.plot(xs, [p["peak_rss_mib"] for p in rows], gid=f"rss-{side}", **style)
    for ax, label in ((left, "throughput, pods/s"), (right, "peak RSS, MiB")):
        ax.set_xlabel(f"{axis} ({fixed} = {value:,})")
        ax.set_ylabel(label)
        ax.set_ylim(bottom=0)
    left.legend(fontsize=7)
    fig.suptitle(f"Scheduling at scale: {axis} against throughput and memory")
    fig.tight_layout()
    _save(fig, path)


def most_common(points: list[Obj], key: str) -> int:
    """The value of ``key`` shared by the most points (ties: the larger)."""
    counts = collections.Counter(p[key] for p in points)
    return max(counts, key=lambda v: (counts[v], v))


def draw(results: Obj, out: Path) -> list[Path]:
    """Every plot of ``results`` into ``out``; the paths written."""
    _style()
    out.mkdir(parents=True, exist_ok=True)
    points = results.get("scale", [])
    paths = [out / "ratios.svg", out / "scale-nodes.svg", out / "scale-pods.svg"]
    plot_ratios(results["figures"], paths[0])
    plot_scale(points, "nodes", "pods", most_common(points, "pods"), paths[1])
    plot_scale(points, "pods", "nodes", max(p["nodes"] for p in points), paths[2])
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=ROOT / "docs" / "bench" / "results.json")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "bench")
    args = parser.parse_args(argv)
    for path in draw(json.loads(args.results.read_text()), args.out):
        print(f"bench_plots: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
