"""PrepareCore rollbacks hand the backend its own state; start() takes the serialize lock.

The claims come from an in-memory source (the claim checks against the real apiserver are in
tests/integration/node_plugin/); checkpoint, CDI specs and lock are real files in tmp_path.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from drakit.kubeapi.errors import NotFound
from drakit.node_plugin.backend_loader import load_backend
from drakit.node_plugin.cdi import CDIDevice
from drakit.node_plugin.checkpoint import COMPLETED, FILE_NAME, Checkpoint, ClaimEntry
from drakit.node_plugin.core import PrepareCore
from drakit.node_plugin.driver import CallContext, PluginConfig
from drakit.node_plugin.metrics import PluginMetrics
from drakit.node_plugin.serialize import SerializeLock
from drakit.plugin import (
    BackendError,
    BackendPrepared,
    ClaimRef,
    ClaimToPrepare,
    ContainerEdits,
    RequestContext,
)

DRIVER = "gpu.example.com"
NODE = "node-a"


class InMemoryClaims:
    """ResourceClaims by (namespace, name), as the API server would return them."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}

    def add_allocated(self, device: str) -> ClaimRef:
        ref = ClaimRef("default", str(uuid.uuid4()), f"claim-{uuid.uuid4().hex[:6]}")
        self.objects[(ref.namespace, ref.name)] = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": ref.name, "namespace": ref.namespace, "uid": ref.uid},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                "deviceClassName": DRIVER}}]}},
            "status": {"allocation": {"devices": {"results": [
                {"request": "gpu", "driver": DRIVER, "pool": NODE, "device": device}
            ]}}},
        }  # fmt: skip
        return ref

    def get(self, name: str, namespace: str | None = None) -> Mapping[str, Any]:
        try:
            return self.objects[(namespace or "", name)]
        except KeyError:
            raise NotFound(f"{namespace}/{name} not found", code=404) from None


class RecordingBackend:
    """The example backend, recording each unprepare's state; prepare can be made to fail."""

    def __init__(self) -> None:
        self._inner = load_backend("example", driver_name=DRIVER, node_name=NODE,
                                   config={"gpus": 2})  # fmt: skip
        self.name = "recording"
        self.config_model = self._inner.config_model
        self.unprepared: list[tuple[str, dict[str, Any]]] = []
        self.unprepared_refs: list[ClaimRef] = []
        self.contexts: list[RequestContext] = []
        self.fail_prepare = False
        self.broken_edits = False  # answer with device edits that are not ContainerEdits
        self.prepares = 0

    def discover(self) -> Any:
        return self._inner.discover()

    def subscribe(self, on_change: Any) -> None:
        self._inner.subscribe(on_change)

    def prepare(self, claim: ClaimToPrepare, context: RequestContext) -> BackendPrepared:
        self.contexts.append(context)
        if self.fail_prepare:
            raise BackendError("device busy")
        self.prepares += 1
        done = self._inner.prepare(claim, context)
        edits = ("not edits",) * len(done.device_edits) if self.broken_edits else done.device_edits
        return BackendPrepared(edits, {"token": f"t{self.prepares}"})  # type: ignore[arg-type]

    def unprepare(self, claim: ClaimRef, state: Mapping[str, Any], context: RequestContext) -> None:
        self.contexts.append(context)
        self.unprepared_refs.append(claim)
        self.unprepared.append((claim.uid, dict(state)))

    def close(self) -> None:
        self._inner.close()


@pytest.fixture
def config(tmp_path: Path) -> PluginConfig:
    for sub in ("registry", "plugins", "cdi"):
        (tmp_path / sub).mkdir()
    return PluginConfig(
        driver_name=DRIVER, node_name=NODE, kubeconfig=None, registrar_dir=tmp_path / "registry",
        plugins_dir=tmp_path / "plugins", cdi_root=tmp_path / "cdi", backend="example",
    )  # fmt: skip


@pytest.fixture
def backend() -> RecordingBackend:
    return RecordingBackend()


@pytest.fixture
def claims() -> InMemoryClaims:
    return InMemoryClaims()


@pytest.fixture
def core(config: PluginConfig, backend: RecordingBackend, claims: InMemoryClaims) -> Any:
    core = PrepareCore(config, PluginMetrics(), backend, claims, boot_id=lambda: "boot-1")  # type: ignore[arg-type]
    core.start()
    yield core
    core.stop()


def call(config: PluginConfig) -> CallContext:
    return CallContext("r1", SerializeLock(config.plugin_data_dir / "serialize.lock"))


