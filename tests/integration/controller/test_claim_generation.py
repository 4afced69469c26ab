"""Claim generation against a real apiserver: the shape of generated claims, names, the pod
status write, recovery after a lost status write, and missing templates."""

from __future__ import annotations

import logging
import uuid
from typing import Any

import pytest
from controller_harness import RunningController

from drakit.controller.app import Controller
from drakit.controller.claimgen import claim_from_template
from drakit.controller.config import ClaimGeneration, ControllerConfig
from drakit.controller.naming import FINALIZER, POD_CLAIM_NAME_ANNOTATION
from drakit.kubeapi.errors import ServerError
from drakit.kubeapi.events import EventRecorder
from drakit.kubeapi.resources import EVENTS, PODS, PatchType, Resource

pytestmark = pytest.mark.integration


def pod_status_claims(objects: Any, namespace: str, pod: str) -> dict[str, str]:
    status = objects.pods.get(pod, namespace).get("status") or {}
    return {
        e["name"]: e.get("resourceClaimName") for e in status.get("resourceClaimStatuses") or ()
    }


def test_generated_claim_copies_template_and_is_owned_by_the_pod(
    objects, namespace, start_controller, eventually
):
    cls = objects.device_class()
    objects.template(namespace, "tpl", cls, labels={"team": "a"}, annotations={"note": "x"})
    running = start_controller()
    pod = objects.pod(namespace, "p", templates={"gpu": "tpl"})
    statuses = eventually(lambda: pod_status_claims(objects, namespace, "p"))
    (claim,) = objects.pod_claims(namespace, "p")
    assert statuses == {"gpu": claim["metadata"]["name"]}
    assert claim["metadata"]["generateName"] == "p-gpu-"
    assert claim["metadata"]["labels"] == {"team": "a"}
    assert claim["metadata"]["annotations"] == {"note": "x", POD_CLAIM_NAME_ANNOTATION: "gpu"}
    (owner,) = claim["metadata"]["ownerReferences"]
    assert owner == {"apiVersion": "v1", "kind": "Pod", "name": "p",
                     "uid": pod["metadata"]["uid"], "controller": True}  # fmt: skip
    assert claim["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] == cls
    cached = running.controller.caches.template(namespace, "tpl")
    assert POD_CLAIM_NAME_ANNOTATION not in cached["spec"]["metadata"]["annotations"]


def test_recording_the_claims_keeps_the_rest_of_the_pod_status(
    objects, namespace, start_controller, eventually
):
    # The claim names are recorded by replacing the status (a PUT at the cached version):
    # what another writer put there before must survive it.
    cls = objects.device_class()
    objects.template(namespace, "tpl", cls)
    pod = objects.pod(namespace, "p", templates={"gpu": "tpl"})
    condition = {"type": "example.com/Checked", "status": "True", "reason": "Test"}
    objects.pods.patch_status(
        pod, {"status": {"conditions": [condition]}}, patch_type=PatchType.MERGE
    )
    start_controller()
    eventually(lambda: pod_status_claims(objects, namespace, "p"))
    status = objects.pods.get("p", namespace)["status"]
    assert [c for c in status["conditions"] if c["type"] == condition["type"]] == [
        {**condition, "lastProbeTime": None, "lastTransitionTime": None}
    ]


def test_long_pod_and_claim_names_are_truncated_proportionally(
    objects, namespace, start_controller, eventually
):
    cls = objects.device_class()
    objects.template(namespace, "tpl", cls)
    start_controller()
    pod_name, claim_name = "p" * 40, "c" * 30
    objects.pod(namespace, pod_name, templates={claim_name: "tpl"})
    eventually(lambda: pod_status_claims(objects, namespace, pod_name))
    (claim,) = objects.pod_claims(namespace, pod_name)
    # 72 characters -> 40*57//72 = 31 and 30*57//72 = 23, no trailing dash
    assert claim["metadata"]["generateName"] == "p" * 31 + "-" + "c" * 23
    assert len(claim["metadata"]["name"]) == 60


def _pod_name_cut_after(char: str, length: int, claim_name: str) -> str:
    """A pod name of ``length`` whose proportional cut lands right after ``char``."""
    cut = length * 57 // (length + len(claim_name) + 2)
    return "a" * (cut - 1) + char + "b" * (length - cut)


LONG_NAMES = {
    "dot-at-cut-longest": (_pod_name_cut_after(".", 253, "c" * 63), "c" * 63),
    "dash-at-cut-longest": (_pod_name_cut_after("-", 253, "c" * 63), "c" * 63),
    "dot-at-cut": (_pod_name_cut_after(".", 100, "gpu"), "gpu"),
    "pod-cut-to-nothing": ("p", "c" * 63),
    "claim-cut-to-nothing": ("p" * 253, "c"),
}


@pytest.mark.parametrize("case", sorted(LONG_NAMES))
def test_longest_pod_and_claim_names_still_give_a_valid_claim_name(
    objects, namespace, start_controller, eventually, case
):
    pod_name, claim_name = LONG_NAMES[case]
    cls = objects.device_class()
    objects.template(namespace, "tpl", cls)
    start_controller()
    objects.pod(namespace, pod_name, templates={claim_name: "tpl"})
    statuses = eventually(lambda: pod_status_claims(objects, namespace, pod_name))
    (claim,) = objects.pod_claims(namespace, pod_name)
    name = claim["metadata"]["name"]
    assert statuses == {claim_name: name}
    assert len(name) <= 63 and name[0].isalnum()
    assert ".-" not in name and "-." not in name


def test_two_namespaces_with_identical_template_and_claim_names_get_their_own_claims(
    objects, api, start_controller, eventually
):
    from kubernetes import client  # noqa: PLC0415

    core = client.CoreV1Api(api)
    namespaces = [f"t-{uuid.uuid4().hex[:8]}" for _ in range(2)]
    cls = objects.device_class()
    for ns in namespaces:
        core.create_namespace({"metadata": {"name": ns}})
        objects.template(ns, "same", cls)
    start_controller()
    try:
        for ns in namespaces:
            objects.pod(ns, "same", templates={"gpu": "same"})
        for ns in namespaces:
            eventually(lambda ns=ns: pod_status_claims(objects, ns, "same"))
            (claim,) = objects.pod_claims(ns, "same")
            assert claim["metadata"]["namespace"] == ns
            assert pod_status_claims(objects, ns, "same") == {"gpu": claim["metadata"]["name"]}
    finally:
        for ns in namespaces:
            core.delete_namespace(ns)


class FailingStatusWrites(Resource):
    """The pods resource with the first ``failures`` pod status writes failing, whichever
    kind of write (PUT, patch or apply) the generator uses."""

    def __init__(self, api: Any, failures: int) -> None:
        super().__init__(api, PODS)
        self.failures = failures

    def _fail(self) -> None:
        if self.failures > 0:
            self.failures -= 1
            raise ServerError("injected failure of the pod status write", code=500)

    def update(self, obj: Any, **kwargs: Any) -> Any:
        if kwargs.get("subresource") == "status":
            self._fail()
        return super().update(obj, **kwargs)

    def patch(self, name: str, patch: Any, namespace: str | None = None, **kwargs: Any) -> Any:
        if kwargs.get("subresource") == "status":
            self._fail()
        return super().patch(name, patch, namespace, **kwargs)

    def apply(self, obj: Any, **kwargs: Any) -> Any:
        if kwargs.get("subresource") == "status":
            self._fail()
        return super().apply(obj, **kwargs)


def test_recovery_after_injected_failure_of_the_pod_status_write_reuses_the_claim(
    objects, api, namespace, start_controller, eventually
):
    cls = objects.device_class()
    objects.template(namespace, "tpl", cls)
    start_controller(pods=FailingStatusWrites(api, failures=3))
    objects.pod(namespace, "p", templates={"a": "tpl", "b": "tpl"})
    statuses = eventually(lambda: pod_status_claims(objects, namespace, "p"))
    claims = objects.pod_claims(namespace, "p")
    assert len(claims) == 2
    by_pod_claim = {c["metadata"]["annotations"][POD_CLAIM_NAME_ANNOTATION]: c for c in claims}
    assert statuses == {k: c["metadata"]["name"] for k, c in by_pod_claim.items()}


def test_restarted_controller_recovers_a_claim_whose_status_write_was_lost(
    objects, api, namespace, start_controller, eventually
):
    cls = objects.device_class()
    objects.template(namespace, "tpl", cls)
    first = start_controller(pods=FailingStatusWrites(api, failures=10**6))
    objects.pod(namespace, "p", templates={"gpu": "tpl"})
    eventually(lambda: objects.pod_claims(namespace, "p"))
    first.stop()
    assert pod_status_claims(objects, namespace, "p") == {}
    start_controller()  # empty local record: recovery must come from owner + annotation
    statuses = eventually(lambda: pod_status_claims(objects, namespace, "p"))
    (claim,) = objects.pod_claims(namespace, "p")
    assert statuses == {"gpu": claim["metadata"]["name"]}


def test_status_write_keeps_other_entries_when_a_deleted_claim_is_generated_again(
    objects, namespace, start_controller, eventually
):
    cls = objects.device_class()
    objects.template(namespace, "tpl", cls)
    start_controller()
    objects.pod(namespace, "p", templates={"a": "tpl", "b": "tpl"})
    first = eventually(lambda: len(s := pod_status_claims(objects, namespace, "p")) == 2 and s)
    objects.claims.delete(first["a"], namespace)
    second = eventually(
        lambda: (s := pod_status_claims(objects, namespace, "p")).get("a") != first["a"] and s
    )
    assert second["b"] == first["b"]
    assert second["a"] and second["a"] != first["a"]


def test_missing_template_gives_a_warning_event_and_the_pod_proceeds_once_it_appears(
    objects, api, namespace, eventually
):
    cls = objects.device_class()
    recorder = EventRecorder(api, reporting_controller="drakit.dev/test", reporting_instance="t")
    config = ControllerConfig(claim_generation=ClaimGeneration.SCOPED, scoped_generation_grace=0)
    running = RunningController(Controller(api, config, events=recorder)).start()
    try:
        objects.pod(namespace, "p", templates={"gpu": "later"})
        events = Resource(api, EVENTS)

        def warning() -> Any:
            recorder.flush()
            return [
                e for e in events.list(namespace).items
                if e.get("reason") == "FailedResourceClaimCreation" and e.get("type") == "Warning"
            ]  # fmt: skip

        (event,) = eventually(warning)
        assert event["regarding"]["name"] == "p"
        assert "later" in event["note"] and "not found" in event["note"]
        # Let the failure back off a few times: the template's arrival must still be acted on
        # at once, not after the (growing) retry delay. Six failures: the next retry is
        # 0.32 s away (5 ms doubled per failure), and the wait proves the retries happened.
        retries = running.controller.queue.rate_limiter.retries
        eventually(lambda: retries(f"pod:{namespace}/p") >= 6, what="the pod's sync backing off")
        objects.template(namespace, "later", cls)
        statuses = eventually(lambda: pod_status_claims(objects, namespace, "p"))
        assert list(statuses) == ["gpu"]
    finally:
        running.stop()
        recorder.stop()


def test_scoped_generation_ignores_pods_of_other_schedulers(
    objects, namespace, start_controller, eventually
):
    cls = objects.device_class()
    objects.template(namespace, "tpl", cls)
    start_controller(claim_generation=ClaimGeneration.SCOPED)
    objects.pod(namespace, "other", templates={"gpu": "tpl"}, scheduler="default-scheduler")
    objects.pod(namespace, "mine", templates={"gpu": "tpl"})
    eventually(lambda: pod_status_claims(objects, namespace, "mine"))
    assert objects.pod_claims(namespace, "other") == []
    assert pod_status_claims(objects, namespace, "other") == {}


def logged_for(caplog: pytest.LogCaptureFixture, key: str, words: str) -> bool:
    """A log record about ``key`` (its ``pod`` or ``key`` field) says ``words``."""
    return any(
        key in (getattr(r, "pod", None), getattr(r, "key", None)) and words in r.getMessage()
        for r in caplog.records
    )


def test_scoped_generation_leaves_a_new_pod_to_kube_controller_manager_for_the_grace_period(
    objects, namespace, start_controller, eventually, caplog
):
    """Beside kube-controller-manager (which generates claims for every pod) drakit must not
    race it: a claim written into the pod status within the grace period is used as is."""
    cls = objects.device_class()
    objects.template(namespace, "tpl", cls)
    with caplog.at_level(logging.DEBUG, logger="drakit.controller.handover"):
        start_controller(claim_generation=ClaimGeneration.SCOPED, scoped_generation_grace=30.0)
        objects.pod(namespace, "mine", templates={"gpu": "tpl"})
        # drakit has looked at the pod (without the grace period it generated right then)
        eventually(lambda: logged_for(caplog, f"{namespace}/mine", "for the grace period"))
    assert objects.pod_claims(namespace, "mine") == []
    assert pod_status_claims(objects, namespace, "mine") == {}


def test_scoped_generation_takes_over_when_nobody_generated_within_the_grace_period(
    objects, namespace, start_controller, eventually
):
    cls = objects.device_class()
    objects.template(namespace, "tpl", cls)
    start_controller(claim_generation=ClaimGeneration.SCOPED, scoped_generation_grace=2.0)
    objects.pod(namespace, "mine", templates={"gpu": "tpl"})
    statuses = eventually(lambda: pod_status_claims(objects, namespace, "mine"))
    assert list(statuses) == ["gpu"]


def test_generation_from_a_stale_pod_keeps_the_claim_another_generator_recorded(
    objects, api, namespace
):
    """Soak seed 7 (``make soak DURATION=30m SEED=7``): the leader was paused past its lease
    and woke with a pod in its cache whose status did not yet show the claim
    kube-controller-manager had generated and recorded meanwhile; it generated a second
    claim and its status write replaced the first one, which was allocated and in use."""
    cls = objects.device_class()
    objects.template(namespace, "tpl", cls)
    stale = objects.pod(namespace, "p", templates={"gpu": "tpl"})  # no status entry yet
    # kube-controller-manager's work, which the paused controller's cache has not seen:
    recorded = objects.claims.create(
        claim_from_template(stale, "gpu", objects.templates.get("tpl", namespace)), namespace
    )
    name = recorded["metadata"]["name"]
    objects.pods.patch(
        "p",
        {"status": {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": name}]}},
        namespace,
        subresource="status",
    )
    config = ControllerConfig(claim_generation=ClaimGeneration.SCOPED, scoped_generation_grace=0)
    controller = Controller(api, config)  # not running: only its template cache is filled,
    templates = controller.caches.templates  # its claim cache knows nothing: a stale view
    templates.start()
    try:
        assert templates.wait_for_sync(60)
        controller.generator.sync(stale)
    finally:
        templates.stop()

    assert [c["metadata"]["name"] for c in objects.pod_claims(namespace, "p")] == [name]
    assert pod_status_claims(objects, namespace, "p") == {"gpu": name}


def test_a_fenced_controller_generates_nothing_until_its_fence_opens(
    objects, namespace, start_controller, eventually, caplog
):
    """The fence leader election sets (the Lease surely held): closed, no key is acted on."""
    cls = objects.device_class()
    objects.template(namespace, "tpl", cls)
    running = start_controller()
    running.controller.fence = lambda: False
    with caplog.at_level(logging.WARNING, logger="drakit.controller.app"):
        objects.pod(namespace, "p", templates={"gpu": "tpl"})
        # The pod's key was taken from the queue and refused at the fence
        eventually(lambda: logged_for(caplog, f"pod:{namespace}/p", "Lease may be lost"))
    assert objects.pod_claims(namespace, "p") == []
    running.controller.fence = lambda: True
    statuses = eventually(lambda: pod_status_claims(objects, namespace, "p"))
    assert list(statuses) == ["gpu"]


def test_claims_created_when_another_generator_takes_over_are_left_for_it_to_record(
    objects, api, namespace
):
    """kube-controller-manager started leading between drakit's create and its status write:
    drakit records nothing, and the claim it made is the one found and recorded next."""
    cls = objects.device_class()
    objects.template(namespace, "tpl", cls)
    pod = objects.pod(namespace, "p", templates={"gpu": "tpl"})
    config = ControllerConfig(claim_generation=ClaimGeneration.SCOPED, scoped_generation_grace=0)
    controller = Controller(api, config)
    templates = controller.caches.templates
    templates.start()
    try:
        assert templates.wait_for_sync(60)
        assert controller.generator.sync(pod, may_record=lambda: False) is False
        (made,) = objects.pod_claims(namespace, "p")
        assert pod_status_claims(objects, namespace, "p") == {}
        assert controller.generator.sync(objects.pods.get("p", namespace)) is True
    finally:
        templates.stop()
    assert [c["metadata"]["name"] for c in objects.pod_claims(namespace, "p")] == [
        made["metadata"]["name"]
    ]
    assert pod_status_claims(objects, namespace, "p") == {"gpu": made["metadata"]["name"]}


def test_claims_of_drakit_pods_are_created_protected_and_released_when_deleted_unallocated(
    objects, namespace, start_controller, eventually
):
    """drakit allocates its own pods' claims next and needs the finalizer first, so it creates
    them with it (one write less per pod); other schedulers' pods get claims without it. A
    protected claim whose pod goes away before any allocation still disappears."""
    cls = objects.device_class()
    objects.template(namespace, "tpl", cls)
    start_controller(claim_generation=ClaimGeneration.ALL)  # no node: nothing is allocated
    objects.pod(namespace, "mine", templates={"gpu": "tpl"})
    objects.pod(namespace, "other", templates={"gpu": "tpl"}, scheduler="default-scheduler")
    eventually(lambda: pod_status_claims(objects, namespace, "mine"))
    eventually(lambda: pod_status_claims(objects, namespace, "other"))
    (mine,) = objects.pod_claims(namespace, "mine")
    (other,) = objects.pod_claims(namespace, "other")
    assert mine["metadata"].get("finalizers") == [FINALIZER]
    assert not other["metadata"].get("finalizers")
    assert not (mine.get("status") or {}).get("allocation")

    objects.pods.delete("mine", namespace, grace_period_seconds=0)
    name = mine["metadata"]["name"]
    eventually(lambda: not objects.pod_claims_by_name(namespace, name), timeout=60)


def test_claim_generated_for_a_pod_deleted_before_its_status_recorded_the_claim_is_deleted(
    objects, api, namespace, start_controller, eventually
):
    """The pod goes between the claim's creation and the pod status write that names it: the
    claim is found by its owner and deleted (it used to wait for a resync that never came)."""
    objects.template(namespace, "tpl", objects.device_class())
    start_controller(pods=FailingStatusWrites(api, failures=10**6))
    objects.pod(namespace, "p", templates={"gpu": "tpl"})
    (claim,) = eventually(lambda: objects.pod_claims(namespace, "p"), what="claim generated")
    assert pod_status_claims(objects, namespace, "p") == {}
    objects.pods.delete("p", namespace, grace_period_seconds=0)
    name = claim["metadata"]["name"]
    eventually(
        lambda: not objects.pod_claims_by_name(namespace, name),
        what="generated claim deleted",
        timeout=30,
    )
