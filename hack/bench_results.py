#!/usr/bin/env python3
"""Turns the report of a ``hack/bench.sh`` run into docs/bench/results.json.

    hack/bench_results.py LOG [--results docs/bench/results.json] [--commit C] [--date D]

``LOG`` is what ``hack/bench.sh`` printed (it tees its output to build/bench/last-run.log
and calls this script). Each benchmark's closing lines are read as the benchmark prints
them (tests/bench/bench_*.py); every figure found replaces the figure of the same ``id``
in the results file, stamped with the run's machine, date and commit, and every figure not
found keeps its earlier values, so ``hack/bench.sh allocator`` updates only the allocator's
figures. Scale points are replaced per (nodes, pods, side). A report in which no known
figure is found changes nothing and exits 1: a benchmark whose output format moved must
not leave the plots silently stale.

Contract of the results file (docs/bench/results.json, read by hack/bench_plots.py):
``figures`` is a list of {id, benchmark, figure, drakit, go, ratio, unit, better, target,
machine, date, commit, command}, ``ratio`` being drakit / Go; ``scale`` a list of {nodes,
pods, side ("drakit" | "go"), pods_per_s, peak_rss_mib, cpu_s, machine, date, commit,
command}.
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "bench" / "results.json"
Obj = dict[str, Any]

SECTION = re.compile(r"^=== tests/bench/bench_(\w+)\.py")
MACHINE = re.compile(r"^machine: (.+)$")
NUMBER = r"([0-9]+(?:\.[0-9]+)?)"


def figure(fid: str, bench: str, name: str, values: tuple[float | None, float | None, float],
           *, unit: str, better: str) -> Obj:  # fmt: skip
    """One figure as the results file holds it (run metadata is added by the caller);
    ``values`` is (drakit, Go, drakit / Go)."""
    drakit, go, ratio = values
    return {"id": fid, "benchmark": bench, "figure": name, "drakit": drakit, "go": go,
            "ratio": round(ratio, 3), "unit": unit, "better": better}  # fmt: skip


def sections(log: str) -> Iterator[tuple[str, list[str]]]:
    """(benchmark name, its report lines) for each ``=== tests/bench/bench_X.py`` section."""
    name, lines = "", []
    for line in log.splitlines():
        match = SECTION.match(line)
        if match:
            if name:
                yield name, lines
            name, lines = match.group(1), []
        elif name:
            lines.append(line)
    if name:
        yield name, lines


def table_rows(lines: list[str]) -> list[list[str]]:
    """The cells of every markdown table row that is not a header or a rule."""
    rows = []
    for line in lines:
        if line.startswith("|") and not line.startswith("|---"):
            cells = [c.strip().strip("*") for c in line.strip().strip("|").split("|")]
            rows.append(cells)
    return rows


def _number(cell: str) -> float | None:
    try:
        return float(cell.replace(",", ""))
    except ValueError:
        return None


def parse_node_prepare(lines: list[str]) -> list[Obj]:
    """The plugin table (drakit's row first, Go's second) and the call without claims."""
    rows = [r for r in table_rows(lines) if len(r) == 6 and _number(r[1]) is not None]
    found: list[Obj] = []
    if len(rows) == 2:
        mine, theirs = ([float(c) for c in r[1:]] for r in rows)
        names = [("prepare_1claim_p50", "NodePrepareResources, 1 claim, p50", "ms"),
                 ("prepare_1claim_p99", "NodePrepareResources, 1 claim, p99", "ms"),
                 ("prepare_32claims_p50", "NodePrepareResources, 32 claims, p50", "ms"),
                 ("prepare_32claims_p99", "NodePrepareResources, 32 claims, p99", "ms"),
                 ("plugin_idle_rss", "Node plugin idle RSS", "MiB")]  # fmt: skip
        for (fid, name, unit), d, g in zip(names, mine, theirs, strict=True):
            values = (d, g, d / g)
            found.append(figure(fid, "node_prepare", name, values, unit=unit, better="lower"))
    empty = re.compile(rf"call without claims.*p50: drakit {NUMBER} ms, Go {NUMBER} ms")
    for line in lines:
        match = empty.search(line)
        if match:
            d, g = float(match.group(1)), float(match.group(2))
            name = "NodePrepareResources without claims, p50"
            found.append(figure("prepare_empty_p50", "node_prepare", name, (d, g, d / g),
                                unit="ms", better="lower"))  # fmt: skip
    return found


def parse_allocator(lines: list[str]) -> list[Obj]:
    """Per shape: the cold pass (seconds) and the warm passes (milliseconds per pod)."""
    found: list[Obj] = []
    shape = ""
    rates: dict[str, float] = {}
    cold = re.compile(rf"cold pass .*python median {NUMBER}s.*go median {NUMBER}s")
    for line in lines:
        header = re.match(r"^([a-z-]+): \{", line)
        rate = re.match(rf"^\s+(go|python)\s+{NUMBER} pods/s", line)
        match = cold.search(line)
        if header:
            shape, rates = header.group(1), {}
        elif rate:
            rates[rate.group(1)] = float(rate.group(2))
            if len(rates) == 2 and rates["go"] and rates["python"]:
                d, g = 1000 / rates["python"], 1000 / rates["go"]
                found.append(figure(f"allocator_warm_{shape.replace('-', '_')}", "allocator",
                                    f"Allocator warm pass, {shape}, time per pod",
                                    (round(d, 3), round(g, 3), d / g), unit="ms",
                                    better="lower"))  # fmt: skip
        elif match and shape:
            d, g = float(match.group(1)), float(match.group(2))
            found.append(figure(f"allocator_cold_{shape.replace('-', '_')}", "allocator",
                                f"Allocator cold pass, {shape}", (d, g, d / g), unit="s",
                                better="lower"))  # fmt: skip
    return found


def parse_scheduling(lines: list[str]) -> list[Obj]:
    """The medians after ``median of N run(s):``, paired drakit against kube-scheduler."""
    medians: dict[str, float] = {}
    after = False
    for line in lines:
        if "median of" in line and line.startswith("scheduling"):
            after = True
        match = re.match(rf"^\s+(defaults|no client limits): (.+?): {NUMBER} pods/s", line)
        if after and match:
            side = "drakit" if match.group(2) == "drakit" else "go"
            medians[f"{match.group(1)}/{side}"] = float(match.group(3))
    found = []
    for setup, fid, name in (
        ("defaults", "scheduling_default_limits", "default client limits"),
        ("no client limits", "scheduling_no_limits", "no client limits"),
    ):
        d, g = medians.get(f"{setup}/drakit"), medians.get(f"{setup}/go")
        if d is not None and g:
            found.append(figure(fid, "scheduling", f"Scheduling 1,000 pods / 500 nodes, {name}",
                                (d, g, d / g), unit="pods/s", better="higher"))  # fmt: skip
    return found


def parse_scale_points(lines: list[str]) -> list[Obj]:
    """The scale table's rows as scale points."""
    points = []
    for r in table_rows(lines):
        if len(r) == 10 and _number(r[0]) is not None:
            points.append({
                "nodes": int(r[0]), "pods": int(r[1]),
                "side": "drakit" if r[2] == "drakit" else "go",
                "pods_per_s": float(r[3]), "peak_rss_mib": float(r[6]), "cpu_s": float(r[7]),
            })  # fmt: skip
    return points


