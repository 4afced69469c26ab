"""A node view is another program's JSON: any shape decodes to a bounded NodeView (or None
for a non-object) and never raises."""

from __future__ import annotations

from typing import Any

import pytest

from drakit.devices.nodeview import MAX_ENTRIES, MAX_TEXT, parse_view


@pytest.mark.parametrize("doc", [None, [], "view", 3, True])
def test_a_document_that_is_no_object_is_no_view(doc: object) -> None:
    assert parse_view(doc, "src") is None


@pytest.mark.parametrize(
    "doc",
    [
        {},
        {"claims": 5, "findings": "x", "node": ["a"], "error": {"x": 1}},
        {"claims": [1, None, "c", []], "findings": [[], 2]},
        {"claims": [{"containers": "x", "devices": {"a": 1}, "name": None}]},
        {"claims": [{"containers": [{"devices": 7, "pod": 1.5}, 3]}]},
        {"findings": [{"pods": "p", "devices": None, "seconds": "912", "detail": ["d"]}]},
    ],
)
def test_wrong_types_read_as_empty_values(doc: dict[str, Any]) -> None:
    view = parse_view(doc, "src")
    assert view is not None
    assert view.source == "src"
    for claim in view.claims:
        assert all(isinstance(c.pod, str) for c in claim.containers)


def test_long_strings_and_long_lists_are_cut() -> None:
    doc = {
        "node": "n" * 100_000,
        "claims": [{"name": f"c{i}"} for i in range(MAX_ENTRIES + 7)],
        "findings": [{"kind": "leak"}] * 3,
    }
    view = parse_view(doc, "src")
    assert view is not None
    assert len(view.node) == MAX_TEXT
    assert len(view.claims) == MAX_ENTRIES
    assert view.cut == 7
    assert len(view.findings) == 3
