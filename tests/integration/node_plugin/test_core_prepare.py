"""NodePrepareResources/NodeUnprepareResources on the real core, apiserver and files."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
from claims import DRIVER, call, create_claim, opaque, result
from conftest import EXAMPLE_CONFIG, CoreFactory, RecordingEvents

from drakit.backends.example import ExampleBackend
from drakit.kubeapi.client import RateLimitedApiClient
from drakit.kubeapi.events import EventRecorder
from drakit.kubeapi.resources import EVENTS, Resource
from drakit.node_plugin.backend_loader import load_backend
from drakit.node_plugin.checkpoint import FILE_NAME, read_document
from drakit.plugin import BackendContext, BackendPrepared, ClaimRef, ClaimToPrepare, RequestContext

pytestmark = pytest.mark.integration


class CountingBackend(ExampleBackend):
    """The example backend, counting prepare/unprepare calls."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.prepared: list[str] = []
        self.unprepared: list[str] = []

    def prepare(self, claim: ClaimToPrepare, context: RequestContext) -> BackendPrepared:
        self.prepared.append(claim.uid)
        return super().prepare(claim, context)

    def unprepare(self, claim: ClaimRef, state: Any, context: RequestContext) -> None:
        self.unprepared.append(claim.uid)


def counting_backend() -> CountingBackend:

    return CountingBackend(BackendContext(DRIVER, "node-a", EXAMPLE_CONFIG))


def test_prepare_returns_devices_with_cdi_ids_and_base_request_names(
    make_core: CoreFactory, claims: Resource, namespace: str
) -> None:
    core = make_core()
    ref = create_claim(
        claims,
        namespace,
        [result("gpu/big", "gpu-0"), result("other", "gpu-1")],
        requests=("gpu", "other"),
        subrequests={"gpu": ["big"]},
    )
    out = core.prepare([ref], call(core.config))[ref.uid]
    assert out.error == ""
    assert [(d.request_names, d.pool_name, d.device_name) for d in out.devices] == [
        (("gpu",), "node-a", "gpu-0"),
        (("other",), "node-a", "gpu-1"),
    ]
    assert out.devices[0].cdi_device_ids == (f"k8s.{DRIVER}/claim={ref.uid}-gpu-0",)
    assert out.devices[0].share_id is None


def test_prepare_writes_one_cdi_spec_per_claim_with_env_and_minimum_version(
    make_core: CoreFactory, claims: Resource, namespace: str
) -> None:
    core = make_core()
    ref = create_claim(claims, namespace, [result("gpu", "gpu-2")])
    core.prepare([ref], call(core.config))
    specs = list(core.config.cdi_root.iterdir())
    assert [p.name for p in specs] == [f"k8s.{DRIVER}-claim_{ref.uid}.json"]
    spec = json.loads(specs[0].read_text())
    assert spec["kind"] == f"k8s.{DRIVER}/claim"
    assert spec["cdiVersion"] == "0.6.0"  # annotations need 0.6.0
    (device,) = spec["devices"]
    assert device["name"] == f"{ref.uid}-gpu-2"
    env = device["containerEdits"]["env"]
    assert f"GPU_2_RESOURCE_CLAIM={ref.uid}" in env
    assert any(e.startswith("GPU_2=GPU-") for e in env)


def test_prepare_of_missing_claim_is_a_per_claim_error(
    make_core: CoreFactory, claims: Resource, namespace: str
) -> None:
    core = make_core()
    good = create_claim(claims, namespace, [result("gpu", "gpu-0")])
    missing = ClaimRef(namespace, "5b8e1f7e-0000-4000-8000-000000000000", "no-such-claim")
    out = core.prepare([good, missing], call(core.config))
    assert out[good.uid].error == ""
    assert "not found" in out[missing.uid].error