def parse_scale(lines: list[str]) -> list[Obj]:
    """Throughput, peak RSS and CPU at the largest size both sides ran."""
    points = parse_scale_points(lines)
    sizes = {(p["nodes"], p["pods"]) for p in points}
    both = [s for s in sizes if {p["side"] for p in points if (p["nodes"], p["pods"]) == s}
            == {"drakit", "go"}]  # fmt: skip
    if not both:
        return []
    nodes, pods = max(both)
    d, g = ({p["side"]: p for p in points if (p["nodes"], p["pods"]) == (nodes, pods)}[s]
            for s in ("drakit", "go"))  # fmt: skip
    label = f"Scale {nodes:,} nodes x {pods:,} pods"
    return [
        figure("scale_throughput", "scale", f"{label}: throughput",
               (d["pods_per_s"], g["pods_per_s"], d["pods_per_s"] / g["pods_per_s"]),
               unit="pods/s", better="higher"),
        figure("scale_peak_rss", "scale", f"{label}: peak RSS",
               (d["peak_rss_mib"], g["peak_rss_mib"], d["peak_rss_mib"] / g["peak_rss_mib"]),
               unit="MiB", better="lower"),
        figure("scale_cpu", "scale", f"{label}: CPU seconds",
               (d["cpu_s"], g["cpu_s"], d["cpu_s"] / max(g["cpu_s"], 0.01)),
               unit="s", better="lower"),
    ]  # fmt: skip


