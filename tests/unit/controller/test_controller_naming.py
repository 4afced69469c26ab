"""Names and predicates of the controller (pure functions)."""

from __future__ import annotations

import datetime as dt

import pytest

from drakit.controller.naming import (
    MAX_GENERATE_NAME_BASE,
    claim_keys_of_pod,
    generate_name,
    is_for_pod,
    parse_timestamp,
    pod_is_done,
    resolve_claim_name,
)


def pod(**status: object) -> dict[str, object]:
    return {
        "metadata": {"name": "p", "namespace": "ns", "uid": "u1"},
        "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"},
                                    {"name": "net", "resourceClaimName": "shared"}]},
        "status": status,
    }  # fmt: skip


def test_short_generate_name_is_pod_dash_claim_dash():
    assert generate_name("pod", "gpu") == "pod-gpu-"


def test_generate_name_of_exactly_57_characters_is_kept():
    name = generate_name("p" * 40, "c" * 15)
    assert name == "p" * 40 + "-" + "c" * 15 + "-"
    assert len(name) == MAX_GENERATE_NAME_BASE


def test_long_generate_name_cuts_both_parts_in_proportion_without_trailing_dash():
    # 60 + 38 + 2 = 100 characters: 60*57//100 = 34, 38*57//100 = 21
    assert generate_name("a" * 60, "b" * 38) == "a" * 34 + "-" + "b" * 21


def test_user_named_claim_resolves_to_its_name_without_ownership_check():
    resolved = resolve_claim_name(pod(), {"name": "net", "resourceClaimName": "shared"})
    assert (resolved.name, resolved.generated, resolved.pending) == ("shared", False, False)


def test_template_claim_without_status_entry_is_pending():
    resolved = resolve_claim_name(pod(), {"name": "gpu", "resourceClaimTemplateName": "t"})
    assert resolved.pending and resolved.generated and resolved.name is None


def test_template_claim_resolves_through_the_status_entry():
    p = pod(resourceClaimStatuses=[{"name": "gpu", "resourceClaimName": "p-gpu-x1"}])
    resolved = resolve_claim_name(p, {"name": "gpu", "resourceClaimTemplateName": "t"})
    assert (resolved.name, resolved.generated, resolved.pending) == ("p-gpu-x1", True, False)


def test_status_entry_without_claim_name_means_no_claim_needed():
    p = pod(resourceClaimStatuses=[{"name": "gpu"}])
    resolved = resolve_claim_name(p, {"name": "gpu", "resourceClaimTemplateName": "t"})
    assert resolved.name is None and not resolved.pending


def test_pod_claim_without_source_is_rejected_with_its_name():
    with pytest.raises(ValueError, match=r"ns/p.*'odd'"):
        resolve_claim_name(pod(), {"name": "odd"})


def test_claim_is_for_pod_only_with_controller_owner_uid_in_same_namespace():
    owner = {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u1", "controller": True}
    claim = {"metadata": {"namespace": "ns", "ownerReferences": [owner]}}
    assert is_for_pod(pod(), claim)
    assert not is_for_pod(pod(), {"metadata": {"namespace": "other", "ownerReferences": [owner]}})
    not_controller = {**owner, "controller": False}
    assert not is_for_pod(
        pod(), {"metadata": {"namespace": "ns", "ownerReferences": [not_controller]}}
    )
    other_uid = {**owner, "uid": "u2"}
    assert not is_for_pod(pod(), {"metadata": {"namespace": "ns", "ownerReferences": [other_uid]}})


@pytest.mark.parametrize(
    ("phase", "deleting", "node", "done"),
    [
        ("Succeeded", False, "n", True),
        ("Failed", False, "", True),
        ("Running", False, "n", False),
        ("Pending", True, "", True),  # deleted before it was scheduled
        ("Running", True, "n", False),  # the kubelet may still use the devices
    ],
)
def test_pod_is_done_when_terminal_or_deleted_before_scheduling(phase, deleting, node, done):
    p = pod(phase=phase)
    p["spec"]["nodeName"] = node  # type: ignore[index]
    if deleting:
        p["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"  # type: ignore[index]
    assert pod_is_done(p) is done


def test_claim_keys_of_pod_lists_resolvable_and_extended_claims():
    p = pod(
        resourceClaimStatuses=[{"name": "gpu", "resourceClaimName": "g1"}],
        extendedResourceClaimStatus={"resourceClaimName": "ext"},
    )
    assert sorted(claim_keys_of_pod(p)) == ["ns/ext", "ns/g1", "ns/shared"]


def test_generate_name_trims_a_dot_or_dash_where_the_pod_name_was_cut():
    # 100 + 3 + 2 = 105 characters: 100*57//105 = 54 and 3*57//105 = 1
    for char in ".-":
        name = generate_name("a" * 53 + char + "b" * 46, "gpu")
        assert name == "a" * 53 + "-" + "g"


def test_generate_name_leaves_out_a_pod_part_cut_to_nothing():
    assert generate_name("p", "c" * 63) == "c" * 54 + "-"


def test_timestamps_are_read_as_the_api_writes_them_and_anything_else_is_none() -> None:
    utc = dt.UTC
    assert parse_timestamp("2026-12-06T04:00:00Z") == dt.datetime(2026, 12, 6, 4, tzinfo=utc)
    assert parse_timestamp("2026-12-06T04:00:00.250000Z") == dt.datetime(
        2026, 12, 6, 4, 0, 0, 250000, tzinfo=utc
    )
    for bad in ("2026-12-06", "2026-12-06T04:00:00", "2026-13-06T04:00:00Z", "x", None, 5):
        assert parse_timestamp(bad) is None, bad
