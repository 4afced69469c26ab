"""Claim references from the DRA socket: what is refused before any request or path."""

from __future__ import annotations

import uuid

import pytest

from drakit.node_plugin.claimcheck import claim_ref_problem
from drakit.plugin import ClaimRef

UID = "5b8e1f7e-0000-4000-8000-000000000000"


def test_a_real_reference_is_accepted() -> None:
    assert claim_ref_problem(ClaimRef("kube-system", str(uuid.uuid4()), "pod-0-gpu-x7k2q")) == ""
    assert claim_ref_problem(ClaimRef("a" * 63, UID.upper(), "a." * 126 + "b")) == ""


@pytest.mark.parametrize(
    ("ref", "start"),
    [
        (ClaimRef("default", UID, "../../api/v1/secrets/x"), "claim name '../../api"),
        (ClaimRef("default", UID, "x?watch=true"), "claim name 'x?watch=true'"),
        (ClaimRef("default", UID, "a" * 254), "claim name 'aaaa"),
        (ClaimRef("default", UID, ""), "claim name ''"),
        (ClaimRef("a.b", UID, "c"), "claim namespace 'a.b'"),
        (ClaimRef("a" * 64, UID, "c"), "claim namespace 'aaaa"),
        (ClaimRef("default", "uid-1", "c"), "claim uid 'uid-1' is not a UUID"),
        (ClaimRef("default", UID[:-1] + "\0", "c"), "claim uid"),
    ],
    ids=[
        "traversal",
        "query",
        "too-long",
        "empty",
        "dotted-namespace",
        "long-namespace",
        "not-uuid",
        "nul",
    ],
)
def test_a_hostile_reference_is_refused_naming_the_field(ref: ClaimRef, start: str) -> None:
    assert claim_ref_problem(ref).startswith(start)


def test_a_refusal_repeats_at_most_64_characters_of_the_value() -> None:
    problem = claim_ref_problem(ClaimRef("default", "u" * 10_000, "c"))
    assert "(cut, 10000 characters)" in problem
    assert len(problem) < 150
