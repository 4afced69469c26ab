"""A kubeconfig's inline credentials never reach the disk, so no killed process leaves its
private key behind (the kubernetes package writes them to temporary files it deletes only
at a normal exit)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from drakit.localcluster import LocalCluster
from kubeapi.client import load_client
from kubeapi.resources import NAMESPACES, Resource

REPO = Path(__file__).resolve().parents[3]


def test_clients_from_a_kubeconfig_with_inline_credentials_write_no_file_and_work(
    cluster: LocalCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert "client-key-data" in Path(cluster.kubeconfig).read_text()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the package writes
    # Twice: the second client has the same credentials (the package caches their files).
    clients = [load_client(cluster.kubeconfig, qps=0) for _ in range(2)]
    try:
        for client in clients:
            assert Resource(client, NAMESPACES).get("default")["metadata"]["name"] == "default"
        assert list(tmp_path.iterdir()) == []
    finally:
        for client in clients:
            client.close()


def test_a_process_killed_after_loading_a_client_leaves_no_credential_file(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    code = (
        "from kubeapi.client import load_client\n"
        f"load_client({cluster.kubeconfig!r})\n"
        "print('loaded', flush=True)\n"
        "import time; time.sleep(60)\n"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=REPO,
        env={**os.environ, "TMPDIR": str(tmp_path)},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "loaded"
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
        if process.stdout is not None:
            process.stdout.close()
    assert list(tmp_path.iterdir()) == []