def test_prepare_of_replaced_claim_is_a_per_claim_error(
    make_core: CoreFactory, claims: Resource, namespace: str
) -> None:
    events = RecordingEvents()
    core = make_core(events=events)
    ref = create_claim(claims, namespace, [result("gpu", "gpu-0")])
    claims.delete(ref.name, ref.namespace)
    create_claim(claims, namespace, [result("gpu", "gpu-0")], name=ref.name)
    out = core.prepare([ref], call(core.config))[ref.uid]
    assert "re-created" in out.error and ref.uid in out.error
    assert [e[1] for e in events.events] == ["ResourceClaimReplaced"]


def test_prepare_of_unallocated_claim_is_a_per_claim_error(
    make_core: CoreFactory, claims: Resource, namespace: str
) -> None:
    core = make_core()
    ref = create_claim(claims, namespace, None)
    assert "is not allocated" in core.prepare([ref], call(core.config))[ref.uid].error


def test_prepare_of_claim_with_results_of_another_driver_only_succeeds_without_devices(
    make_core: CoreFactory, claims: Resource, namespace: str
) -> None:
    core = make_core()
    ref = create_claim(claims, namespace, [result("gpu", "nic-0", driver="nic.example.com")])
    out = core.prepare([ref], call(core.config))[ref.uid]
    assert out.error == "" and out.devices == ()
    assert list(core.config.cdi_root.iterdir()) == []


def test_prepare_of_empty_request_succeeds(make_core: CoreFactory) -> None:
    core = make_core()
    assert core.prepare([], call(core.config)) == {}


