"""The fault schedule and the command line, without a cluster."""

from __future__ import annotations

import pytest

from soak.cli import build_parser, main, parse_duration
from soak.faults import SETTLE, Fault, plan
from soak.realnode import REAL_NODE
from soak.stack import node_names

NODES = node_names(3)


def test_the_same_seed_gives_the_same_fault_schedule() -> None:
    assert plan(7, 1800, NODES, 15.0) == plan(7, 1800, NODES, 15.0)


def test_different_seeds_give_different_fault_schedules() -> None:
    assert plan(7, 600, NODES, 15.0) != plan(8, 600, NODES, 15.0)


def test_faults_on_one_target_never_overlap_and_all_end_before_the_duration() -> None:
    faults = plan(3, 1800, NODES, 5.0)
    free_at: dict[str, float] = {}
    for fault in faults:
        assert fault.at >= free_at.get(fault.target, 0.0), fault.describe()
        assert fault.at + fault.duration < 1800
        free_at[fault.target] = fault.at + fault.duration + SETTLE


def test_a_long_schedule_has_every_kind_of_fault() -> None:
    kinds = {f.kind for f in plan(1, 1800, NODES, 15.0)}
    assert {
        "kill-apiserver",
        "kill-etcd",
        "kill-plugin",
        "rolling-update-kill",
        "kill-controller-leader",
        "pause",
        "proxy",
        "compact-etcd",
    } <= kinds


@pytest.mark.parametrize(
    ("text", "seconds"), [("90", 90), ("90s", 90), ("30m", 1800), ("1h", 3600)]
)
def test_durations_accept_seconds_minutes_and_hours(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


def test_a_bad_duration_is_refused_naming_it(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--duration", "soon"])
    assert "duration 'soon'" in capsys.readouterr().err


def test_print_schedule_prints_the_plan_without_running(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--seed", "4", "--duration", "5m", "--print-schedule"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == [f.describe() for f in plan(4, 300, NODES, 15.0)]


# -- the real node's faults (--real-node) ------------------------------------------------------

REAL_ONLY_KINDS = {
    "kill-real-plugin",
    "kill-real-kubelet",
    "kill-real-containerd",
    "rolling-update-real-plugin",
}


def _on_real_node(fault: Fault) -> bool:
    return fault.target.startswith(f"{REAL_NODE}/")


def test_the_same_seed_gives_the_same_real_node_schedule() -> None:
    assert plan(5, 600, NODES, 15.0, real_node=True) == plan(5, 600, NODES, 15.0, real_node=True)


def test_the_real_node_leaves_the_other_faults_of_a_seed_as_they_were() -> None:
    with_real = plan(5, 1800, NODES, 15.0, real_node=True)
    assert [f for f in with_real if not _on_real_node(f)] == plan(5, 1800, NODES, 15.0)
    assert any(_on_real_node(f) for f in with_real)


def test_real_node_kinds_appear_only_with_the_real_node() -> None:
    assert not {f.kind for f in plan(2, 1800, NODES, 15.0)} & REAL_ONLY_KINDS
    assert {f.kind for f in plan(2, 1800, NODES, 15.0, real_node=True)} >= REAL_ONLY_KINDS


def test_real_node_faults_target_its_components_and_never_overlap_on_one() -> None:
    faults = [f for f in plan(9, 1800, NODES, 5.0, real_node=True) if _on_real_node(f)]
    free_at: dict[str, float] = {}
    for fault in faults:
        assert fault.target in {f"{REAL_NODE}/{c}" for c in ("plugin", "kubelet", "containerd")}
        assert fault.at >= free_at.get(fault.target, 0.0), fault.describe()
        free_at[fault.target] = fault.at + fault.duration + SETTLE


def test_the_schedule_is_in_time_order_with_the_real_node() -> None:
    times = [f.at for f in plan(4, 1800, NODES, 15.0, real_node=True)]
    assert times == sorted(times)


def test_print_schedule_with_real_node_prints_its_faults(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--seed", "4", "--duration", "5m", "--real-node", "--print-schedule"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == [f.describe() for f in plan(4, 300, NODES, 15.0, real_node=True)]


def test_real_node_without_root_is_refused_before_anything_starts(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    assert main(["--seed", "4", "--duration", "60s", "--real-node"]) == 2
    assert "--real-node needs root" in capsys.readouterr().err
