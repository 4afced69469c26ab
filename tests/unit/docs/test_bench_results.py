"""hack/bench_results.py reads a hack/bench.sh report into docs/bench/results.json.

The sample report below is each benchmark's closing output in the format its script prints
(tests/bench/bench_*.py), so a change of format there fails here first.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[3]

SAMPLE = """\
machine: 2 cores, AMD EPYC 7B13, 23 GiB
=== tests/bench/bench_node_prepare.py (load average 0.50 0.40 0.30, 10:00:00 UTC)
NodePrepareResources through the v1 socket, claim GET against the local apiserver; 5 rounds
| plugin | 1 claim p50 ms | 1 claim p99 ms | 32 claims p50 ms | 32 claims p99 ms | idle RSS MiB |
|---|---|---|---|---|---|
| drakit (Python) | 4.00 | 8.00 | 30.00 | 60.00 | 50.0 |
| Go reference | 5.00 | 10.00 | 100.00 | 120.00 | 40.0 |
1-claim p50 ratio drakit/Go per round: 0.80x, 0.80x
call without claims (gRPC transport and dispatch only), p50: drakit 0.50 ms, Go 0.40 ms (1.25x)
ratio drakit/Go (p50): 1 claim 0.80x, 32 claims 0.30x, idle RSS 1.25x
--- done (load average 0.50 0.40 0.30, 10:01:00 UTC)
=== tests/bench/bench_allocator.py (load average 0.50 0.40 0.30, 10:01:00 UTC)
class-selector: {'nodes': 500, 'devices_per_node': 8, 'pods': 2000, 'feasible_nodes': 5}
  go         100.0 pods/s     200.0 Allocate/s  (median 1.000s of 5 passes, first pass 1.1s)
  python     400.0 pods/s     800.0 Allocate/s  (median 0.250s of 5 passes, first pass 0.3s)
  ratio python/go (time per pod): 0.25x (within the 3.0x target)
  cold pass (fresh inventory, as after a slice change; indexing the slices included): \
python median 0.200s of 5, go median 0.400s, ratio python/go 0.50x
--- done (load average 0.50 0.40 0.30, 10:02:00 UTC)
=== tests/bench/bench_scheduling.py (load average 0.50 0.40 0.30, 10:02:00 UTC)
  defaults: drakit: 17.0 pods/s (creating the pods took 10.0s; drakit controller CPU 9.0s)
scheduling 1000 pods (1 device each) onto 500 nodes x 8 devices, creation to bound, \
median of 3 run(s):
  defaults: drakit: 18.0 pods/s, drakit controller CPU 9.9s
  defaults: kube-scheduler + kube-controller-manager: 10.0 pods/s, drakit controller CPU 0.0s
  no client limits: drakit: 120.0 pods/s, drakit controller CPU 6.0s
  no client limits: kube-scheduler + drakit claim generation: 60.0 pods/s, drakit controller \
CPU 1.0s
  ratio drakit / kube-scheduler (defaults): 1.80
