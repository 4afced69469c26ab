"""A stuck backend unprepare cannot hold the node: the unprepare call answers within
``--unprepare-timeout`` with an error naming the claim and the timeout, the claim stays
prepared, the plugin serves other claims, and the kubelet's next unprepare completes the
claim once the backend has answered. On the real plugin's real Unix socket, a backend whose
unprepare of chosen claims waits until the test lets it go, claims on the real apiserver.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from claims import create_claim, result
from racing import RacingPlugin, start_racing_plugin

from drakit.kubeapi.client import RateLimitedApiClient
from drakit.kubeapi.resources import Resource

pytestmark = pytest.mark.integration

TIMEOUT = 0.5  # the plugin's --unprepare-timeout here


@pytest.fixture
def held(api: RateLimitedApiClient) -> Iterator[Callable[..., RacingPlugin]]:
    """Plugins whose backend's unprepare of ``plugin.backend.stuck`` claims hangs until
    ``plugin.backend.release`` is set; released at teardown."""
    starts = start_racing_plugin(api, "held", unprepare_timeout_seconds=TIMEOUT)
    start = next(starts)
    plugins: list[RacingPlugin] = []

    def start_one() -> RacingPlugin:
        plugin = start()
        plugins.append(plugin)
        return plugin

    yield start_one
    for plugin in plugins:
        plugin.backend.release.set()
    next(starts, None)


def test_a_stuck_backend_unprepare_answers_a_timeout_error_naming_the_claim_and_keeps_it(
    held: Callable[..., RacingPlugin], claims: Resource, namespace: str
) -> None:
    plugin = held()
    ref = create_claim(claims, namespace, [result("gpu", "gpu-0")])
    assert plugin.prepare(ref) == {ref.uid: ""}
    plugin.backend.stuck.add(ref.uid)
    # Without the bound, this call waits for the backend until the kubelet gives up.
    error = plugin.unprepare(ref, timeout=10)[ref.uid]
    assert f"ResourceClaim {ref.namespace}/{ref.name}" in error
    assert f"--unprepare-timeout of {TIMEOUT:g}s" in error
    left = plugin.left_on_node(ref.uid)
    assert any(item.startswith("checkpoint entry") for item in left), left
    assert any(item.startswith("CDI spec") for item in left), left
    assert any(item.startswith("metadata folder") for item in left), left
    ((regarding, reason, _, note),) = plugin.events.events
    assert (regarding["uid"], reason) == (ref.uid, "UnprepareFailed")
    assert note == error


def test_the_plugin_prepares_and_unprepares_other_claims_while_a_backend_unprepare_is_stuck(
    held: Callable[..., RacingPlugin], claims: Resource, namespace: str
) -> None:
    plugin = held()
    stuck = create_claim(claims, namespace, [result("gpu", "gpu-1")])
    other = create_claim(claims, namespace, [result("gpu", "gpu-2")])
    assert plugin.prepare(stuck) == {stuck.uid: ""}
    plugin.backend.stuck.add(stuck.uid)
    assert plugin.unprepare(stuck, timeout=10)[stuck.uid] != ""
    assert plugin.prepare(other, timeout=10) == {other.uid: ""}
    assert plugin.unprepare(other, timeout=10) == {other.uid: ""}
    assert plugin.left_on_node(other.uid) == []


def test_a_timed_out_unprepare_is_completed_by_the_next_call_once_the_backend_answered(
    held: Callable[..., RacingPlugin], claims: Resource, namespace: str
) -> None:
    plugin = held()
    ref = create_claim(claims, namespace, [result("gpu", "gpu-3")])
    assert plugin.prepare(ref) == {ref.uid: ""}
    plugin.backend.stuck.add(ref.uid)
    assert plugin.unprepare(ref, timeout=10)[ref.uid] != ""
    # Still stuck: the retry waits for the same backend call, and times out again.
    assert "did not finish" in plugin.unprepare(ref, timeout=10)[ref.uid]
    plugin.backend.release.set()
    assert plugin.unprepare(ref, timeout=10) == {ref.uid: ""}
    assert plugin.left_on_node(ref.uid) == []
    assert plugin.backend.calls[ref.uid] == 1  # never given the claim twice


def test_a_prepare_of_a_claim_whose_backend_unprepare_is_still_running_is_refused(
    held: Callable[..., RacingPlugin], claims: Resource, namespace: str
) -> None:
    plugin = held()
    ref = create_claim(claims, namespace, [result("gpu", "gpu-0")])
    assert plugin.prepare(ref) == {ref.uid: ""}
    plugin.backend.stuck.add(ref.uid)
    assert plugin.unprepare(ref, timeout=10)[ref.uid] != ""
    assert "still unpreparing" in plugin.prepare(ref, timeout=10)[ref.uid]
    plugin.backend.release.set()
    assert plugin.unprepare(ref, timeout=10) == {ref.uid: ""}
    assert plugin.left_on_node(ref.uid) == []


def test_one_call_waits_for_the_backend_at_most_once_for_all_its_claims(
    held: Callable[..., RacingPlugin], claims: Resource, namespace: str
) -> None:
    """The class: however many claims of one call are stuck, the call's wait is one
    timeout; a claim whose turn comes after it is not started (the next call starts it),
    and a claim still stuck from an earlier call is waited for after the others."""
    plugin = held()
    first, second, quick = (
        create_claim(claims, namespace, [result("gpu", f"gpu-{i}")]) for i in (1, 2, 3)
    )
    assert plugin.prepare(first, second, quick) == {first.uid: "", second.uid: "", quick.uid: ""}
    plugin.backend.stuck.update({first.uid, second.uid})
    answer = plugin.unprepare(first, second, timeout=10)
    assert "did not finish" in answer[first.uid]
    assert "not started" in answer[second.uid]
    assert second.uid not in plugin.backend.calls
    # The retry: ``first`` (still running) goes last, so the others get the wait.
    answer = plugin.unprepare(quick, first, second, timeout=10)
    assert answer[quick.uid] == ""
    assert "did not finish" in answer[second.uid]
    assert answer[first.uid] != ""
    plugin.backend.release.set()
    assert plugin.unprepare(first, second) == {first.uid: "", second.uid: ""}
    for ref in (first, second, quick):
        assert plugin.left_on_node(ref.uid) == []
