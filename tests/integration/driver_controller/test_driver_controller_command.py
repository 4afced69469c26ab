"""``drakit driver-controller`` as a process: flags, loading the check, leader election, and a
pod bound by the real kube-scheduler once the command wrote the binding condition."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cluster_objects import Made

from drakit.kubeapi.resources import LEASES, Resource

pytestmark = pytest.mark.integration

CHECKS = Path(__file__).parent / "checks"


def command(*args: str, kubeconfig: str = "") -> list[str]:
    flags = [f"--kubeconfig={kubeconfig}"] if kubeconfig else []
    return [sys.executable, "-m", "drakit", "driver-controller", *flags, *args]


def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DRIVER_NAME", "BINDING_CHECK")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(CHECKS), env.get("PYTHONPATH"))))
    return env


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "--driver-name is required"),
        (("--driver-name=d",), "--binding-check is required"),
        (("--driver-name=d", "--binding-check=nomodule:X"), "cannot import 'nomodule'"),
        (("--driver-name=d", "--binding-check=always_ready"), "not of the form module:Class"),
        (("--driver-name=d", "--binding-check=always_ready:Missing"), "has no class 'Missing'"),
        (("--driver-name=d", "--binding-check=always_ready:NoCheckMethod"), "no check method"),
        (("--driver-name=d", "--binding-check=always_ready:AlwaysReady", "--workers=0"),
         "--workers must be at least 1"),
    ],
)  # fmt: skip
def test_bad_flags_are_one_line_naming_the_flag_and_exit_2(args: tuple[str, ...], message: str):
    done = subprocess.run(command(*args), env=environment(), capture_output=True, text=True,
                          timeout=60, check=False)  # fmt: skip
    assert done.returncode == 2
    assert message in done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


@pytest.fixture
def made(wapi: Any) -> Iterator[Made]:
    objects = Made(wapi)
    yield objects
    objects.cleanup()


def test_command_writes_the_condition_and_the_scheduler_binds_the_pod(
    *, wapi, workload_cluster, wnamespace, made, eventually, tmp_path
):
    ready = "example.com/ready"
    node = made.node(
        [{"name": "dev-0", "bindingConditions": [ready], "bindingFailureConditions": ["x.io/f"]}]
    )
    made.claim(wnamespace, "c", made.device_class())
    log = (tmp_path / "controller.log").open("w")
    process = subprocess.Popen(
        command(f"--driver-name={made.driver}", "--binding-check=always_ready:AlwaysReady",
                "--leader-elect", f"--leader-elect-namespace={wnamespace}",
                kubeconfig=workload_cluster.kubeconfig),
        env=environment(), stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        made.pod(wnamespace, "p", claims={"gpu": "c"})
        eventually(lambda: made.node_of(wnamespace, "p") == node, what="pod bound", timeout=90)
        lease = Resource(wapi, LEASES).get(
            "drakit-driver-controller-" + made.driver.replace(".", "-"), wnamespace
        )
        assert lease["spec"]["holderIdentity"]
        claim = made.claims.get("c", wnamespace)
        (entry,) = claim["status"]["devices"]
        assert entry["conditions"][0]["message"] == "c is ready"
    finally:
        process.terminate()
        code = process.wait(30)
        log.close()
    assert code == 0, (tmp_path / "controller.log").read_text()
