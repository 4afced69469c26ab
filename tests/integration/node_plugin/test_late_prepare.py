"""A prepare of a claim that comes late, after or around that claim's unprepare, leaves
nothing on the node: no CDI spec, no metadata folder, no checkpoint entry.

The kubelet sends NodePrepareResources and NodeUnprepareResources of one claim at the same
time when its reconcile loop unprepares the claims of a pod that is gone while that pod's
worker is still in its prepare call (k8s.io/kubernetes pkg/kubelet/cm/dra/manager.go); once
the unprepare has answered, the kubelet has forgotten the claim and never unprepares it
again. Everything here runs on the real plugin's real Unix socket, claims on the real
apiserver.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

import pytest
from claims import create_claim, result
from racing import RacingPlugin, start_racing_plugin

from drakit.kubeapi.client import RateLimitedApiClient
from drakit.kubeapi.resources import Resource
from drakit.plugin import ClaimRef

pytestmark = pytest.mark.integration

T = TypeVar("T")


@pytest.fixture
def racing(api: RateLimitedApiClient) -> Iterator[Callable[..., RacingPlugin]]:
    yield from start_racing_plugin(api)


def prepare_held_at_its_get(
    plugin: RacingPlugin, ref: ClaimRef, pool: ThreadPoolExecutor
) -> tuple[Any, threading.Event]:
    """A prepare call of ``ref`` sent and held in its claim GET (so it began, and has not
    reached the lock); (its future, the event that lets it go on)."""
    reading, release = plugin.gets.hold(ref.name)
    future = pool.submit(plugin.prepare, ref)
    assert reading.wait(30), "the prepare call never read its claim"
    return future, release


def after(seconds: float, work: Callable[[], T]) -> Future[T]:
    """``work`` run on a timer thread ``seconds`` from now; its outcome as a future."""
    future: Future[T] = Future()

    def run() -> None:
        try:
            future.set_result(work())
        except BaseException as exc:
            future.set_exception(exc)

    threading.Timer(seconds, run).start()
    return future


def test_prepare_that_waited_out_the_unprepare_of_its_claim_leaves_nothing_behind(
    racing: Callable[..., RacingPlugin], claims: Resource, namespace: str
) -> None:
    plugin = racing()
    ref = create_claim(claims, namespace, [result("gpu", "gpu-0")])
    with ThreadPoolExecutor(2) as pool:
        prepare, release = prepare_held_at_its_get(plugin, ref, pool)
        # The kubelet's reconcile loop unprepares the claim meanwhile, and forgets it.
        assert plugin.unprepare(ref) == {ref.uid: ""}
        release.set()
        answer = prepare.result(30)
    assert "unprepared" in answer[ref.uid]
    assert ref.name in answer[ref.uid]
    assert plugin.left_on_node(ref.uid) == []
    assert [reason for _, reason, _, _ in plugin.events.events] == ["ClaimUnpreparedMeanwhile"]


def test_prepare_racing_an_unprepare_of_its_claim_leaves_nothing_whichever_goes_first(
    racing: Callable[..., RacingPlugin], claims: Resource, namespace: str
) -> None:
    """The class: the two calls in flight together, the prepare let go at a random moment
    around the unprepare, many times; each round, after both answered, nothing is left."""
    plugin = racing()
    shuffle = random.Random(44)
    outcomes = set()
    with ThreadPoolExecutor(4) as pool:
        for _ in range(24):
            ref = create_claim(claims, namespace, [result("gpu", "gpu-1")])
            prepare, release = prepare_held_at_its_get(plugin, ref, pool)
            # The prepare goes on a little before or after the unprepare is sent.
            jitter = shuffle.uniform(0, 0.005)
            if shuffle.random() < 0.5:
                release.set()
                unprepare = after(jitter, lambda ref=ref: plugin.unprepare(ref))
            else:
                unprepare = pool.submit(plugin.unprepare, ref)
                threading.Timer(jitter, release.set).start()
            assert unprepare.result(30) == {ref.uid: ""}
            prepared = prepare.result(30)[ref.uid] == ""
            outcomes.add(prepared)
            assert plugin.left_on_node(ref.uid) == [], f"prepare answered prepared={prepared}"
    # Both orders happened, or the test proved nothing about one of them.
    assert outcomes == {True, False}


@pytest.mark.parametrize("change", ["deleted", "recreated", "deallocated"])
def test_late_prepare_of_a_claim_gone_replaced_or_deallocated_after_its_unprepare_leaves_nothing(
    racing: Callable[..., RacingPlugin], claims: Resource, namespace: str, change: str
) -> None:
    """The kubelet's retry of a prepare arriving after the unprepare, once the claim's API
    object changed: it is refused, and the node holds nothing of the claim."""
    plugin = racing()
    ref = create_claim(claims, namespace, [result("gpu", "gpu-2")])
    assert plugin.prepare(ref) == {ref.uid: ""}
    assert plugin.unprepare(ref) == {ref.uid: ""}
    if change == "deleted":
        claims.delete(ref.name, ref.namespace)
    elif change == "recreated":
        claims.delete(ref.name, ref.namespace)
        create_claim(claims, namespace, [result("gpu", "gpu-2")], name=ref.name)
    else:
        obj = claims.get(ref.name, ref.namespace)
        obj["status"] = {}
        claims.update_status(obj)
    answer = plugin.prepare(ref)
    assert answer[ref.uid] != ""
    assert plugin.left_on_node(ref.uid) == []


def test_prepare_sent_after_the_unprepare_answered_prepares_and_the_next_unprepare_cleans_up(
    racing: Callable[..., RacingPlugin], claims: Resource, namespace: str
) -> None:
    """Not over-refusing: a prepare that begins once the unprepare has answered is a new
    prepare the kubelet keeps track of (a new pod of a shared claim), and works."""
    plugin = racing()
    ref = create_claim(claims, namespace, [result("gpu", "gpu-3")])
    assert plugin.prepare(ref) == {ref.uid: ""}
    assert plugin.unprepare(ref) == {ref.uid: ""}
    assert plugin.prepare(ref) == {ref.uid: ""}
    assert plugin.left_on_node(ref.uid) != []
    assert plugin.unprepare(ref) == {ref.uid: ""}
    assert plugin.left_on_node(ref.uid) == []