def test_cdi_write_failure_rolls_back_with_the_state_prepare_returned(
    core: PrepareCore, backend: RecordingBackend, claims: InMemoryClaims,
    config: PluginConfig, monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    ref = claims.add_allocated("gpu-0")

    def disk_full(*args: Any, **kwargs: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(core.cdi, "write", disk_full)
    result = core.prepare([ref], call(config))[ref.uid]
    assert "cannot write CDI spec" in result.error
    assert backend.unprepared == [(ref.uid, {"token": "t1"})]
    assert core.checkpoint.get(ref.uid) is None


def test_failed_re_prepare_after_a_lost_cdi_spec_keeps_the_earlier_backend_state(
    core: PrepareCore, backend: RecordingBackend, claims: InMemoryClaims, config: PluginConfig
) -> None:
    ref = claims.add_allocated("gpu-1")
    assert core.prepare([ref], call(config))[ref.uid].error == ""
    core.cdi.spec_path(ref.uid).unlink()  # /var/run/cdi wiped without a reboot
    backend.fail_prepare = True
    assert "device busy" in core.prepare([ref], call(config))[ref.uid].error
    assert backend.unprepared == [(ref.uid, {"token": "t1"})]


def test_an_unexpected_error_after_the_backend_prepared_rolls_back_with_the_state_it_returned(
    core: PrepareCore, backend: RecordingBackend, claims: InMemoryClaims, config: PluginConfig
) -> None:
    # Not a ClaimError: a bug (here, the backend's edits break the CDI spec's rendering). The
    # backend prepared the claim all the same and must get its own state back.
    ref = claims.add_allocated("gpu-0")
    backend.broken_edits = True
    assert "prepare failed" in core.prepare([ref], call(config))[ref.uid].error
    assert backend.unprepared == [(ref.uid, {"token": "t1"})]
    assert core.checkpoint.get(ref.uid) is None
    assert not core.cdi.spec_path(ref.uid).exists()


def test_start_rewrites_the_checkpoint_only_under_the_cross_process_lock(
    config: PluginConfig, backend: RecordingBackend, claims: InMemoryClaims
) -> None:
    config.plugin_data_dir.mkdir(parents=True)
    path = config.plugin_data_dir / FILE_NAME
    earlier = Checkpoint(path, boot_id=lambda: "boot-0")
    dropped = str(uuid.uuid4())
    earlier.put(ClaimEntry(dropped, "default", "c1", COMPLETED, (), (), {}))
    earlier.save()
    written = path.read_bytes()
    metrics = PluginMetrics()
    core = PrepareCore(config, metrics, backend, claims, boot_id=lambda: "boot-1")  # type: ignore[arg-type]
    try:
        with SerializeLock(config.plugin_data_dir / "serialize.lock"):  # the other instance
            core.start()  # returns: it must not wait for the other instance's calls
            assert path.read_bytes() == written, "no rewrite without the lock"
            assert metrics.prepared_claims.get() == 0  # claims of an earlier boot
        core.unprepare([ClaimRef("default", str(uuid.uuid4()), "c2")], call(config))
        assert core.checkpoint.get(dropped) is None  # the reboot drop, done under the lock
        assert path.read_bytes() != written
    finally:
        core.stop()


def test_backend_prepare_gets_the_calls_request_id_deadline_and_a_logger_bound_to_the_claim(
    core: PrepareCore, backend: RecordingBackend, claims: InMemoryClaims, config: PluginConfig,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    ref = claims.add_allocated("gpu-0")
    lock = SerializeLock(config.plugin_data_dir / "serialize.lock")
    assert core.prepare([ref], CallContext("req-7", lock, deadline=1234.5))[ref.uid].error == ""
    (context,) = backend.contexts
    assert (context.request_id, context.deadline) == ("req-7", 1234.5)
    with caplog.at_level("INFO"):
        context.log.info("Flashed firmware", slot=3)
    (record,) = [r for r in caplog.records if r.getMessage() == "Flashed firmware"]
    assert (record.request_id, record.claim, record.claim_uid, record.slot) == (  # type: ignore[attr-defined]
        "req-7", f"{ref.namespace}/{ref.name}", ref.uid, 3,
    )  # fmt: skip


def test_unprepare_hands_the_backend_the_claim_as_it_was_prepared(
    core: PrepareCore, backend: RecordingBackend, claims: InMemoryClaims, config: PluginConfig
) -> None:
    ref = claims.add_allocated("gpu-0")
    assert core.prepare([ref], call(config))[ref.uid].error == ""
    # The kubelet's call names the claim too; the checkpoint's record is what was prepared.
    assert core.unprepare([ClaimRef(ref.namespace, ref.uid, "other")], call(config)) == {
        ref.uid: ""
    }
    assert backend.unprepared_refs == [ref]
    assert backend.unprepared == [(ref.uid, {"token": "t1"})]


def test_unprepare_names_the_claim_as_the_kubelet_does_where_the_checkpoint_has_no_name(
    core: PrepareCore, backend: RecordingBackend, config: PluginConfig
) -> None:
    uid = str(uuid.uuid4())
    core.checkpoint.put(ClaimEntry(uid, "", "", COMPLETED, (), (), {"token": "old"}))
    core.checkpoint.save()  # an entry from a checkpoint that recorded no names
    assert core.unprepare([ClaimRef("team-a", uid, "claim-a")], call(config)) == {uid: ""}
    assert backend.unprepared_refs == [ClaimRef("team-a", uid, "claim-a")]


def test_unprepare_of_a_claim_never_prepared_here_does_not_reach_the_backend(
    core: PrepareCore, backend: RecordingBackend, config: PluginConfig
) -> None:
    uid = str(uuid.uuid4())
    assert core.unprepare([ClaimRef("default", uid, "never")], call(config)) == {uid: ""}
    assert backend.unprepared_refs == [] and backend.contexts == []


def test_a_prepare_flushes_the_checkpoint_journal_once_after_the_cdi_spec_is_written(
    core: PrepareCore, claims: InMemoryClaims, config: PluginConfig,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    # The PrepareStarted record is handed to the kernel before the backend acts; one
    # flush, after the CDI spec, makes both records durable before the answer.
    warm = claims.add_allocated("gpu-0")  # the first save writes a snapshot
    assert core.prepare([warm], call(config))[warm.uid].error == ""
    ref = claims.add_allocated("gpu-1")
    events: list[str] = []
    real_fdatasync, real_write = os.fdatasync, core.cdi.write

    def fdatasync(fd: int) -> None:
        events.append("flush")
        real_fdatasync(fd)

    def write(*args: Any, **kwargs: Any) -> Path:
        started = Checkpoint(core.checkpoint.path, boot_id=lambda: "boot-1")
        started.refresh()  # a plugin restarted here would find the claim PrepareStarted
        assert not started.get(ref.uid).completed  # type: ignore[union-attr]
        events.append("cdi")
        return real_write(*args, **kwargs)

    monkeypatch.setattr(os, "fdatasync", fdatasync)
    monkeypatch.setattr(core.cdi, "write", write)
    assert core.prepare([ref], call(config))[ref.uid].error == ""
    assert events == ["cdi", "flush"]


def test_start_after_a_reboot_removes_every_cdi_spec_of_the_driver(
    config: PluginConfig, backend: RecordingBackend, claims: InMemoryClaims
) -> None:
    before = PrepareCore(config, PluginMetrics(), backend, claims, boot_id=lambda: "boot-0")  # type: ignore[arg-type]
    before.start()
    recorded = claims.add_allocated("gpu-0")
    assert before.prepare([recorded], call(config))[recorded.uid].error == ""
    before.stop()
    # A spec whose PrepareStarted record a power cut took (a CDI root on a disk).
    unrecorded = str(uuid.uuid4())
    before.cdi.write(
        unrecorded, [CDIDevice(before.cdi.device_name(unrecorded, "gpu-1"), ContainerEdits())]
    )
    after = PrepareCore(config, PluginMetrics(), backend, claims, boot_id=lambda: "boot-1")  # type: ignore[arg-type]
    after.start()
    try:
        assert list(after.cdi.read_all()) == []
        assert after.checkpoint.entries() == []
    finally:
        after.stop()


def test_claim_done_lines_come_after_the_reply_and_only_for_claims_recorded_on_disk(
    core: PrepareCore, claims: InMemoryClaims, config: PluginConfig,
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    deferred: list[Callable[[], None]] = []

    def after_reply(work: Callable[[], None]) -> bool:
        deferred.append(work)
        return True

    def done_lines() -> list[str]:
        return [r.getMessage() for r in caplog.records if r.getMessage().endswith("ed claim")]

    ref = claims.add_allocated("gpu-0")
    lock = SerializeLock(config.plugin_data_dir / "serialize.lock")
    with caplog.at_level(logging.INFO, logger="drakit.node_plugin.core"):
        assert (
            core.prepare([ref], CallContext("r1", lock, after_reply=after_reply))[ref.uid].error
            == ""
        )
        assert done_lines() == []
        deferred.pop()()
        assert done_lines() == ["Prepared claim"]
        assert core.unprepare([ref], CallContext("r2", lock, after_reply=after_reply)) == {
            ref.uid: ""
        }
        deferred.pop()()
        assert done_lines() == ["Prepared claim", "Unprepared claim"]
        # A claim whose PrepareCompleted record cannot be written is rolled back: no line.
        failing = claims.add_allocated("gpu-1")
        real_save = core.checkpoint.save

        def save(*, flush: bool = True) -> None:
            if flush:
                raise OSError(28, "No space left on device")
            real_save(flush=False)

        monkeypatch.setattr(core.checkpoint, "save", save)
        result = core.prepare([failing], CallContext("r3", lock, after_reply=after_reply))
        assert "cannot record the prepare" in result[failing.uid].error
        for work in deferred:  # whatever was left for after the reply (nothing to log)
            work()
        assert done_lines() == ["Prepared claim", "Unprepared claim"]
