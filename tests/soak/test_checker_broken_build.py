"""The checker catches a deliberately broken controller build (issue 16's acceptance): the
claim writer of drakit's controller, with the finalizer precondition dropped from its
allocation write, runs into the seed race (the finalizer goes between computing and
writing an allocation) and leaves an allocated claim that its deletion no longer waits
for. The intact writer, in the same race, leaves no violation."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from drakit.controller.claimwrites import ClaimWriter
from drakit.kubeapi.objects import KubeObject
from soak.checker_world import World


class WriterWithoutFinalizerPrecondition(ClaimWriter):
    """The broken build: the allocation write no longer carries the resourceVersion the
    allocation was decided from (the version that had the finalizer), so it lands whatever
    changed meanwhile."""

    @staticmethod
    def _allocation_body(
        claim: KubeObject, allocation: dict[str, Any], consumer: dict[str, str]
    ) -> KubeObject:
        body = ClaimWriter._allocation_body(claim, allocation, consumer)
        metadata = {k: v for k, v in body["metadata"].items() if k != "resourceVersion"}
        return {**body, "metadata": metadata}


@pytest.fixture
def world(api: Any, namespace: str, tmp_path: Path) -> Iterator[World]:
    built = World(api, namespace, tmp_path)
    yield built
    built.cleanup()


@pytest.mark.parametrize(
    ("writer_class", "expected"),
    [(ClaimWriter, []), (WriterWithoutFinalizerPrecondition, ["allocated-without-finalizer"])],
    ids=["intact-build", "broken-build"],
)
def test_the_seed_race_is_a_violation_only_with_the_finalizer_precondition_dropped(
    world: World, writer_class: type[ClaimWriter], expected: list[str]
) -> None:
    node = world.node()
    world.slice(node, [{"name": "gpu-0"}])
    claim = world.claim("c", finalizer=False)
    writer = writer_class(world.claims)
    computed_from = writer.add_finalizer(claim)  # the scheduler's copy: finalizer present
    writer.remove_finalizer(world.claims.get("c", world.namespace))  # the lifecycle finishes
    result = {"request": "gpu", "driver": world.driver, "pool": node, "device": "gpu-0"}
    allocation = {"devices": {"results": [result]}}
    consumer = {"resource": "pods", "name": "p", "uid": str(uuid.uuid4())}
    writer.allocate_and_reserve(computed_from, allocation, consumer)
    found = world.checker().check_safety()
    assert sorted(v.invariant for v in found) == expected
