"""Host-state records: what a node writes before it changes the machine, and
the sweep that undoes it for a launcher that died."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from drakit.localcluster import hoststate
from drakit.localcluster.hoststate import NodeRecord


@pytest.fixture(autouse=True)
def private_registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DRAKIT_CACHE_DIR", str(tmp_path / "cache"))


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_record_round_trips_through_its_file(tmp_path: Path) -> None:
    record = NodeRecord(
        owner_pid=1,
        token="t1",
        work_dir=str(tmp_path),
        owns_work_dir=True,
        cgroup_name="drakit-t1",
        sysctls={"kernel.panic": "1"},
        created_paths=["/x"],
        processes=[(5, "/bin/kubelet")],
    )
    record.save()
    assert NodeRecord.load(record.path) == record


def test_sweep_removes_what_a_dead_launcher_owned_and_forgets_its_record(tmp_path: Path) -> None:
    work = tmp_path / "node"
    created = tmp_path / "created-by-node"
    (work / "sub").mkdir(parents=True)
    created.mkdir()
    record = NodeRecord(
        owner_pid=_dead_pid(),
        token="t2",
        work_dir=str(work),
        owns_work_dir=True,
        cgroup_name="drakit-test-never-made",
        created_paths=[str(created)],
    )
    record.save()
    done = hoststate.sweep_nodes()
    assert not work.exists() and not created.exists()
    assert not record.path.exists()
    assert f"removed {work}" in done


def test_sweep_leaves_a_live_launchers_node_alone(tmp_path: Path) -> None:
    work = tmp_path / "node"
    work.mkdir()
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        record = NodeRecord(
            owner_pid=sleeper.pid,
            token="t3",
            work_dir=str(work),
            owns_work_dir=True,
            cgroup_name="x",
        )
        record.save()
        assert hoststate.sweep_nodes() == []
        assert work.exists() and record.path.exists()
    finally:
        sleeper.kill()
        sleeper.wait()


def test_recorded_process_is_killed_only_while_its_executable_matches(tmp_path: Path) -> None:
    sleeper = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        wrong = NodeRecord(
            owner_pid=_dead_pid(),
            token="t4",
            work_dir=str(tmp_path / "w"),
            owns_work_dir=False,
            cgroup_name="x",
            processes=[(sleeper.pid, "/not/the/sleep/binary")],
        )
        hoststate.restore(wrong)
        assert sleeper.poll() is None  # a recycled pid is never hit
        right = NodeRecord(
            owner_pid=_dead_pid(),
            token="t5",
            work_dir=str(tmp_path / "w"),
            owns_work_dir=False,
            cgroup_name="x",
            processes=[(sleeper.pid, os.path.realpath(f"/proc/{sleeper.pid}/exe"))],
        )
        hoststate.restore(right)
        assert sleeper.wait(timeout=5) == -9
    finally:
        if sleeper.poll() is None:
            sleeper.kill()


def test_recorded_sysctl_values_are_what_the_kernel_reports() -> None:
    values = hoststate.read_sysctls(("kernel.ostype", "no.such.sysctl"))
    assert values == {"kernel.ostype": Path("/proc/sys/kernel/ostype").read_text().strip()}


def test_machine_lock_admits_one_real_node_at_a_time() -> None:
    first = hoststate.MachineLock.acquire(timeout=5)
    try:
        with pytest.raises(TimeoutError, match="another real node runs on this machine"):
            hoststate.MachineLock.acquire(timeout=0.2)
    finally:
        first.release()
    second = hoststate.MachineLock.acquire(timeout=5)
    second.release()
