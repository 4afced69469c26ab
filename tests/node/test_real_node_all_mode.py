"""drakit's controller alone in charge of claims: ``claimGeneration: all`` on a
control plane whose kube-controller-manager runs without its resourceclaim
controller, on a real node."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from conftest import NodeAssets, make_stack
from node_rig import RealNodeStack, eventually

from drakit.kubeapi.errors import NotFound

pytestmark = pytest.mark.node


@pytest.fixture(scope="module")
def stack(
    node_assets: NodeAssets, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RealNodeStack]:
    controllers = "*,-resourceclaim-controller"
    with make_stack(node_assets, tmp_path_factory.mktemp("all-mode"), controllers=controllers) as s:
        s.install("drakit", s.chart_values(controller={"claimGeneration": "all"}))
        s.running_plugin_pod()
        eventually(s.node_slices, f"ResourceSlices of {s.node.name}")
        yield s


def test_gpu_pod_example_runs_with_claims_generated_and_deleted_by_drakit(
    stack: RealNodeStack,
) -> None:
    namespace = stack.create_namespace()
    stack.apply_example("gpu-pod.yaml", namespace)
    stack.running_pod("gpu-demo", namespace)
    pod = stack.get_pod("gpu-demo", namespace)
    assert pod is not None
    [status] = pod["status"]["resourceClaimStatuses"]
    claim = stack.claims.get(status["resourceClaimName"], namespace)
    owner = claim["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"]) == ("Pod", "gpu-demo")
    output = stack.container_output(namespace, "gpu-demo", "main")
    assert any(line.startswith("GPU_") for line in output.splitlines())

    stack.delete_pod("gpu-demo", namespace)
    stack.pod_gone("gpu-demo", namespace)

    def claim_deleted() -> bool:
        try:
            stack.claims.get(claim["metadata"]["name"], namespace)
        except NotFound:
            return True
        return False

    eventually(claim_deleted, "drakit's controller to delete the generated claim")
    assert not list(stack.node.cdi_root.glob(f"*{claim['metadata']['uid']}*"))