def parse_search(lines: list[str]) -> list[Obj]:
    """The closing line: the median per-scenario ratio and both totals."""
    pattern = re.compile(
        rf"search-heavy: median ratio python/go .* over (\d+) scenarios: {NUMBER}x.*"
        rf"go total {NUMBER}s, python total {NUMBER}s"
    )
    for line in lines:
        match = pattern.search(line)
        if match:
            name = (f"Search-heavy allocation, {match.group(1)} scenarios (total Allocate time; "
                    "ratio is the median per scenario)")  # fmt: skip
            values = (float(match.group(4)), float(match.group(3)), float(match.group(2)))
            return [figure("search_median_ratio", "search", name, values, unit="s",
                           better="lower")]  # fmt: skip
    return []


def parse_real_node_pods(lines: list[str]) -> list[Obj]:
    """Creation to Running on the real node: the medians over the rounds of p50 and p99."""
    rows = {r[0]: r for r in table_rows(lines) if len(r) == 9 and r[0] in ("drakit", "go")}
    if set(rows) != {"drakit", "go"}:
        return []
    found = []
    for column, pct in ((3, "p50"), (4, "p99")):
        d, g = float(rows["drakit"][column]), float(rows["go"][column])
        name = f"Pod creation to Running on the real node, one GPU claim, {pct}"
        found.append(figure(f"real_node_pod_running_{pct}", "real_node_pods", name,
                            (d, g, d / g), unit="s", better="lower"))  # fmt: skip
    return found


PARSERS: dict[str, Callable[[list[str]], list[Obj]]] = {
    "node_prepare": parse_node_prepare,
    "allocator": parse_allocator,
    "scheduling": parse_scheduling,
    "scale": parse_scale,
    "search": parse_search,
    "real_node_pods": parse_real_node_pods,
}


def read_report(log: str) -> tuple[list[Obj], list[Obj], str]:
    """(figures, scale points, machine) found in one ``hack/bench.sh`` report."""
    figures: list[Obj] = []
    points: list[Obj] = []
    machine = next((m.group(1) for m in map(MACHINE.match, log.splitlines()) if m), "")
    for name, lines in sections(log):
        if name in PARSERS:
            figures += PARSERS[name](lines)
        if name == "scale":
            points += parse_scale_points(lines)
    return figures, points, machine


def merge(results: Obj, figures: list[Obj], points: list[Obj], run: Obj) -> Obj:
    """``results`` with every figure and point of this run replaced or added."""
    by_id = {f["id"]: f for f in results.get("figures", [])}
    for f in figures:
        target = by_id.get(f["id"], {}).get("target")
        by_id[f["id"]] = {**f, "target": target, **run}
    key = lambda p: (p["nodes"], p["pods"], p["side"])  # noqa: E731
    by_point = {key(p): p for p in results.get("scale", [])}
    for p in points:
        by_point[key(p)] = {**p, **run}
    return {**results, "figures": list(by_id.values()),
            "scale": sorted(by_point.values(), key=key)}  # fmt: skip


def current_commit() -> str:
    """The checked-out commit, short, or "unknown" outside a git checkout."""
    out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                         capture_output=True, text=True, check=False)  # fmt: skip
    return out.stdout.strip() or "unknown"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log", type=Path, help="what hack/bench.sh printed")
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--commit", default=None, help="default: the checked-out commit")
    parser.add_argument("--date", default=None, help="default: today (UTC)")
    parser.add_argument("--command", default="make bench")
    args = parser.parse_args(argv)
    figures, points, machine = read_report(args.log.read_text())
    if not figures and not points:
        print(f"bench_results: no known figure in {args.log}; {args.results} unchanged",
              file=sys.stderr)  # fmt: skip
        return 1
    run = {"machine": machine, "commit": args.commit or current_commit(),
           "date": args.date or datetime.datetime.now(datetime.UTC).date().isoformat(),
           "command": args.command}  # fmt: skip
    results = json.loads(args.results.read_text()) if args.results.exists() else {}
    args.results.write_text(json.dumps(merge(results, figures, points, run), indent=2) + "\n")
    print(f"bench_results: {len(figures)} figures, {len(points)} scale points -> {args.results}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
