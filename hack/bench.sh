#!/usr/bin/env bash
# `make bench`: runs every benchmark under tests/bench/ (bench_*.py) with the
# project's virtual environment and prints their reports. Benchmarks compare
# drakit with the Go reference built in the same run where one exists.
#   hack/bench.sh [NAME...]   e.g. hack/bench.sh control_plane allocator
# real_node and real_node_pods start a real node (kubelet, containerd, runc): as root only
# (skipped otherwise), one real node per machine at a time. real_node_pods times pods with
# one GPU claim each from creation to Running, drakit's example driver against upstream's
# Go driver on the same node (issue 34); it builds what hack/test-reference.sh builds.
#
# The report is also kept in build/bench/last-run.log; at the end hack/bench_results.py reads
# it into docs/bench/results.json (the figures this run measured replace the earlier ones,
# with this run's machine, date and commit) and hack/bench_plots.py redraws the SVGs of
# docs/benchmarks.md from that file. BENCH_RESULTS=0 leaves both alone.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="$ROOT/.venv/bin/python"
LOG="$ROOT/build/bench/last-run.log"
mkdir -p "$(dirname "$LOG")"

# run_all NAME...: every benchmark's report; non-zero when one failed.
run_all() {
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(free -g | awk '/Mem:/{print $2}') GiB"
if [[ $# -gt 0 ]]; then
  scripts=(); for n in "$@"; do scripts+=("tests/bench/bench_$n.py"); done
else
  # The 5,000-node scale benchmark goes last: it frees several GiB and deletes a large
  # etcd data folder on the way out, and nothing measured after it should pay for that.
  scripts=(); last=()
  for script in tests/bench/bench_*.py; do
    if [[ "$script" == tests/bench/bench_scale.py ]]; then last+=("$script"); else scripts+=("$script"); fi
  done
  scripts+=("${last[@]}")
fi
status=0
for script in "${scripts[@]}"; do
  # The load average before and after each benchmark: on a shared machine it says how
  # far the absolute figures can be trusted (the ratios are measured in the same run).
  echo "=== $script (load average $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%H:%M:%S) UTC)"
  "$PY" "$script" || { echo "bench: $script failed" >&2; status=1; }
  echo "--- done (load average $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%H:%M:%S) UTC)"
done
return $status
}

set +e
run_all "$@" 2>&1 | tee "$LOG"
status=${PIPESTATUS[0]}
set -e
if [[ "${BENCH_RESULTS:-1}" != 0 ]]; then
  "$PY" hack/bench_results.py "$LOG" --command "hack/bench.sh $*" && "$PY" hack/bench_plots.py \
    || { echo "bench: results file or plots not updated" >&2; status=1; }
fi
exit $status
