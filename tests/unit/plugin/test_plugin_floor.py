"""drakit.plugin is the floor of the runtime: importing it loads nothing of the node plugin,
the controller or the API layer, and its one way up (the runtime KubeletPlugin runs on) is a
name that resolves."""

from __future__ import annotations

import importlib
import inspect

from helpers.childpython import python_output

from drakit.plugin.running import RUNTIME


def test_importing_the_public_api_loads_no_runtime_layer_above_it() -> None:
    probe = (
        "import sys\n"
        "import drakit.plugin\n"
        "from drakit.plugin import plainconfig\n"
        "above = ('drakit.node_plugin', 'drakit.controller', 'drakit.kubeapi', 'drakit.webhook',\n"
        "         'drakit.devices', 'drakit.backends', 'grpc', 'kubernetes', 'pydantic')\n"
        "print(sorted(m for m in sys.modules if m.startswith(above)))\n"
    )
    assert python_output(probe).strip() == "[]"


def test_the_runtime_name_resolves_to_a_function_taking_backend_options_and_handler() -> None:
    module, _, name = RUNTIME.partition(":")
    make = getattr(importlib.import_module(module), name)
    assert list(inspect.signature(make).parameters) == ["backend", "options", "on_error"]
