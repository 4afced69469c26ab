"""The pure parts of trusting a node-view pod: the port and the DaemonSet selector. (Whole
pods and DaemonSets are tried against the real apiserver in
tests/integration/node_plugin/test_devices_node_view_trust.py.)"""

from __future__ import annotations

import pytest

from drakit.devices.pluginpods import port_of, selector_matches


@pytest.mark.parametrize("value", ["1", "9400", "65535", "080"])
def test_a_port_is_decimal_digits_from_1_to_65535(value: str) -> None:
    assert port_of(value) == int(value)


@pytest.mark.parametrize(
    "value",
    ["0", "65536", "9" * 40, "-1", "+80", " 80", "80 ", "0x50", "8_0", "٨٠", "", None, 80, "1e3"],
)
def test_anything_else_is_no_port(value: object) -> None:
    assert port_of(value) is None


LABELS = {"app": "drakit", "component": "node-plugin"}


@pytest.mark.parametrize(
    "selector",
    [
        {"matchLabels": {"app": "drakit"}},
        {"matchLabels": {"app": "drakit", "component": "node-plugin"}},
        {"matchExpressions": [{"key": "app", "operator": "In", "values": ["drakit", "x"]}]},
        {"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["web"]}]},
        {"matchExpressions": [{"key": "app", "operator": "Exists"}]},
        {"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]},
    ],
)
def test_selectors_that_select_the_labels(selector: object) -> None:
    assert selector_matches(selector, LABELS)


@pytest.mark.parametrize(
    "selector",
    [
        None,
        {},  # selects everything in Kubernetes; never a reason to trust a pod here
        {"matchLabels": {}},
        {"matchLabels": {"app": "other"}},
        {"matchLabels": {"tier": "drakit"}},
        {"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["drakit"]}]},
        {"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]},
        {"matchExpressions": [{"key": "app", "operator": "Near", "values": ["drakit"]}]},
        {"matchExpressions": ["app"]},
        {"matchExpressions": [{"key": 1, "operator": "Exists"}]},
        {"matchLabels": ["app"]},
    ],
)
def test_selectors_that_do_not(selector: object) -> None:
    assert not selector_matches(selector, LABELS)
