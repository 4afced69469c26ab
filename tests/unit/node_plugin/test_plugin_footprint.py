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
