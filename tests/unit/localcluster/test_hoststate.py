"""Host-state records: what a node writes before it changes the machine, and
the sweep that undoes it for a launcher that died. The sweep runs as root on
a shared machine, so it acts only on records it can trust and only on what is
still the node's."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from drakit.localcluster import hoststate
from drakit.localcluster.noderecord import HostPath, NodeRecord, RecordError
from drakit.localcluster.onefs import mounts

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="mounting or chown needs root")


@pytest.fixture(autouse=True)
def private_registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DRAKIT_CACHE_DIR", str(tmp_path / "cache"))


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def _dead_launchers_record(token: str, work: Path, created: list[Path] | None = None) -> NodeRecord:
    """A record of a launcher that is gone, owning ``work`` and the ``created`` paths."""
    return NodeRecord(
        owner_pid=_dead_pid(),
        token=token,
        work_dir=HostPath.of(work),
        owns_work_dir=True,
        cgroup_name=f"drakit-{token}",
        created_paths=[HostPath.of(p) for p in created or []],
    )


def test_record_round_trips_through_its_file(tmp_path: Path) -> None:
    record = NodeRecord(
        owner_pid=1,
        token="t1",
        work_dir=HostPath.of(tmp_path),
        owns_work_dir=True,
        cgroup_name="drakit-t1",
        sysctls={"kernel.panic": "1"},
        created_paths=[HostPath("/x", 5, 7)],
        processes=[(5, "/bin/kubelet")],
    )
    record.save()
    assert NodeRecord.load(record.path) == record
    assert record.path.stat().st_mode & 0o777 == 0o600


def test_sweep_removes_what_a_dead_launcher_owned_and_forgets_its_record(tmp_path: Path) -> None:
    work = tmp_path / "node"
    created = tmp_path / "created-by-node"
    (work / "sub").mkdir(parents=True)
    created.mkdir()
    record = _dead_launchers_record("t2", work, [created])
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
            work_dir=HostPath.of(work),
            owns_work_dir=True,
            cgroup_name="drakit-t3",
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
            work_dir=HostPath.of(tmp_path),
            owns_work_dir=False,
            cgroup_name="drakit-t4",
            processes=[(sleeper.pid, "/not/the/sleep/binary")],
        )
        hoststate.restore(wrong)
        assert sleeper.poll() is None  # a recycled pid is never hit
        right = NodeRecord(
            owner_pid=_dead_pid(),
            token="t5",
            work_dir=HostPath.of(tmp_path),
            owns_work_dir=False,
            cgroup_name="drakit-t5",
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


# -- what restore may touch ------------------------------------------------


@pytest.fixture
def mount_under(tmp_path: Path) -> Iterator[list[Path]]:
    """Mount points a test makes under ``tmp_path``; every one is unmounted afterwards."""
    made: list[Path] = []
    yield made
    for point in reversed(made):
        if str(point) in {m for m, _ in mounts()}:
            subprocess.run(["umount", str(point)], check=True)
    assert not [m for m, _ in mounts() if m.startswith(str(tmp_path))]


def _mount(kind: str, point: Path, source: Path, made: list[Path]) -> None:
    args = ["--bind", str(source)] if kind == "bind" else ["-t", "tmpfs", "drakit-test"]
    subprocess.run(["mount", *args, str(point)], check=True)
    made.append(point)


@needs_root
@pytest.mark.parametrize("kind", ["tmpfs", "bind"])
def test_restore_never_deletes_through_a_mount_that_could_not_be_unmounted(
    kind: str, tmp_path: Path, mount_under: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    work = tmp_path / "node"
    point = work / "pods" / "volume"
    point.mkdir(parents=True)
    (work / "kubelet.log").write_text("node's own file")
    source = tmp_path / "bind-source"  # same file system as the work folder
    source.mkdir()
    _mount(kind, point, source, mount_under)
    (point / "data").write_text("another file system's file")
    record = _dead_launchers_record("m1", work)
    monkeypatch.setattr(hoststate, "_unmount_under", lambda roots: [])  # the umount failed
    done = hoststate.restore(record)
    assert (point / "data").read_text() == "another file system's file"
    assert not (work / "kubelet.log").exists()
    assert f"left {point}: a mount point (another file system is mounted there)" in done


@needs_root
def test_sweep_refuses_a_record_owned_by_another_user(tmp_path: Path) -> None:
    work = tmp_path / "node"
    work.mkdir()
    record = _dead_launchers_record("o1", work)
    record.save()
    os.chown(record.path, 65534, 65534)
    done = hoststate.sweep_nodes()
    assert work.exists() and record.path.exists()
    assert any("owned by uid 65534" in line and str(record.path) in line for line in done)


def test_sweep_refuses_a_record_others_could_read_or_write(tmp_path: Path) -> None:
    work = tmp_path / "node"
    work.mkdir()
    record = _dead_launchers_record("o2", work)
    record.save()
    record.path.chmod(0o644)
    done = hoststate.sweep_nodes()
    assert work.exists() and record.path.exists()
    assert any("mode 0644, want 0600" in line for line in done)


def _rewrite(record: NodeRecord, **changes: object) -> None:
    """Change fields of ``record``'s file as JSON (bypassing save()'s own checks)."""
    data = json.loads(record.path.read_text())
    data.update(changes)
    record.path.write_text(json.dumps(data))


def test_sweep_refuses_a_record_that_fails_the_schema(tmp_path: Path) -> None:
    work = tmp_path / "node"
    created = tmp_path / "created-by-node"
    work.mkdir()
    created.mkdir()
    record = _dead_launchers_record("s1", work, [created])
    record.save()
    _rewrite(record, created_paths=[str(created)])  # a path without its recorded identity
    done = hoststate.sweep_nodes()
    assert work.exists() and created.exists() and record.path.exists()
    assert any(
        f"node record {record.path}: created_paths[0]: want an object" in line for line in done
    )


def _sleeper_in_fake_cgroup_tree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> subprocess.Popen[bytes]:
    """A process listed in a cgroup tree that stands in for the machine's hierarchies."""
    sleeper = subprocess.Popen(["sleep", "300"])
    hierarchy = tmp_path / "cgroup"
    (hierarchy / "system.slice").mkdir(parents=True)
    (hierarchy / "system.slice" / "cgroup.procs").write_text(f"{sleeper.pid}\n")
    monkeypatch.setattr(hoststate, "cgroup_hierarchies", lambda: [hierarchy])
    return sleeper


