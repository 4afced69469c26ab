"""URL paths of resources: every namespace, name and subresource stays one path segment."""

from __future__ import annotations

import pytest

from drakit.kubeapi.errors import InvalidPathSegment
from drakit.kubeapi.resources import NODES, RESOURCE_CLAIMS


def test_plain_names_give_the_usual_paths() -> None:
    assert RESOURCE_CLAIMS.path("ns", "c", "status") == (
        "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/c/status"
    )
    assert NODES.path(name="n") == "/api/v1/nodes/n"


def test_query_and_fragment_characters_are_quoted_into_the_segment() -> None:
    assert RESOURCE_CLAIMS.path("ns", "c?watch=true#x") == (
        "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/c%3Fwatch%3Dtrue%23x"
    )


@pytest.mark.parametrize("segment", ["..", ".", "a/b", "../../secrets", "50%"])
@pytest.mark.parametrize("field", ["namespace", "name", "subresource"])
def test_a_segment_that_could_leave_its_place_is_refused(segment: str, field: str) -> None:
    parts = {"namespace": "ns", "name": "c", "subresource": "status", field: segment}
    with pytest.raises(InvalidPathSegment, match=f"ResourceClaim {field} "):
        RESOURCE_CLAIMS.path(**parts)
