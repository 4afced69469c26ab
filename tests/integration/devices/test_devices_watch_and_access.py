"""``drakit devices --watch`` prints the change an allocation makes; a user who may read
claims only in its own namespace (a real ServiceAccount token, real RBAC) gets the partial
view and the note that says what is hidden and why."""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from devices_workload import Workload
from kubernetes import client

from drakit.cli import main
from drakit.localcluster import LocalCluster

pytestmark = pytest.mark.integration

# Only keeps a broken test from hanging; the test asserts that the change shows, not how fast.
EVENTUALLY = 60.0
RBAC = "rbac.authorization.k8s.io"


class Lines:
    """The stdout lines of a running process, read by a thread."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.lines: queue.Queue[str] = queue.Queue()
        self._thread = threading.Thread(target=self._read, args=(process,), daemon=True)
        self._thread.start()

    def _read(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        with process.stdout as stream:  # closed at EOF, when the process has gone
            for line in stream:
                self.lines.put(line.rstrip("\n"))

    def wait_for(self, predicate: Any) -> tuple[str, float]:
        """The first line for which ``predicate`` holds, and the seconds it took to come."""
        start = time.monotonic()
        deadline = start + EVENTUALLY
        while True:
            try:
                line = self.lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError("the expected line never came") from None
            if predicate(line):
                return line, time.monotonic() - start


def start_watching(
    cluster: LocalCluster, workload: Workload, **options: Any
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "drakit.cli",
            "devices",
            "--watch",
            *("--kubeconfig", cluster.kubeconfig),
            *("--driver", workload.driver),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **options,
    )


@pytest.fixture
def watching(cluster: LocalCluster, workload: Workload) -> Iterator[Lines]:
    process = start_watching(cluster, workload)
    try:
        yield Lines(process)
    finally:
        process.terminate()
        process.wait(timeout=30)
        if process.stderr is not None:
            process.stderr.close()


def test_a_terminated_watch_exits_143_and_leaves_no_key_or_certificate_in_the_temp_folder(
    cluster: LocalCluster, workload: Workload, tmp_path: Path
) -> None:
    # The kubeconfig carries the client key inline; the kubernetes client copies it to a
    # temp file and deletes the copy at exit, which SIGTERM's default action skips.
    temp_folder = tmp_path / "tmp"
    temp_folder.mkdir()
    process = start_watching(cluster, workload, env={**os.environ, "TMPDIR": str(temp_folder)})
    lines = Lines(process)
    lines.wait_for(lambda line: line.split()[3:5] == ["gpu-1", "free"])
    process.terminate()
    assert process.wait(timeout=30) == 143
    assert process.stderr is not None
    with process.stderr:
        assert process.stderr.read() == ""
    assert list(temp_folder.iterdir()) == []


def test_watch_prints_the_table_again_when_a_free_device_gets_allocated(
    workload: Workload, watching: Lines
) -> None:
    watching.wait_for(lambda line: line.split()[3:5] == ["gpu-1", "free"])
    workload.claim("late", workload.namespace, [workload.result("gpu-1", "node-a")], ["pod-late"])
    line, seconds = watching.wait_for(lambda line: line.split()[3:5] == ["gpu-1", "allocated"])
    assert line.split()[5:] == [f"{workload.namespace}/late", "pod-late"]
    print(f"change shown after {seconds:.2f} s")  # for the report; not asserted


@pytest.fixture
def namespace_user_kubeconfig(
    cluster: LocalCluster, admin_api: Any, workload: Workload, tmp_path: Path
) -> Iterator[Path]:
    """A ServiceAccount in the workload's namespace that may read claims there (Role) and
    slices and classes cluster-wide (ClusterRole), nothing else; its token's kubeconfig."""
    ns, sa = workload.namespace, "viewer"
    role_name = f"devices-viewer-{uuid.uuid4().hex[:6]}"
    core, rbac = client.CoreV1Api(admin_api), client.RbacAuthorizationV1Api(admin_api)
    core.create_namespaced_service_account(ns, {"metadata": {"name": sa}})
    subject = [{"kind": "ServiceAccount", "name": sa, "namespace": ns}]
    read = ["get", "list", "watch"]
    rbac.create_namespaced_role(
        ns,
        {
            "metadata": {"name": "claims-reader"},
            "rules": [
                {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"], "verbs": read}
            ],
        },
    )
    rbac.create_namespaced_role_binding(
        ns,
        {
            "metadata": {"name": "claims-reader"},
            "roleRef": {"apiGroup": RBAC, "kind": "Role", "name": "claims-reader"},
            "subjects": subject,
        },
    )  # fmt: skip
    rbac.create_cluster_role(
        {
            "metadata": {"name": role_name},
            "rules": [
                {
                    "apiGroups": ["resource.k8s.io"],
                    "resources": ["resourceslices", "deviceclasses"],
                    "verbs": read,
                }
            ],
        }
    )
    rbac.create_cluster_role_binding(
        {
            "metadata": {"name": role_name},
            "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": role_name},
            "subjects": subject,
        }
    )  # fmt: skip
    token = core.create_namespaced_service_account_token(
        sa, ns, {"spec": {"audiences": [], "expirationSeconds": 3600}}
    ).status.token
    config = yaml.safe_load(Path(cluster.kubeconfig).read_text())
    config["users"] = [{"name": "viewer", "user": {"token": token}}]
    for context in config["contexts"]:
        context["context"]["user"] = "viewer"
        context["context"]["namespace"] = ns  # as a namespace's users usually have it
    path = tmp_path / "viewer.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    try:
        yield path
    finally:
        rbac.delete_cluster_role_binding(role_name)
        rbac.delete_cluster_role(role_name)


def test_namespace_user_sees_own_claims_and_is_told_what_is_hidden(
    workload: Workload, namespace_user_kubeconfig: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        ["devices", "--kubeconfig", str(namespace_user_kubeconfig), "--driver", workload.driver]
    )
    out = capsys.readouterr().out
    assert code == 0
    rows = {
        line.split()[3]: line.split()[4:] for line in out.splitlines()[1:] if "note:" not in line
    }
    ns = workload.namespace
    assert rows["gpu-0"] == ["allocated", f"{ns}/plain", "pod-a"]  # own claim: visible
    assert rows["gpu-4"] == ["unknown", "-", "-"]  # held from a namespace it cannot read
    assert rows["gpu-1"] == ["unknown", "-", "-"]
    assert rows["gpu-2"] == ["tainted", "-", "-"]
    notes = [line for line in out.splitlines() if line.startswith("note:")]
    assert len(notes) == 1
    assert "may not list ResourceClaims in all namespaces" in notes[0]
    assert f"showing claims of namespace {ns} only" in notes[0]
    assert "forbidden" in notes[0].lower()


def test_namespace_user_summary_leaves_free_open_and_says_why(
    workload: Workload, namespace_user_kubeconfig: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "devices",
            "--kubeconfig",
            str(namespace_user_kubeconfig),
            "--driver",
            workload.driver,
            "--summary",
            "-o",
            "json",
        ]
    )
    doc = yaml.safe_load(capsys.readouterr().out)
    assert code == 0
    node_a = next(p for p in doc["items"] if p["pool"] == "node-a")
    assert (node_a["allocated"], node_a["free"], node_a["unknown"]) == (1, None, 2)
    assert len(doc["notes"]) == 1