def test_prepare_with_invalid_config_is_a_per_claim_error_naming_the_field(
    make_core: CoreFactory, claims: Resource, namespace: str
) -> None:
    events = RecordingEvents()
    core = make_core(events=events)
    bad = opaque({"sharing": {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Eon"}}})
    ref = create_claim(claims, namespace, [result("gpu", "gpu-0")], config=[bad])
    error = core.prepare([ref], call(core.config))[ref.uid].error
    assert "sharing.timeSlicingConfig.interval" in error
    assert "request 'gpu'" in error
    assert events.events[0][1] == "InvalidDeviceConfig"
    assert events.events[0][0]["metadata"]["uid"] == ref.uid
    assert list(core.config.cdi_root.iterdir()) == []


@pytest.mark.parametrize(
    "case",
    [
        ({"partitionCount": "5"}, "partitionCount", "valid integer"),
        ({"partitionCount": 5.0}, "partitionCount", "valid integer"),
        ({"partitionCount": True}, "partitionCount", "valid integer"),
        ({"partition_count": 5}, "partition_count", "Extra inputs are not permitted"),
    ],
    ids=["string", "float", "bool", "snake-case"],
)
def test_prepare_validates_opaque_config_strictly_like_go(
    make_core: CoreFactory, claims: Resource, namespace: str, case: tuple[Any, str, str]
) -> None:
    parameters, field, reason = case
    core = make_core()
    sharing = {"strategy": "SpacePartitioning", "spacePartitioningConfig": parameters}
    ref = create_claim(
        claims, namespace, [result("gpu", "gpu-0")], config=[opaque({"sharing": sharing})]
    )
    error = core.prepare([ref], call(core.config))[ref.uid].error
    assert f"sharing.spacePartitioningConfig.{field}: " in error and reason in error
    assert list(core.config.cdi_root.iterdir()) == []


def test_prepare_refuses_snake_case_aliases_of_top_level_config_names(
    make_core: CoreFactory, claims: Resource, namespace: str
) -> None:
    core = make_core()
    config = opaque({"api_version": "gpu.example.com/v1", "kind": "GpuConfig"})
    ref = create_claim(claims, namespace, [result("gpu", "gpu-0")], config=[config])
    assert "api_version: Extra inputs are not permitted" in (
        core.prepare([ref], call(core.config))[ref.uid].error
    )
    exact = opaque({"apiVersion": "gpu.example.com/v1", "kind": "GpuConfig"})
    ok = create_claim(claims, namespace, [result("gpu", "gpu-1")], config=[exact])
    assert core.prepare([ok], call(core.config))[ok.uid].error == ""


def test_prepare_applies_class_config_then_claim_config_scoped_to_requests(
    make_core: CoreFactory, claims: Resource, namespace: str
) -> None:
    core = make_core()
    configs = [
        opaque({"sharing": {"strategy": "TimeSlicing"}}, source="FromClaim", requests=["a"]),
        opaque({"sharing": {"strategy": "SpacePartitioning"}}, source="FromClass"),
    ]
    ref = create_claim(
        claims,
        namespace,
        [result("a", "gpu-0"), result("b", "gpu-1")],
        requests=("a", "b"),
        config=configs,
    )
    assert core.prepare([ref], call(core.config))[ref.uid].error == ""
    spec = json.loads(core.cdi.spec_path(ref.uid).read_text())
    env_a, env_b = (d["containerEdits"]["env"] for d in spec["devices"])
    assert "GPU_0_SHARING_STRATEGY=TimeSlicing" in env_a  # the claim's config wins for "a"
    assert "GPU_1_SHARING_STRATEGY=SpacePartitioning" in env_b  # only the class config for "b"


def test_prepare_is_idempotent_and_does_not_redo_work(
    make_core: CoreFactory, claims: Resource, namespace: str
) -> None:
    backend = counting_backend()
    core = make_core(backend=backend)
    ref = create_claim(claims, namespace, [result("gpu", "gpu-0")])
    first = core.prepare([ref], call(core.config))
    second = core.prepare([ref], call(core.config))
    assert first == second
    assert backend.prepared == [ref.uid]


def test_prepared_claims_are_known_again_after_restart(
    make_core: CoreFactory, claims: Resource, namespace: str, tmp_path: Path
) -> None:
    first = make_core()
    ref = create_claim(claims, namespace, [result("gpu", "gpu-0")])
    answer = first.prepare([ref], call(first.config))
    first.stop()
    backend = counting_backend()
    second = make_core(backend=backend)
    assert second.prepare([ref], call(second.config)) == answer
    assert backend.prepared == []
    assert second.metrics.prepared_claims.get() == 1


def test_prepare_refuses_device_already_in_use_by_another_claim(
    make_core: CoreFactory, claims: Resource, namespace: str
) -> None:
    events = RecordingEvents()
    core = make_core(events=events)
    first = create_claim(claims, namespace, [result("gpu", "gpu-0")])
    second = create_claim(claims, namespace, [result("gpu", "gpu-0")])
    assert core.prepare([first], call(core.config))[first.uid].error == ""
    error = core.prepare([second], call(core.config))[second.uid].error
    assert "gpu-0" in error and "allocated exclusively" in error
    assert "held by another claim on this node" in error
    # The victim's owner must not learn which claim holds the device: neither the
    # answer nor the Event on the victim claim names the holder.
    regarding, reason, _, note = events.events[-1]
    assert reason == "DeviceAlreadyInUse"
    assert regarding["metadata"]["uid"] == second.uid
    for text in (error, note):
        assert first.name not in text and first.uid not in text
    errors = core.metrics.registry.get_sample_value(
        "drakit_node_plugin_claim_errors_total",
        {"operation": "prepare", "reason": "DeviceAlreadyInUse"},
    )
    assert errors == 1
    assert not core.cdi.spec_path(second.uid).exists()


def test_prepare_allows_shared_device_while_capacity_remains(
    make_core: CoreFactory, claims: Resource, namespace: str
) -> None:
    core = make_core()

    def share(n: int, memory: str) -> ClaimRef:
        r = result("gpu", "shared-gpu-0", shareID=f"00000000-0000-4000-8000-00000000000{n}",
                   consumedCapacity={"memory": memory})  # fmt: skip
        return create_claim(claims, namespace, [r])

    a, b, c = share(1, "40Gi"), share(2, "40Gi"), share(3, "1Gi")
    out = core.prepare([a, b, c], call(core.config))
    assert out[a.uid].error == "" and out[b.uid].error == ""
    assert out[a.uid].devices[0].share_id == "00000000-0000-4000-8000-000000000001"
    assert "capacity memory would be exceeded" in out[c.uid].error


def test_prepare_refuses_partition_overlapping_prepared_whole_gpu(
    make_core: CoreFactory, claims: Resource, namespace: str
) -> None:
    core = make_core()
    whole = create_claim(claims, namespace, [result("gpu", "pgpu-0")])
    part = create_claim(claims, namespace, [result("gpu", "pgpu-0-part-1")])
    assert core.prepare([whole], call(core.config))[whole.uid].error == ""
    error = core.prepare([part], call(core.config))[part.uid].error
    assert "counter memory of counter set node-a/pgpu-0-counters would be exceeded" in error


def test_prepare_refuses_device_unknown_to_the_backend(
    make_core: CoreFactory, claims: Resource, namespace: str
) -> None:
    core = make_core()
    ref = create_claim(claims, namespace, [result("gpu", "gpu-99")])
    assert "is not a device of this node" in core.prepare([ref], call(core.config))[ref.uid].error


def test_50_concurrent_prepares_all_succeed_with_distinct_devices(
    make_core: CoreFactory, claims: Resource, namespace: str, tmp_path: Path
) -> None:
    backend = load_backend("example", driver_name=DRIVER, node_name="node-a", config={"gpus": 50})
    core = make_core(backend=backend)
    refs = [create_claim(claims, namespace, [result("gpu", f"gpu-{i}")]) for i in range(50)]
    answers: dict[str, Any] = {}

    def prepare(ref: ClaimRef) -> None:
        answers.update(core.prepare([ref], call(core.config)))

    threads = [threading.Thread(target=prepare, args=(r,)) for r in refs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(answers) == sorted(r.uid for r in refs)
    assert all(a.error == "" for a in answers.values())
    checkpoint = read_document(core.config.plugin_data_dir / FILE_NAME)
    assert len(checkpoint["claims"]) == 50
    assert len(list(core.config.cdi_root.iterdir())) == 50


def test_unprepare_of_never_prepared_claim_succeeds(make_core: CoreFactory) -> None:
    core = make_core()
    ref = ClaimRef("default", "1d3e0c6a-0000-4000-8000-000000000000", "never")
    assert core.unprepare([ref], call(core.config)) == {ref.uid: ""}


def test_unprepare_removes_cdi_spec_checkpoint_entry_and_calls_backend(
    make_core: CoreFactory, claims: Resource, namespace: str
) -> None:
    backend = counting_backend()
    core = make_core(backend=backend)
    ref = create_claim(claims, namespace, [result("gpu", "gpu-0")])
    core.prepare([ref], call(core.config))
    assert core.unprepare([ref], call(core.config)) == {ref.uid: ""}
    assert core.unprepare([ref], call(core.config)) == {ref.uid: ""}
    assert backend.unprepared == [ref.uid]
    assert not core.cdi.spec_path(ref.uid).exists()
    checkpoint = read_document(core.config.plugin_data_dir / FILE_NAME)
    assert checkpoint["claims"] == {}
    # the device is free again for another claim
    other = create_claim(claims, namespace, [result("gpu", "gpu-0")])
    assert core.prepare([other], call(core.config))[other.uid].error == ""


def test_per_claim_failure_is_recorded_as_a_warning_event_on_the_claim(
    make_core: CoreFactory, api: RateLimitedApiClient, claims: Resource, namespace: str
) -> None:
    recorder = EventRecorder(api, reporting_controller=DRIVER, reporting_instance=f"{DRIVER}-n")
    core = make_core(events=recorder)
    bad = opaque({"sharing": {"strategy": "Sometimes"}})
    ref = create_claim(claims, namespace, [result("gpu", "gpu-0")], config=[bad])
    assert core.prepare([ref], call(core.config))[ref.uid].error
    assert recorder.flush(timeout=30)
    events = Resource(api, EVENTS).list(namespace).items
    (event,) = [e for e in events if e["regarding"].get("uid") == ref.uid]
    assert (event["type"], event["reason"], event["action"]) == (
        "Warning",
        "InvalidDeviceConfig",
        "Prepare",
    )
    assert event["regarding"]["kind"] == "ResourceClaim"
    assert "sharing.strategy" in event["note"]
