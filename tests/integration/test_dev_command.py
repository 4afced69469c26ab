"""``drakit dev`` brings the guide's FPGA backend up in one command: the printed recipe,
applied as printed, gets its claim generated, allocated and prepared by the kubelet's DRA
manager; the backend has a config model, so ``drakit webhook`` refuses a claim with bad
config when it is created; Ctrl-C stops every process and removes the folder."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from drakit.cli.dev import READY_LINE
from drakit.kubeapi.client import load_client
from drakit.kubeapi.resources import PODS, RESOURCE_CLAIMS, Resource
from drakit.localcluster.stack import create_objects
from drakit.testing import APIError, KubeAPI, claim, opaque_config

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"
DRIVER = "fpga.example.com"
# The first run may build the control plane's binaries and the kubelet harness.
START_TIMEOUT = 900.0
STEP_TIMEOUT = 90.0


class Lines:
    """The lines a process prints, read in a thread, so a test can wait for one."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.seen: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        assert proc.stdout is not None
        self._reader = threading.Thread(target=self._read, args=(proc.stdout,), daemon=True)
        self._reader.start()

    def _read(self, stream: object) -> None:
        for line in stream:  # type: ignore[attr-defined]
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def wait_for(self, prefix: str, timeout: float) -> str:
        while True:
            try:
                line = self._queue.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError(
                    f"no line {prefix!r}; printed:\n" + "\n".join(self.seen)
                ) from None
            if line is None:
                raise AssertionError(f"exited before {prefix!r}; printed:\n" + "\n".join(self.seen))
            self.seen.append(line)
            if line.strip().startswith(prefix):
                return line.strip()


@pytest.fixture
def dev() -> Iterator[tuple[subprocess.Popen[str], Lines]]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "drakit.cli", "dev", "--backend", "fpga_driver:FpgaBackend",
         "--driver-name", DRIVER],
        cwd=EXAMPLES,  # the author's folder: the backend's module is imported from here
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )  # fmt: skip
    try:
        yield proc, Lines(proc)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        assert proc.stdout is not None
        proc.stdout.close()


def processes_under(folder: Path) -> list[str]:
    """Command lines of running processes that mention ``folder``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if str(folder) in cmdline:
            found.append(f"{entry.name}: {cmdline}")
    return found


@pytest.mark.timeout(START_TIMEOUT + 300)
def test_dev_runs_the_guide_backend_prepares_the_printed_example_and_cleans_up_on_ctrl_c(
    dev: tuple[subprocess.Popen[str], Lines],
) -> None:
    proc, lines = dev
    lines.wait_for(READY_LINE, START_TIMEOUT)
    kubeconfig = next(ln for ln in lines.seen if "export KUBECONFIG=" in ln).split("=", 1)[1]
    example = Path(next(ln for ln in lines.seen if "kubectl apply -f" in ln).split()[-1])
    root = example.parent

    api = load_client(kubeconfig)
    objects = [o for o in yaml.safe_load_all(example.read_text()) if o]
    create_objects(api, objects, "default")
    prepared = lines.wait_for("prepared: pod default/dev-pod:", STEP_TIMEOUT)
    assert "main: k8s.fpga.example.com/claim=" in prepared  # a CDI device of the driver

    statuses = Resource(api, PODS).get("dev-pod", "default")["status"]["resourceClaimStatuses"]
    claim = Resource(api, RESOURCE_CLAIMS).get(statuses[0]["resourceClaimName"], "default")
    (result,) = claim["status"]["allocation"]["devices"]["results"]
    assert (result["driver"], result["pool"]) == (DRIVER, "dev-node")

    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=STEP_TIMEOUT) == 0
    lines.wait_for("drakit dev: stopped", STEP_TIMEOUT)
    assert not root.exists(), f"{root} left behind"
    assert processes_under(root) == []


@pytest.mark.timeout(START_TIMEOUT + 300)
def test_dev_runs_the_webhook_for_a_backend_with_a_config_model_so_bad_config_is_refused(
    dev: tuple[subprocess.Popen[str], Lines],
) -> None:
    _, lines = dev
    lines.wait_for(READY_LINE, START_TIMEOUT)
    started = [ln for ln in lines.seen if ln.strip().startswith("ok  webhook:")]
    assert started and f"invalid opaque config of {DRIVER}" in started[0], lines.seen
    assert any("drakit webhook (ValidatingWebhookConfiguration" in ln for ln in lines.seen)
    kubeconfig = next(ln for ln in lines.seen if "export KUBECONFIG=" in ln).split("=", 1)[1]
    with KubeAPI(kubeconfig) as api:
        bad = claim("bad", DRIVER, config=[opaque_config(DRIVER, {"bitstream": 7})])
        with pytest.raises(APIError) as refused:
            api.claims.create(bad, "default")
        assert "spec.devices.config[0].opaque.parameters: bitstream: Input should be a valid" in (
            refused.value.message
        )
        good = claim("good", DRIVER, config=[opaque_config(DRIVER, {"bitstream": "crypto"})])
        assert api.claims.create(good, "default")


def test_dev_refuses_a_backend_it_cannot_import_in_one_line(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "drakit.cli", "dev", "--backend", "nowhere:Backend",
         "--driver-name", DRIVER],
        cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, "PYTHONPATH": ""},
    )  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "drakit dev: --backend 'nowhere:Backend': cannot import 'nowhere': "
        "No module named 'nowhere'"
    ]