--- done (load average 0.50 0.40 0.30, 10:03:00 UTC)
=== tests/bench/bench_search.py (load average 0.50 0.40 0.30, 10:03:00 UTC)
search-heavy: median ratio python/go (Allocate time) over 12 scenarios: 0.250x (within the \
1.0x target); go total 8.00s, python total 2.00s
--- done (load average 0.50 0.40 0.30, 10:04:00 UTC)
=== tests/bench/bench_scale.py (load average 0.50 0.40 0.30, 10:04:00 UTC)
scale: 8 devices per node, pods created at 100/s, creation to bound, default client limits
| nodes | pods | side | pods/s | p50 s | p99 s | peak RSS MiB | CPU s | requests/pod | checker |
|---|---|---|---|---|---|---|---|---|---|
| 500 | 1000 | drakit | 13.5 | 44.90 | 63.40 | 156 | 10.9 | 6.3 | ok |
| 500 | 1000 | kube-scheduler + KCM | 10.1 | 44.80 | 88.20 | 235 | 32.6 | 8.0 | ok |
| 1000 | 2000 | drakit | 14.0 | 50.00 | 70.00 | 200 | 20.0 | 6.3 | ok |
| 1000 | 2000 | kube-scheduler + KCM | 7.0 | 80.00 | 120.00 | 400 | 80.0 | 8.0 | ok |
--- done (load average 0.50 0.40 0.30, 10:05:00 UTC)
=== tests/bench/bench_real_node_pods.py (load average 0.50 0.40 0.30, 10:05:00 UTC)
creation -> Running, 20 pods per driver and round (seconds):
| driver | round p50 | round p99 | median p50 | median p99 | pooled p50 | pooled p99 | \
created -> scheduled p50 | apiserver s p50 |
|---|---|---|---|---|---|---|---|---|
| drakit | 0.67, 0.64, 0.64 | 0.74, 0.99, 1.89 | **0.64** | **0.99** | 0.64 | 0.99 | 0.04 | 1 |
| go | 0.66, 0.63, 0.63 | 0.96, 0.78, 0.84 | **0.80** | **0.90** | 0.65 | 0.84 | 0.04 | 1 |
ratio drakit/Go: p50 0.80x, p99 1.10x (medians of the rounds)
--- done (load average 0.50 0.40 0.30, 10:11:00 UTC)
"""


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "hack" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def writer() -> ModuleType:
    return _load("bench_results")


def _subset(figure: dict[str, object], **expected: object) -> dict[str, object]:
    """The entries of ``figure`` named in ``expected``, to compare with it."""
    return {key: figure.get(key) for key in expected}


def _by_id(results: dict[str, object]) -> dict[str, dict[str, object]]:
    figures = results["figures"]
    assert isinstance(figures, list)
    return {f["id"]: f for f in figures}


def test_every_benchmark_report_becomes_figures_with_the_runs_metadata(
    writer: ModuleType, tmp_path: Path
) -> None:
    log, results = tmp_path / "last-run.log", tmp_path / "results.json"
    log.write_text(SAMPLE)
    assert writer.main([str(log), "--results", str(results), "--commit", "abc1234",
                        "--date", "2026-12-03", "--command", "hack/bench.sh"]) == 0  # fmt: skip
    written = json.loads(results.read_text())
    figures = _by_id(written)
    expected = {"drakit": 4.0, "go": 5.0, "ratio": 0.8, "unit": "ms", "commit": "abc1234",
                "date": "2026-12-03"}  # fmt: skip
    assert _subset(figures["prepare_1claim_p50"], **expected) == expected
    assert figures["plugin_idle_rss"]["ratio"] == 1.25
    assert figures["prepare_empty_p50"]["ratio"] == 1.25
    assert figures["allocator_cold_class_selector"]["ratio"] == 0.5
    warm = figures["allocator_warm_class_selector"]
    assert _subset(warm, drakit=0, go=0) == {"drakit": 2.5, "go": 10.0}
    assert figures["scheduling_default_limits"]["ratio"] == 1.8
    unlimited = {"drakit": 120.0, "go": 60.0, "ratio": 2.0}
    assert _subset(figures["scheduling_no_limits"], **unlimited) == unlimited
    search = {"drakit": 2.0, "go": 8.0, "ratio": 0.25}
    assert _subset(figures["search_median_ratio"], **search) == search
    assert figures["scale_throughput"]["figure"].startswith("Scale 1,000 nodes x 2,000 pods")
    assert figures["scale_peak_rss"]["ratio"] == 0.5
    running = {"drakit": 0.64, "go": 0.8, "ratio": 0.8, "unit": "s"}
    assert _subset(figures["real_node_pod_running_p50"], **running) == running
    assert figures["real_node_pod_running_p99"]["ratio"] == 1.1
    assert all(f["machine"] == "2 cores, AMD EPYC 7B13, 23 GiB" for f in figures.values())
    assert [(p["nodes"], p["side"]) for p in written["scale"]] == [
        (500, "drakit"), (500, "go"), (1000, "drakit"), (1000, "go")]  # fmt: skip


def test_a_partial_run_replaces_only_its_own_figures_and_keeps_targets(
    writer: ModuleType, tmp_path: Path
) -> None:
    results = tmp_path / "results.json"
    kept = {"id": "scale_cpu", "ratio": 0.1, "commit": "old"}
    old = {"id": "search_median_ratio", "ratio": 0.9, "target": "<= 1.0x", "commit": "old"}
    results.write_text(json.dumps({"seeded_from": "x", "figures": [kept, old], "scale": []}))
    log = tmp_path / "search.log"
    start = SAMPLE.index("=== tests/bench/bench_search.py")
    log.write_text(SAMPLE[start : SAMPLE.index("=== tests/bench/bench_scale.py")])
    assert writer.main([str(log), "--results", str(results), "--commit", "new"]) == 0
    written = json.loads(results.read_text())
    figures = _by_id(written)
    assert figures["scale_cpu"] == kept
    search = {"ratio": 0.25, "target": "<= 1.0x", "commit": "new"}
    assert _subset(figures["search_median_ratio"], **search) == search
    assert written["seeded_from"] == "x"


def test_a_report_without_known_figures_leaves_the_file_alone_and_fails(
    writer: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "results.json"
    results.write_text('{"figures": []}')
    log = tmp_path / "empty.log"
    log.write_text("=== tests/bench/bench_search.py (load average 1 1 1, 10:00:00 UTC)\ncrashed\n")
    assert writer.main([str(log), "--results", str(results)]) == 1
    assert results.read_text() == '{"figures": []}'
    assert "no known figure" in capsys.readouterr().err


def test_the_committed_results_file_says_where_its_figures_come_from() -> None:
    results = json.loads((ROOT / "docs" / "bench" / "results.json").read_text())
    assert "seeded from run of record" in results["seeded_from"]
    keys = {"id", "figure", "drakit", "go", "ratio", "unit", "machine", "date", "commit"}
    assert all(keys <= set(f) for f in results["figures"])
    assert all(f["ratio"] > 0 for f in results["figures"])
