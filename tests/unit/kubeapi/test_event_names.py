"""Event names: always a DNS subdomain the apiserver accepts (the integration test in
tests/integration/kubeapi/test_event_recorder.py has the apiserver accept them)."""

from __future__ import annotations

import re

import pytest

from drakit.kubeapi.events import _event_name

DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


@pytest.mark.parametrize(
    "object_name",
    [
        "p",
        "a" * 199 + "." + "b" * 53,
        "a" * 199 + "-" + "b" * 53,
        "a" * 198 + "-." + "b" * 53,
        "a" * 253,
    ],
    ids=["short", "dot-at-the-cut", "dash-at-the-cut", "dash-dot-at-the-cut", "longest"],
)
def test_event_name_is_a_dns_subdomain_whatever_the_cut_leaves(object_name: str) -> None:
    name = _event_name(object_name)
    assert DNS_SUBDOMAIN.fullmatch(name), name
    assert len(name) <= 253
    assert name.startswith(object_name[:198])
