"""The launcher copes with taken ports, leftovers of killed runs and
components that fail to start, and never leaves anything running."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.waiting import eventually

from drakit.localcluster import ClusterConfig, LocalCluster, MissingBinaryError, StartError, assets
from drakit.localcluster import leftovers as leftovers_module
from drakit.localcluster import process as process_module
from drakit.localcluster.leftovers import RunRecord, sweep

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); it is not running.
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _wait_gone(pids: list[int], timeout: float = 20.0) -> None:
    """Until none of ``pids`` runs; fails naming the ones still running."""
    eventually(
        lambda: not any(_alive(p) for p in pids),
        lambda: f"processes {pids} to be gone (still running: {[p for p in pids if _alive(p)]})",
        timeout,
    )


def _pin_real_binaries(monkeypatch: pytest.MonkeyPatch) -> None:
    """Point TEST_ASSET_* at the real binaries before the cache dir moves."""
    for binary in ("etcd", "kube-apiserver"):
        found = assets.find_binary(binary)
        assert found is not None, f"{binary} not built; run hack/build-binaries.sh"
        monkeypatch.setenv("TEST_ASSET_" + binary.upper().replace("-", "_"), str(found))


def test_start_retries_with_new_ports_when_a_port_is_taken_before_binding(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _pin_real_binaries(monkeypatch)
    monkeypatch.setenv("DRAKIT_CACHE_DIR", str(tmp_path / "cache"))
    squatter = socket.socket()
    squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    squatter.bind(("127.0.0.1", 0))
    squatter.listen()
    taken = squatter.getsockname()[1]
    real_free_port = process_module.free_port
    handed_out: list[int] = []

    def first_a_taken_port() -> int:
        port = taken if not handed_out else real_free_port()
        handed_out.append(port)
        return port

    monkeypatch.setattr("drakit.localcluster.cluster.free_port", first_a_taken_port)
    try:
        with LocalCluster(ClusterConfig(build_missing=False)) as cluster:
            status, _ = cluster.request("/readyz")
            assert status == 200
            assert not cluster.etcd_url.endswith(f":{taken}")
    finally:
        squatter.close()
    assert handed_out[0] == taken
    assert len(handed_out) > 3  # the first etcd attempt failed and new ports were chosen


def test_etcd_failing_to_start_gives_its_log_tail_and_leaves_nothing_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_apiserver = assets.find_binary("kube-apiserver")
    assert real_apiserver is not None
    monkeypatch.setenv("DRAKIT_CACHE_DIR", str(tmp_path / "cache"))
    fake = tmp_path / "etcd"
    fake.write_text("#!/bin/sh\necho 'etcd: cannot open data dir: disk on fire' >&2\nexit 3\n")
    fake.chmod(0o755)
    monkeypatch.setenv("TEST_ASSET_ETCD", str(fake))
    monkeypatch.setenv("TEST_ASSET_KUBE_APISERVER", str(real_apiserver))
    cluster = LocalCluster(ClusterConfig(build_missing=False))
    with pytest.raises(StartError) as err:
        cluster.start()
    assert "etcd exited with code 3" in str(err.value)
    assert "disk on fire" in str(err.value)
    assert cluster.processes == []
    assert not cluster.work_dir.exists()


def test_apiserver_failing_to_start_stops_etcd_and_reports_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _pin_real_binaries(monkeypatch)
    monkeypatch.setenv("DRAKIT_CACHE_DIR", str(tmp_path / "cache"))
    cluster = LocalCluster(
        ClusterConfig(build_missing=False, extra_apiserver_args=("--no-such-flag=1",))
    )
    started: list[int] = []
    real_spawn = cluster._spawn

    def recording_spawn(name: str, argv: list[str]) -> process_module.ManagedProcess:
        proc = real_spawn(name, argv)
        assert proc.pid is not None
        started.append(proc.pid)
        return proc

    monkeypatch.setattr(cluster, "_spawn", recording_spawn)
    with pytest.raises(StartError) as err:
        cluster.start()
    assert "kube-apiserver exited" in str(err.value)
    assert "no-such-flag" in str(err.value)
    assert len(started) == 2
    _wait_gone(started)


def test_missing_binaries_without_go_give_one_message_naming_what_to_install_or_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DRAKIT_CACHE_DIR", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("KUBEBUILDER_ASSETS", str(tmp_path / "no-assets"))
    monkeypatch.delenv("TEST_ASSET_ETCD", raising=False)
    monkeypatch.delenv("TEST_ASSET_KUBE_APISERVER", raising=False)
    monkeypatch.setattr(assets, "find_binary", lambda name, kube_version=None: None)
    cluster = LocalCluster(ClusterConfig(build_missing=False))
    with pytest.raises(MissingBinaryError) as err:
        cluster.start()
    message = str(err.value)
    assert "Go" in message
    assert "KUBEBUILDER_ASSETS" in message
    assert "TEST_ASSET_KUBE_APISERVER" in message


def test_build_script_without_go_explains_what_to_install(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "DRAKIT_CACHE_DIR": str(tmp_path / "c")}
    proc = subprocess.run(
        [str(ROOT / "hack" / "build-binaries.sh"), "etcd"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 3
    assert "Go is not installed" in proc.stderr
    assert "KUBEBUILDER_ASSETS" in proc.stderr


def test_sweep_kills_processes_and_folders_left_by_a_dead_launcher(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DRAKIT_CACHE_DIR", str(tmp_path / "cache"))
    orphan = subprocess.Popen(["sleep", "300"], start_new_session=True)
    dead_owner = subprocess.Popen(["true"])
    dead_owner.wait()
    leftover_dir = tmp_path / "drakit-cluster-leftover"
    leftover_dir.mkdir()
    record = RunRecord(
        owner_pid=dead_owner.pid,
        token="old",
        processes=[(orphan.pid, str(Path(f"/proc/{orphan.pid}/exe").readlink()))],
        owned_dirs=[str(leftover_dir)],
    )
    record.save()
    done = sweep()
    orphan.wait(timeout=10)
    assert orphan.returncode == -signal.SIGKILL
    assert not leftover_dir.exists()
    assert not record.path.exists()
    assert any("killed leftover sleep" in line for line in done)


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
def test_sweep_unmounts_what_is_mounted_inside_a_dead_launchers_folder_and_removes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DRAKIT_CACHE_DIR", str(tmp_path / "cache"))
    dead_owner = subprocess.Popen(["true"])
    dead_owner.wait()
    leftover_dir = tmp_path / "soak-leftover"
    point = leftover_dir / "node" / "plugin-data"
    point.mkdir(parents=True)
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "drakit-test", str(point)], check=True
    )
    try:
        (point / "checkpoint.json").write_text("{}")
        RunRecord(owner_pid=dead_owner.pid, token="m", owned_dirs=[str(leftover_dir)]).save()
        done = sweep()
        assert not leftover_dir.exists()
        assert f"unmounted leftover {point}" in done
    finally:
        if point in leftovers_module.mount_points_under(tmp_path):
            subprocess.run(["umount", "-l", str(point)], check=False)


def test_mount_points_are_read_deepest_first_with_escaped_spaces(tmp_path: Path) -> None:
    info = tmp_path / "mountinfo"
    info.write_text(
        "22 1 0:20 / /tmp/x rw - tmpfs tmpfs rw\n"
        "23 22 0:21 / /tmp/x/a rw - tmpfs t rw\n"
        "24 23 0:22 / /tmp/x/a/b\\040c rw - tmpfs t rw\n"
        "25 1 0:23 / /tmp/xy rw - tmpfs t rw\n"
    )
    found = leftovers_module.mount_points_under(Path("/tmp/x"), info)
    assert found == [Path("/tmp/x/a/b c"), Path("/tmp/x/a")]


def test_sweep_spares_a_recycled_pid_running_another_program(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DRAKIT_CACHE_DIR", str(tmp_path / "cache"))
    bystander = subprocess.Popen(["sleep", "300"])
    dead_owner = subprocess.Popen(["true"])
    dead_owner.wait()
    RunRecord(
        owner_pid=dead_owner.pid, token="x", processes=[(bystander.pid, "/usr/bin/etcd-not-me")]
    ).save()
    sweep()
    assert bystander.poll() is None
    bystander.kill()
    bystander.wait()


def test_components_die_with_a_launcher_killed_by_sigkill(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _pin_real_binaries(monkeypatch)
    env = {**os.environ, "DRAKIT_CACHE_DIR": str(tmp_path / "cache")}
    # The folder lives under tmp_path: a SIGKILLed launcher cannot remove it, and the sweep
    # that would is pointed at this test's own registry.
    work_dir = str(tmp_path / "lc")
    script = (
        "from pathlib import Path\n"
        "from drakit.localcluster import LocalCluster, ClusterConfig\n"
        f"config = ClusterConfig(build_missing=False, work_dir=Path({work_dir!r}))\n"
        "c = LocalCluster(config); c.start()\n"
        "print(' '.join(str(p.pid) for p in c.processes), flush=True)\n"
        "import time; time.sleep(300)\n"
    )
    launcher = subprocess.Popen(
        [sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, text=True
    )
    assert launcher.stdout is not None
    pids = [int(p) for p in launcher.stdout.readline().split()]
    assert len(pids) == 2
    launcher.kill()
    launcher.wait()
    launcher.stdout.close()
    _wait_gone(pids)


def test_local_cluster_script_runs_in_the_background_until_down(tmp_path: Path) -> None:
    folder = tmp_path / "lc"
    up = subprocess.run(
        [str(ROOT / "hack" / "local-cluster.sh"), "up", str(folder)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert up.returncode == 0, up.stderr
    assert f"KUBECONFIG={folder / 'kubeconfig'}" in up.stdout
    launcher_pid = int((folder / "launcher.pid").read_text())
    from kubernetes import client, config  # noqa: PLC0415

    api = client.CoreV1Api(config.new_client_from_config(config_file=str(folder / "kubeconfig")))
    assert "default" in [ns.metadata.name for ns in api.list_namespace().items]
    down = subprocess.run(
        [str(ROOT / "hack" / "local-cluster.sh"), "down", str(folder)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert down.returncode == 0, down.stderr
    _wait_gone([launcher_pid])


def test_stop_removes_the_temporary_work_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _pin_real_binaries(monkeypatch)
    monkeypatch.setenv("DRAKIT_CACHE_DIR", str(tmp_path / "cache"))
    cluster = LocalCluster(ClusterConfig(build_missing=False))
    cluster.start()
    pids = [p.pid for p in cluster.processes if p.pid is not None]
    cluster.stop()
    assert not cluster.work_dir.exists()
    _wait_gone(pids)


def test_starting_a_second_cluster_leaves_the_first_one_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _pin_real_binaries(monkeypatch)
    monkeypatch.setenv("DRAKIT_CACHE_DIR", str(tmp_path / "cache"))
    with LocalCluster(ClusterConfig(build_missing=False)) as first:
        with LocalCluster(ClusterConfig(build_missing=False)) as second:
            assert second.request("/readyz")[0] == 200
        assert first.request("/readyz")[0] == 200
        assert Path(first.kubeconfig).is_file()


def test_sweep_removes_a_record_of_this_pid_left_by_an_earlier_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DRAKIT_CACHE_DIR", str(tmp_path / "cache"))
    leftover_dir = tmp_path / "drakit-cluster-recycled"
    leftover_dir.mkdir()
    stale = RunRecord(owner_pid=os.getpid(), token="earlier", owned_dirs=[str(leftover_dir)])
    stale.save()
    leftovers_module._LIVE_TOKENS.discard("earlier")  # as if written by another process
    sweep()
    assert not leftover_dir.exists()
    assert not stale.path.exists()


def test_restarting_etcd_and_the_apiserver_keeps_ports_and_stored_objects(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _pin_real_binaries(monkeypatch)
    monkeypatch.setenv("DRAKIT_CACHE_DIR", str(tmp_path / "cache"))
    with LocalCluster(ClusterConfig(build_missing=False)) as cluster:
        body = {"metadata": {"name": "kept"}}
        assert cluster.request("/api/v1/namespaces", "POST", body)[0] == 201
        server, old_pids = cluster.server, {p.name: p.pid for p in cluster.processes}
        cluster.restart("etcd")
        cluster.restart("kube-apiserver")
        new_pids = {p.name: p.pid for p in cluster.processes}
        assert all(new_pids[name] != old_pids[name] for name in old_pids)
        assert cluster.server == server
        _wait_gone([pid for pid in old_pids.values() if pid is not None])
        assert cluster.request("/api/v1/namespaces/kept")[0] == 200


def test_restarting_an_unknown_component_names_the_ones_there_are(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _pin_real_binaries(monkeypatch)
    monkeypatch.setenv("DRAKIT_CACHE_DIR", str(tmp_path / "cache"))
    with (
        LocalCluster(ClusterConfig(build_missing=False)) as cluster,
        pytest.raises(KeyError, match=r"kube-scheduler.*there are: etcd, kube-apiserver"),
    ):
        cluster.restart("kube-scheduler")


def test_a_scheduler_started_later_uses_the_kubeconfig_it_is_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _pin_real_binaries(monkeypatch)
    scheduler = assets.find_binary("kube-scheduler")
    assert scheduler is not None, "kube-scheduler not built; run hack/build-binaries.sh kube"
    monkeypatch.setenv("TEST_ASSET_KUBE_SCHEDULER", str(scheduler))
    monkeypatch.setenv("DRAKIT_CACHE_DIR", str(tmp_path / "cache"))
    with LocalCluster(ClusterConfig(build_missing=False)) as cluster:
        own = tmp_path / "scheduler.kubeconfig"
        cluster.write_kubeconfig(own, cluster.server)
        cluster.start_scheduler(str(own))
        assert f"--kubeconfig={own}" in cluster.component("kube-scheduler").argv
        assert cluster.component("kube-scheduler").running()
