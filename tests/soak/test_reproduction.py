"""What a failed soak leaves for the person who has to understand it."""

from __future__ import annotations

import json
import time
from pathlib import Path

from soak.checker import Violation
from soak.faults import plan
from soak.run import SoakOptions, SoakResult, save_reproduction
from soak.stack import SoakStack, node_names
from soak.timeline import Timeline


def test_a_violation_saves_seed_schedule_timeline_and_logs_and_says_where(
    tmp_path: Path,
) -> None:
    printed: list[str] = []
    options = SoakOptions(seed=5, duration=90.0, out_dir=tmp_path / "out", log=printed.append)
    stack = SoakStack(tmp_path / "stack")
    (stack.root / "logs").mkdir(parents=True)
    (stack.root / "logs" / "controller-0.log").write_text("acting as leader\n")
    schedule = plan(5, 90.0, node_names(3), 15.0)
    timeline = Timeline()
    timeline.add("fault", "fault", {"kind": "kill-apiserver", "target": "kube-apiserver"})
    timeline.add("api", "MODIFIED ResourceClaim", {"name": "pod-1-dev", "devices": ["a/gpu-0"]})
    timeline.add("api", "MODIFIED ResourceClaim", {"name": "unrelated", "devices": []})
    violation = Violation("device-double-allocation", "soak/pod-1-dev", "gpu-0 twice", time.time())
    timeline.add("checker", "VIOLATION", {"subject": violation.subject})
    result = SoakResult(5, 10, {}, {"kill-apiserver": 1}, {}, [violation], 0, 1.0)

    folder = save_reproduction(options, stack, timeline, schedule, result)

    assert folder.parent == tmp_path / "out"
    assert "replay: make soak DURATION=90s SEED=5" in (folder / "README.txt").read_text()
    assert (folder / "schedule.txt").read_text().splitlines() == [f.describe() for f in schedule]
    report = (folder / "violations.txt").read_text()
    assert "VIOLATION device-double-allocation soak/pod-1-dev: gpu-0 twice" in report
    assert "kill-apiserver" in report and "pod-1-dev" in report
    assert "unrelated" not in report  # API writes of other objects stay in timeline.jsonl
    lines = [json.loads(line) for line in (folder / "timeline.jsonl").read_text().splitlines()]
    assert [e["what"] for e in lines][:2] == ["fault", "MODIFIED ResourceClaim"]
    assert (folder / "logs" / "controller-0.log").read_text() == "acting as leader\n"
    assert any(str(folder) in line for line in printed)