def test_sweep_refuses_a_record_with_an_empty_cgroup_name_and_kills_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sleeper = _sleeper_in_fake_cgroup_tree(tmp_path, monkeypatch)
    try:
        work = tmp_path / "node"
        work.mkdir()
        record = _dead_launchers_record("c1", work)
        record.save()
        _rewrite(record, cgroup_name="")
        done = hoststate.sweep_nodes()
        assert sleeper.poll() is None and work.exists()
        assert any("cgroup_name '' is not 'drakit-c1'" in line for line in done)
        record.cgroup_name = ""
        with pytest.raises(RecordError, match="cgroup_name '' is not 'drakit-c1'"):
            hoststate.restore(record)
        assert sleeper.poll() is None
    finally:
        sleeper.kill()
        sleeper.wait()


def test_restore_leaves_a_path_made_again_after_the_record(tmp_path: Path) -> None:
    work = tmp_path / "node"
    created = tmp_path / "var-lib-kubelet"
    work.mkdir()
    created.mkdir()
    record = _dead_launchers_record("p1", work, [created])
    # Removed and made again (by a later real install): another object at the same path.
    created.rename(tmp_path / "old")
    created.mkdir()
    (tmp_path / "old").rmdir()
    (created / "config.yaml").write_text("a real kubelet's")
    done = hoststate.restore(record)
    assert (created / "config.yaml").read_text() == "a real kubelet's"
    assert not work.exists()
    assert any(
        line.startswith(f"left {created}: not the object this node created") for line in done
    )
