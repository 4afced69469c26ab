"""The kubelet of the minor under test watches device health through drakit's node plugin.

Each minor's kubelet calls one DRAResourceHealth version (1.36: ``v1alpha1`` only; 1.37:
``v1``, falling back to ``v1alpha1``) and only when ``ResourceHealthStatus`` is on. The
node plugin advertises the versions that node's kubelet calls
(``drakit.kubeapi.clusterversion.kubelet_health_services``); here the minor's own DRA manager
(the kubelet harness) must open its health stream over the newest of them.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest
from e2e_rig import E2EStack, eventually

from drakit.kubeapi.clusterversion import MinorFacts

pytestmark = pytest.mark.e2e


@pytest.mark.compat
def test_the_kubelet_of_this_minor_opens_its_health_stream_over_the_version_it_knows(
    e2e: E2EStack, kube_facts: MinorFacts
) -> None:
    if "ResourceHealthStatus" not in kube_facts.default_on:
        pytest.skip(
            f"ResourceHealthStatus is alpha and off by default in 1.{kube_facts.minor}: "
            "its kubelet opens no health stream"
        )
    expected = kube_facts.kubelet_health_services[0]
    for node in e2e.nodes.values():
        lines = eventually(
            partial(_health_streams_opened, node.plugin.process.log_path),
            f"the kubelet of {node.name} to open a health stream",
        )
        assert f"api={expected}" in lines[0], lines[0]


def _health_streams_opened(log_path: Path) -> list[str]:
    """The node plugin's log lines saying a health stream was opened (oldest first)."""
    text = log_path.read_text(errors="replace")
    return [line for line in text.splitlines() if '"Health stream opened"' in line]
