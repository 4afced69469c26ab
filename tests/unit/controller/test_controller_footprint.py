"""The controller talks to the apiserver through kubeapi's light client only."""

from __future__ import annotations

from helpers.childpython import python_output


def test_controller_does_not_load_the_kubernetes_client_package() -> None:
    # Its request path costs about 1 ms of CPU more per call than the light client's, and
    # importing it adds every generated API model to the controller's memory.
    probe = (
        "import sys\n"
        "import drakit.cli.controller\n"
        "import drakit.controller.main, drakit.controller.app\n"
        "import drakit.controller.scheduler, drakit.controller.claimgen\n"
        "print(sorted(m for m in ('kubernetes', 'kubernetes.client') if m in sys.modules))\n"
    )
    assert python_output(probe).strip() == "[]"
