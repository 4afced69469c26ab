"""The node plugin runs on every node: it must not load what only allocation needs."""

from __future__ import annotations

from helpers.childpython import python_output


def test_node_plugin_does_not_load_the_cel_engine_the_allocator_or_the_kubernetes_client() -> None:
    probe = (
        "import sys\n"
        "import drakit.cli.node_plugin\n"
        "import drakit.node_plugin.app, drakit.node_plugin.core\n"
        "import drakit.node_plugin.publisher, drakit.node_plugin.guard\n"
        "import drakit.allocator\n"
        "heavy = ('cel', 'cel_expr_python', 're2', 'drakit.allocator.allocate',\n"
        "         'drakit.allocator.cel',\n"
        "         'kubernetes', 'kubernetes.client')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
    )
    out = python_output(probe)
    assert out.strip() == "[]"


# What the node plugin imports until it serves: its command, app, core, wiring and publisher,
# and the metrics registries it builds at start.
START_UP = (
    "import drakit.cli, drakit.cli.node_plugin\n"
    "import drakit.node_plugin.app, drakit.node_plugin.core\n"
    "import drakit.node_plugin.wiring, drakit.node_plugin.publisher\n"
    "from drakit.node_plugin.metrics import PluginMetrics\n"
    "from drakit.node_plugin.publisher.metrics import PublisherMetrics\n"
    "PublisherMetrics(PluginMetrics().registry)\n"
)


def loaded_at_start_up(*modules: str) -> list[str]:
    """Those of `modules` that the node plugin's start-up imports have loaded."""
    probe = f"import sys\n{START_UP}print(' '.join(m for m in {modules!r} if m in sys.modules))\n"
    return python_output(probe).split()


def test_node_plugin_modules_load_neither_prometheus_client_nor_pyyaml() -> None:
    # Both load on demand: prometheus_client with a /metrics endpoint (telemetry.endpoint),
    # PyYAML for a kubeconfig or --backend-config that is not JSON (kubeapi.documents).
    assert loaded_at_start_up("prometheus_client", "yaml") == []


def test_node_plugin_start_up_modules_load_neither_urllib3_nor_importlib_metadata() -> None:
    # The plugin talks through the light client (OSError only), so urllib3's exception
    # types are caught only once something loaded urllib3; drakit.__version__ (metadata,
    # zipfile, email) is looked up on first read. Together about 3 MiB of idle RSS.
    assert loaded_at_start_up("urllib3", "importlib.metadata") == []


def test_start_up_probe_sees_a_module_start_up_loads() -> None:
    # Guards the two tests above against a probe that could never see anything.
    assert loaded_at_start_up("drakit.node_plugin.wiring", "yaml") == ["drakit.node_plugin.wiring"]


def test_drakit_version_is_the_installed_one_when_first_read() -> None:
    probe = (
        "import sys\n"
        "from importlib import metadata\n"
        "import drakit\n"
        "print(drakit.__version__ == metadata.version('drakit'))\n"
        "from drakit.version import __version__\n"
        "print(__version__ == drakit.__version__, 'drakit.version' in sys.modules)\n"
    )
    assert python_output(probe).split() == ["True", "True", "True"]


_LAZY_PYDANTIC_PROBE = """
import sys
import drakit.cli, drakit.cli.node_plugin
import drakit.node_plugin.app, drakit.node_plugin.core, drakit.node_plugin.wiring
from drakit.node_plugin.backend_loader import load_backend
from drakit.node_plugin.claims import ClaimReader
from drakit.plugin import ClaimRef

example = load_backend("example", driver_name="d", node_name="n", config={"gpus": 4})
load_backend("hostdev", driver_name="d", node_name="n", config={"devices": [{"glob": "/dev/null"}]})
reader = ClaimReader(None, "d", lambda: example.config_model)


def claim(config):
    return {
        "metadata": {"uid": "u1", "name": "c", "namespace": "ns"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "g"}}]}},
        "status": {"allocation": {"devices": {
            "results": [{"request": "gpu", "driver": "d", "pool": "n", "device": "gpu-0"}],
            "config": config,
        }}},
    }


ref = ClaimRef(namespace="ns", uid="u1", name="c")
reader.check(ref, claim([]))
print("pydantic" in sys.modules)
sharing = {"sharing": {"strategy": "TimeSlicing"}}
opaque = {"source": "FromClaim", "opaque": {"driver": "d", "parameters": sharing}}
got = reader.check(ref, claim([opaque]))
print("pydantic" in sys.modules, type(got.to_prepare.devices[0].config).__name__)
"""


def test_node_plugin_starts_and_prepares_without_pydantic_until_a_claim_carries_opaque_config() -> (
    None
):
    out = python_output(_LAZY_PYDANTIC_PROBE)
    assert out.split() == ["False", "True", "GpuConfig"]


def test_allocator_names_still_resolve_on_first_use() -> None:
    import drakit.allocator  # noqa: PLC0415

    assert drakit.allocator.Allocator.__name__ == "Allocator"
    assert drakit.allocator.Inventory.__module__ == "drakit.allocator.inventory"


def test_start_up_objects_are_out_of_the_collectors_view_once_the_plugin_serves() -> None:
    # In a child: freezing is process-wide and must not leak into the test process.
    probe = (
        "import gc\n"
        "from drakit.node_plugin.app import settle_heap\n"
        "before = gc.get_freeze_count()\n"
        "settle_heap()\n"
        "print(before, gc.get_freeze_count() > 1000)\n"
    )
    out = python_output(probe)
    assert out.split() == ["0", "True"]
