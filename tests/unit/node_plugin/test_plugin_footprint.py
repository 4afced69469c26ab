"""The node plugin runs on every node: it must not load what only allocation needs."""

from __future__ import annotations

import subprocess
import sys


def test_node_plugin_does_not_load_the_cel_engine_the_allocator_or_the_kubernetes_client() -> None:
    probe = (
        "import sys\n"
        "import drakit.cmd_node_plugin\n"
        "import node_plugin.app, node_plugin.core, node_plugin.publisher, node_plugin.guard\n"
        "import allocator\n"
        "heavy = ('cel', 'cel_expr_python', 're2', 'allocator.allocate', 'allocator.cel',\n"
        "         'kubernetes', 'kubernetes.client')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def test_allocator_names_still_resolve_on_first_use() -> None:
    import allocator  # noqa: PLC0415

    assert allocator.Allocator.__name__ == "Allocator"
    assert allocator.Inventory.__module__ == "allocator.inventory"


def test_start_up_objects_are_out_of_the_collectors_view_once_the_plugin_serves() -> None:
    # In a child: freezing is process-wide and must not leak into the test process.
    probe = (
        "import gc\n"
        "from node_plugin.app import settle_heap\n"
        "before = gc.get_freeze_count()\n"
        "settle_heap()\n"
        "print(before, gc.get_freeze_count() > 1000)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert out.split() == ["0", "True"]
