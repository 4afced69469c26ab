"""The per-claim outputs' extension point: an output added to the list, and nothing else,
gets its calls from every stage in the right order: at prepare, at unprepare, when a later
output fails, after a real SIGKILL inside an output, after a reboot, and when its output
vanished. Claims on the real apiserver; files in real folders.

Every test logs the backend's and every output's calls into one list, so the order across
them is what is asserted.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from claims import DRIVER, call, create_claim, make_config, result
from conftest import EXAMPLE_CONFIG, CoreFactory
from traced_outputs import Calls, MarkerOutput, TracedBackend, outputs_with, saved_state

from drakit.kubeapi.resources import Resource
from drakit.localcluster import LocalCluster
from drakit.node_plugin.cdi import CDISpecs
from drakit.node_plugin.checkpoint import COMPLETED, STARTED
from drakit.node_plugin.driver import PluginConfig
from drakit.plugin import ClaimRef

pytestmark = pytest.mark.integration

HERE = Path(__file__).parent

#: The standard outputs' titles in write order, the added one before the CDI spec.
WRITES = ["device status", "device metadata", "marker", "CDI spec"]


def calls_of(what: str, titles: list[str], *extra: object) -> list[tuple[object, ...]]:
    return [(what, title, *extra) for title in titles]


def metadata_dir(config: PluginConfig, uid: str) -> Path:
    return config.plugin_data_dir / "dra-device-metadata" / uid


@pytest.fixture
def config(tmp_path: Path) -> PluginConfig:
    return make_config(tmp_path)


def test_an_added_output_is_written_in_list_order_and_forgotten_in_reverse(
    make_core: CoreFactory, claims: Resource, namespace: str, config: PluginConfig
) -> None:
    calls: Calls = []
    marker = MarkerOutput(config, calls)
    core = make_core(
        backend=TracedBackend(calls, EXAMPLE_CONFIG), outputs=outputs_with(config, calls, marker)
    )
    ref = create_claim(claims, namespace, [result("gpu", "gpu-0")])
    out = core.prepare([ref], call(config))[ref.uid]
    assert out.error == ""
    # Its work for after the commit runs once the claim is saved as prepared.
    assert calls == [
        ("backend prepare",),
        *calls_of("write", WRITES),
        ("after commit", "marker", COMPLETED),
    ]
    # What it added reaches the record, the CDI spec and the answer, through the core.
    entry = core.checkpoint.get(ref.uid)
    assert entry is not None and entry.extra["marker"] == "written"
    spec = json.loads(core.cdi.spec_path(ref.uid).read_text())
    marker_id = core.cdi.device_id(f"{ref.uid}-marker")
    (device,) = out.devices
    assert marker_id in device.cdi_device_ids
    assert {d["name"] for d in spec["devices"]} >= {f"{ref.uid}-marker"}

    calls.clear()
    assert core.unprepare([ref], call(config)) == {ref.uid: ""}
    assert calls == [
        ("backend unprepare", "t1"),
        *calls_of("forget", WRITES[::-1], COMPLETED),
        ("after unprepare", "marker", None),  # after the unprepare was saved
    ]
    assert not (marker.folder / ref.uid).exists()


@pytest.mark.parametrize("fail", ["claim", "bug"])
def test_a_later_output_that_fails_rolls_back_every_output_in_reverse_after_the_backend(
    make_core: CoreFactory, claims: Resource, namespace: str, config: PluginConfig, fail: str
) -> None:
    # Whether the output fails the claim as it should or by a bug, the backend gets back
    # the state it returned, and every output rolls back.
    calls: Calls = []
    marker = MarkerOutput(config, calls)
    failing = MarkerOutput(config, calls, title="late", fail=fail)
    core = make_core(
        backend=TracedBackend(calls, EXAMPLE_CONFIG),
        outputs=outputs_with(config, calls, marker, failing),
    )
    ref = create_claim(claims, namespace, [result("gpu", "gpu-1")])
    error = core.prepare([ref], call(config))[ref.uid].error
    assert "late: the disk is on fire" in error
    written = ["device status", "device metadata", "marker", "late"]
    assert calls == [
        ("backend prepare",),
        *calls_of("write", written),
        ("backend unprepare", "t1"),  # the state the backend returned
        *calls_of("roll_back", [*written, "CDI spec"][::-1]),  # every output, written or not
    ]
    assert not (marker.folder / ref.uid).exists()
    assert not metadata_dir(config, ref.uid).exists()
    assert not core.cdi.spec_path(ref.uid).exists()
    assert saved_state(config, ref.uid) is None


@pytest.fixture
def crashed(
    claims: Resource, namespace: str, config: PluginConfig, cluster: LocalCluster, tmp_path: Path
) -> ClaimRef:
    """A claim prepared in a plugin process SIGKILLed inside an output's write (after the
    backend prepared it and the device metadata and the marker were written)."""
    ref = create_claim(claims, namespace, [result("gpu", "gpu-3")])
    proc = subprocess.run(
        [sys.executable, str(HERE / "crash_in_output.py"), str(tmp_path), cluster.kubeconfig,
         ref.namespace, ref.name, ref.uid],
        env={**os.environ, "PYTHONPATH": str(HERE)},
        capture_output=True,
        timeout=120,
        check=False,
    )  # fmt: skip
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()
    assert saved_state(config, ref.uid) == STARTED
    assert (config.plugin_data_dir / "marker" / ref.uid).exists()
    assert metadata_dir(config, ref.uid).exists()
    assert not CDISpecs(config.cdi_root, DRIVER).spec_path(ref.uid).exists()
    return ref


def test_unprepare_after_a_crash_inside_an_output_forgets_the_claim_through_every_output(
    make_core: CoreFactory, config: PluginConfig, crashed: ClaimRef
) -> None:
    ref = crashed
    calls: Calls = []
    marker = MarkerOutput(config, calls)
    core = make_core(  # the restarted plugin
        backend=TracedBackend(calls, EXAMPLE_CONFIG), outputs=outputs_with(config, calls, marker)
    )
    assert core.unprepare([ref], call(config)) == {ref.uid: ""}
    assert calls == [
        ("backend unprepare", None),  # the crash took the state before it was recorded
        *calls_of("forget", WRITES[::-1], STARTED),
        ("after unprepare", "marker", None),
    ]
    assert not (marker.folder / ref.uid).exists()
    assert not metadata_dir(config, ref.uid).exists()
    assert saved_state(config, ref.uid) is None


def test_prepare_after_a_crash_inside_an_output_completes_the_claim_through_every_output(
    make_core: CoreFactory, config: PluginConfig, crashed: ClaimRef
) -> None:
    ref = crashed
    calls: Calls = []
    core = make_core(
        backend=TracedBackend(calls, EXAMPLE_CONFIG),
        outputs=outputs_with(config, calls, MarkerOutput(config, calls)),
    )
    assert core.prepare([ref], call(config))[ref.uid].error == ""
    assert calls == [
        ("backend prepare",),
        *calls_of("write", WRITES),
        ("after commit", "marker", COMPLETED),
    ]
    assert core.cdi.spec_path(ref.uid).exists()


def test_a_failing_prepare_after_a_crash_inside_an_output_rolls_back_what_the_crash_left(
    make_core: CoreFactory, config: PluginConfig, crashed: ClaimRef
) -> None:
    ref = crashed
    calls: Calls = []
    # The restarted plugin's marker output fails before it writes; the crashed attempt's
    # marker file is still there, and its roll back removes it.
    failing = MarkerOutput(config, calls, fail="claim")
    core = make_core(
        backend=TracedBackend(calls, EXAMPLE_CONFIG), outputs=outputs_with(config, calls, failing)
    )
    assert "marker: the disk is on fire" in core.prepare([ref], call(config))[ref.uid].error
    assert calls == [
        ("backend prepare",),
        *calls_of("write", WRITES[:3]),
        ("backend unprepare", "t1"),
        *calls_of("roll_back", WRITES[::-1]),
    ]
    assert not (failing.folder / ref.uid).exists()
    assert not metadata_dir(config, ref.uid).exists()
    assert saved_state(config, ref.uid) is None


def test_after_a_reboot_every_output_rolls_back_what_the_earlier_boot_left(
    make_core: CoreFactory, claims: Resource, namespace: str, config: PluginConfig
) -> None:
    calls: Calls = []
    before = make_core(
        backend=TracedBackend(calls, EXAMPLE_CONFIG),
        outputs=outputs_with(config, calls, MarkerOutput(config, calls)),
        boot_id=lambda: "boot-0",
    )
    ref = create_claim(claims, namespace, [result("gpu", "gpu-1")])
    assert before.prepare([ref], call(config))[ref.uid].error == ""
    before.stop()
    # A marker whose claim the earlier boot's checkpoint never recorded is found all the same.
    stray = "0e7c8a4e-6f35-4c53-9d1a-0a6a6f1b2c3d"
    (config.plugin_data_dir / "marker" / stray).write_text("marker")
    calls.clear()
    marker = MarkerOutput(config, calls)
    make_core(
        backend=TracedBackend(calls, EXAMPLE_CONFIG),
        outputs=outputs_with(config, calls, marker),
        boot_id=lambda: "boot-1",
    )  # started: the reboot is noticed
    assert calls == calls_of("roll_back", WRITES[::-1]) * 2  # both claims, no backend call
    assert list(marker.folder.iterdir()) == []
    assert not metadata_dir(config, ref.uid).exists()


def test_a_prepared_claim_whose_added_output_vanished_is_prepared_again(
    make_core: CoreFactory, claims: Resource, namespace: str, config: PluginConfig
) -> None:
    calls: Calls = []
    marker = MarkerOutput(config, calls)
    core = make_core(
        backend=TracedBackend(calls, EXAMPLE_CONFIG), outputs=outputs_with(config, calls, marker)
    )
    ref = create_claim(claims, namespace, [result("gpu", "gpu-2")])
    assert core.prepare([ref], call(config))[ref.uid].error == ""
    calls.clear()
    assert core.prepare([ref], call(config))[ref.uid].error == ""
    assert calls == []  # answered from the checkpoint: every output in place
    (marker.folder / ref.uid).unlink()
    assert core.prepare([ref], call(config))[ref.uid].error == ""
    assert calls == [
        ("backend prepare",),
        *calls_of("write", WRITES),
        ("after commit", "marker", COMPLETED),
    ]
    assert (marker.folder / ref.uid).exists()
