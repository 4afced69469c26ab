"""The soak's checker against the real apiserver: each invariant is reported, with its name,
for a state built to break it, legal states produce nothing, and transients are held to
their bounds (a fake clock moves time; nothing here depends on how fast the machine is)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from drakit.kubeapi.client import load_client
from drakit.kubeapi.errors import ApiError
from soak.chaosproxy import ChaosProxy
from soak.checker import Bounds, Checker, Violation
from soak.checker_world import FakeClock, World, gpus, proxied_kubeconfig


@pytest.fixture
def world(api: Any, namespace: str, tmp_path: Path) -> Iterator[World]:
    built = World(api, namespace, tmp_path)
    yield built
    built.cleanup()


def invariants(violations: list[Violation]) -> list[str]:
    return sorted(v.invariant for v in violations)


def running_pod_with_prepared_claim(world: World, node: str, device: str = "gpu-0") -> Any:
    claim = world.claim(f"c-{device}")
    pod = world.pod(f"p-{device}", {"gpu": claim["metadata"]["name"]}, node, running=True)
    claim = world.allocate(claim, node, [device], reserved_for=[pod])
    world.prepare(node, claim, [device])
    return claim, pod


def test_legal_states_produce_no_violation(world: World) -> None:
    node = world.node()
    world.slice(node, gpus(2))
    running_pod_with_prepared_claim(world, node, "gpu-0")
    running_pod_with_prepared_claim(world, node, "gpu-1")
    checker = world.checker()
    assert checker.check_safety() == []
    assert checker.check_quiet(timeout=0) == []
    assert checker.wait_liveness([world.namespace], timeout=0) == []


def test_two_claims_allocated_the_same_device_are_a_double_allocation(world: World) -> None:
    node = world.node()
    world.slice(node, gpus(1))
    world.allocate(world.claim("first"), node, ["gpu-0"])
    world.allocate(world.claim("second"), node, ["gpu-0"])
    found = world.checker().check_safety()
    assert invariants(found) == ["device-double-allocation"]
    assert found[0].subject == f"{world.driver}/{node}/gpu-0"
    assert "first" in found[0].detail and "second" in found[0].detail


def test_a_multi_allocatable_device_may_be_shared_within_its_capacity(world: World) -> None:
    node = world.node()
    device = {
        "name": "gpu-0",
        "allowMultipleAllocations": True,
        "capacity": {"memory": {"value": "40Gi"}},
    }
    world.slice(node, [device])
    world.allocate(world.claim("a"), node, ["gpu-0"], consumed={"memory": "20Gi"})
    world.allocate(world.claim("b"), node, ["gpu-0"], consumed={"memory": "20Gi"})
    assert world.checker().check_safety() == []


def test_a_shared_device_consumed_beyond_its_capacity_is_reported(world: World) -> None:
    node = world.node()
    device = {
        "name": "gpu-0",
        "allowMultipleAllocations": True,
        "capacity": {"memory": {"value": "40Gi"}},
    }
    world.slice(node, [device])
    world.allocate(world.claim("a"), node, ["gpu-0"], consumed={"memory": "30Gi"})
    world.allocate(world.claim("b"), node, ["gpu-0"], consumed={"memory": "20Gi"})
    found = world.checker().check_safety()
    assert invariants(found) == ["capacity-over-consumed"]
    assert found[0].subject == f"{world.driver}/{node}/gpu-0/memory"


def partitioned_gpu(world: World, node: str) -> None:
    """One GPU of 40Gi as a pool of two slices: the counter set, and the whole GPU plus two
    20Gi halves that consume it."""
    counters = [{"name": "gpu-0-mem", "counters": {"memory": {"value": "40Gi"}}}]
    world.slice(node, [], counters=counters, count=2, suffix="-counters")

    def part(name: str, memory: str) -> dict[str, Any]:
        use = {"counterSet": "gpu-0-mem", "counters": {"memory": {"value": memory}}}
        return {"name": name, "consumesCounters": [use]}

    world.slice(
        node, [part("whole", "40Gi"), part("half-0", "20Gi"), part("half-1", "20Gi")], count=2
    )


def test_partitions_within_their_shared_counters_are_legal(world: World) -> None:
    node = world.node()
    partitioned_gpu(world, node)
    world.allocate(world.claim("a"), node, ["half-0"])
    world.allocate(world.claim("b"), node, ["half-1"])
    assert world.checker().check_safety() == []


def test_partitions_that_over_consume_a_shared_counter_are_reported(world: World) -> None:
    node = world.node()
    partitioned_gpu(world, node)
    world.allocate(world.claim("a"), node, ["whole"])
    world.allocate(world.claim("b"), node, ["half-1"])
    found = world.checker().check_safety()
    assert invariants(found) == ["counters-over-consumed"]
    assert found[0].subject == f"{node}/gpu-0-mem/memory"


def test_an_allocation_written_without_the_finalizer_is_reported(world: World) -> None:
    """A broken controller that skips the finalizer precondition writes exactly this: the
    claim can then be deleted under a running pod. The short soak fails on it."""
    node = world.node()
    world.slice(node, gpus(1))
    claim = world.claim("unprotected", finalizer=False)
    pod = world.pod("p", {"gpu": "unprotected"}, node, running=True)
    claim = world.allocate(claim, node, ["gpu-0"], reserved_for=[pod])
    world.prepare(node, claim, ["gpu-0"])
    found = world.checker().check_safety()
    assert invariants(found) == ["allocated-without-finalizer"]
    assert found[0].subject.startswith(f"{world.namespace}/unprotected ")


def test_a_claim_reserved_for_a_pod_on_another_node_is_reported_once_confirmed(
    world: World,
) -> None:
    here, there = world.node(), world.node()
    world.slice(here, gpus(1))
    world.slice(there, gpus(1))
    claim = world.claim("c")
    pod = world.pod("p", {"gpu": "c"}, there, running=False)
    world.allocate(claim, here, ["gpu-0"], reserved_for=[pod])
    clock = FakeClock()
    checker = world.checker(clock, confirm_s=2.0)
    assert checker.check_safety() == []  # seen once: two readings may disagree for a moment
    clock.advance(2.0)
    found = checker.check_safety()
    assert invariants(found) == ["reserved-claim-off-node"]
    assert there in found[0].detail


def test_a_running_pod_whose_claim_is_not_in_its_nodes_checkpoint_is_reported(world: World) -> None:
    node = world.node()
    world.slice(node, gpus(1))
    claim, pod = running_pod_with_prepared_claim(world, node)
    world.unprepare(node, claim)
    found = world.checker().check_safety()
    assert invariants(found) == ["running-pod-not-prepared"], found
    assert pod["metadata"]["uid"] in found[0].subject


def test_a_running_pod_whose_claim_is_not_reserved_for_it_is_reported(world: World) -> None:
    node = world.node()
    world.slice(node, gpus(1))
    claim = world.claim("c")
    world.pod("p", {"gpu": "c"}, node, running=True)
    claim = world.allocate(claim, node, ["gpu-0"])  # reservedFor left empty
    world.prepare(node, claim, ["gpu-0"])
    found = world.checker().check_safety()
    assert invariants(found) == ["running-pod-claim-unusable"]
    assert "not reserved" in found[0].detail


def test_a_cdi_spec_without_a_checkpoint_entry_is_reported_once_quiet(world: World) -> None:
    node = world.node()
    world.slice(node, gpus(1))
    claim = world.claim("c")
    claim = world.allocate(claim, node, ["gpu-0"])
    world.prepare(node, claim, ["gpu-0"])
    world.unprepare(node, claim)  # the spec stays behind
    found = world.checker().check_quiet(timeout=0)
    assert invariants(found) == ["cdi-without-checkpoint"]
    assert claim["metadata"]["uid"] in found[0].subject


def test_a_checkpoint_entry_without_its_cdi_spec_is_reported_once_quiet(world: World) -> None:
    node = world.node()
    world.slice(node, gpus(1))
    claim, _ = running_pod_with_prepared_claim(world, node)
    spec = next(world.views[node].cdi_dir.iterdir())
    spec.unlink()
    found = world.checker().check_quiet(timeout=0)
    assert invariants(found) == ["checkpoint-without-cdi"]
    assert claim["metadata"]["uid"] in found[0].subject


def test_a_claim_still_prepared_without_a_pod_is_reported_once_quiet(world: World) -> None:
    node = world.node()
    world.slice(node, gpus(1))
    claim = world.allocate(world.claim("c"), node, ["gpu-0"])
    world.prepare(node, claim, ["gpu-0"])
    found = world.checker().check_quiet(timeout=0)
    assert invariants(found) == ["prepared-without-pod"]


def test_a_finalizer_blocking_a_deletion_is_a_violation_only_past_the_recovery_bound(
    world: World,
) -> None:
    world.claim("c")  # finalizer on, no allocation
    world.claims.delete("c", world.namespace)  # the finalizer now blocks the deletion
    clock = FakeClock()
    checker = world.checker(clock, recovery_s=60.0)
    assert checker.check_safety() == []
    clock.advance(59.0)
    assert checker.check_safety() == []
    clock.advance(1.0)
    found = checker.check_safety()
    assert invariants(found) == ["finalizer-without-allocation"]
    assert found[0].lasted_s == 60.0
    assert "being deleted" in found[0].detail
    clock.advance(1.0)
    assert checker.check_safety() == []  # reported once per episode
    assert checker.summary()["violations"] == {"finalizer-without-allocation": 1}


def test_a_finalizer_left_on_an_unused_claim_is_legal_until_the_claim_is_deleted(
    world: World,
) -> None:
    """kube-scheduler adds the finalizer in an update of its own before the status write
    and never takes it back when that write fails: legal, and harmless until deletion."""
    world.claim("c")
    assert world.checker().check_safety() == []


def test_a_transient_that_clears_within_its_bound_is_counted_not_reported(world: World) -> None:
    world.claim("c")
    world.claims.delete("c", world.namespace)
    clock = FakeClock()
    checker = world.checker(clock, recovery_s=60.0)
    assert checker.check_safety() == []
    clock.advance(3.0)
    world.claims.patch("c", {"metadata": {"finalizers": None}}, world.namespace)  # as kcm does
    assert checker.check_safety() == []
    summary = checker.summary()
    assert summary["violations"] == {}
    assert summary["transients"] == {"finalizer-without-allocation": 1}
    assert summary["longest_transient_s"] == {"finalizer-without-allocation": 3.0}


def test_a_generated_claim_that_outlives_its_pod_is_reported_after_the_recovery_bound(
    world: World,
) -> None:
    pod = world.pod("p", {}, None, running=False)
    world.claim("p-gpu", finalizer=False, owner=pod)
    done = world.pod("done", {}, None, running=False)
    world.claim("done-gpu", finalizer=False, owner=done)
    clock = FakeClock()
    checker = world.checker(clock, recovery_s=30.0)
    assert checker.check_safety() == []  # their pods exist and may still run
    world.pods.delete("p", world.namespace, grace_period_seconds=0)
    world.pods.update_status(
        {**world.pods.get("done", world.namespace), "status": {"phase": "Succeeded"}}
    )
    assert checker.check_safety() == []  # for 0 s
    clock.advance(30.0)
    found = checker.check_safety()
    assert invariants(found) == ["orphaned-generated-claim"] * 2
    details = {v.subject.split()[0]: v.detail for v in found}
    assert "no longer exists" in details[f"{world.namespace}/p-gpu"]
    assert "Succeeded" in details[f"{world.namespace}/done-gpu"]


def test_a_node_without_slices_is_reported_after_the_self_heal_bound(world: World) -> None:
    node = world.node()
    clock = FakeClock()
    checker = world.checker(clock, slice_heal_s=30.0)
    assert checker.check_safety() == []
    clock.advance(30.0)
    found = checker.check_safety()
    assert invariants(found) == ["slice-missing"]
    assert found[0].subject == node


def test_an_incomplete_pool_counts_as_a_missing_slice(world: World) -> None:
    node = world.node()
    world.slice(node, gpus(1), count=2)  # the pool says two slices; one exists
    found = world.checker().check_safety()
    assert invariants(found) == ["slice-missing"]
    assert "1/2" in found[0].detail


def test_a_pool_replaced_by_a_newer_generation_is_judged_by_the_newer_one(world: World) -> None:
    node = world.node()
    world.slice(node, gpus(1), count=2)  # generation 1, incomplete
    world.slice(node, gpus(1), generation=2, suffix="-gen2")
    assert world.checker().check_safety() == []


def test_liveness_accepts_unschedulable_and_prepared_pods_and_reports_stuck_ones(
    world: World,
) -> None:
    node = world.node()
    world.slice(node, gpus(2))
    stuck = world.pod("stuck", {}, None, running=False)
    refused = world.pod("refused", {}, None, running=False)
    condition = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
    refused["status"] = {"conditions": [{**condition, "message": "no devices"}]}
    world.pods.update_status(refused)
    world.pod("bound-without-claims", {}, node, running=False)
    claim = world.claim("c")
    unprepared = world.pod("bound-not-prepared", {"gpu": "c"}, node, running=False)
    world.allocate(claim, node, ["gpu-0"], reserved_for=[unprepared])
    prepared = world.pod("prepared-not-marked-running", {"gpu": "d"}, node, running=False)
    claim = world.allocate(world.claim("d"), node, ["gpu-1"], reserved_for=[prepared])
    world.prepare(node, claim, ["gpu-1"])
    found = world.checker().wait_liveness([world.namespace], timeout=0)
    assert invariants(found) == ["liveness", "liveness"]
    assert sorted(v.subject for v in found) == sorted(
        f"{world.namespace}/{p['metadata']['name']}" for p in (stuck, unprepared)
    )


def test_time_without_the_apiserver_does_not_count_towards_a_bound(
    world: World, cluster: Any, tmp_path: Path
) -> None:
    """The checker reads through a chaos proxy that resets every connection for a while."""
    node = world.node()  # no slice: slice-missing from the first check
    port = int(cluster.server.rsplit(":", 1)[1])
    with ChaosProxy("127.0.0.1", port) as proxy:
        client = load_client(proxied_kubeconfig(cluster.kubeconfig, proxy.port, tmp_path), qps=0)
        clock = FakeClock()
        checker = Checker(
            client,
            world.driver,
            list(world.views.values()),
            Bounds(slice_heal_s=30.0),
            namespaces=[world.namespace],
            clock=clock,
        )
        try:
            assert checker.check_safety() == []
            proxy.set_mode("reset_all")
            clock.advance(100.0)  # the apiserver is out of reach for 100 s
            with pytest.raises(ApiError):
                checker.check_safety()
            proxy.set_mode("pass")
            clock.advance(1.0)
            assert checker.check_safety() == []  # the 101 s without a reading do not count
            clock.advance(30.0)
            found = checker.check_safety()
        finally:
            client.close()
    assert invariants(found) == ["slice-missing"] and found[0].subject == node
    assert checker.summary()["blind_s"] == 101.0


def test_safety_checks_on_a_thread_and_the_liveness_wait_run_side_by_side(world: World) -> None:
    """As the soak uses it: check_safety every so often on a thread of its own while the
    main thread waits for liveness; findings (a node without slices) keep episodes open."""
    world.node()
    world.pod("stuck", {}, None, running=False)
    checker = world.checker(slice_heal_s=3600.0)
    errors: list[BaseException] = []
    stop = threading.Event()

    def safety_loop() -> None:
        try:
            while not stop.is_set():
                assert checker.check_safety() == []
        except BaseException as err:  # reported by the assertion below
            errors.append(err)

    thread = threading.Thread(target=safety_loop)
    thread.start()
    try:
        found = [checker.wait_liveness([world.namespace], timeout=0) for _ in range(10)]
    finally:
        stop.set()
        thread.join(60)
    assert errors == []
    assert all(invariants(f) == ["liveness"] for f in found)
    summary = checker.summary()
    assert summary["violations"] == {"liveness": 10} and summary["open_findings"] == 1
