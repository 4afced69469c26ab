"""drakit.plugin is the floor of the runtime: importing it loads nothing of the node plugin,
the controller or the API layer, and its one way up (the runtime KubeletPlugin runs on) is a
name that resolves."""

from __future__ import annotations

import importlib
import inspect

import pytest
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


def test_every_public_name_resolves_to_the_object_its_defining_module_holds() -> None:
    import drakit.plugin  # noqa: PLC0415

    assert set(drakit.plugin._DEFINED_IN) == set(drakit.plugin.__all__)
    for name, module in drakit.plugin._DEFINED_IN.items():
        defining = importlib.import_module(f"drakit.plugin.{module}")
        expected = defining if name == module else getattr(defining, name)
        assert getattr(drakit.plugin, name) is expected, name


def test_a_name_not_in_the_public_api_is_an_attribute_error() -> None:
    import drakit.plugin  # noqa: PLC0415

    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        drakit.plugin.Nope  # noqa: B018


def test_the_node_plugin_loads_only_the_parts_of_the_api_it_uses() -> None:
    probe = (
        "import sys\n"
        "import drakit.cli.node_plugin, drakit.node_plugin.embedded, drakit.node_plugin.wiring\n"
        "from drakit.node_plugin.backend_loader import load_backend\n"
        "load_backend('example', driver_name='d', node_name='n')\n"
        "unused = ('drakit.plugin.binding', 'drakit.plugin.pci', 'drakit.plugin.options',\n"
        "          'drakit.plugin.running')\n"
        "print(sorted(m for m in unused if m in sys.modules))\n"
    )
    assert python_output(probe).strip() == "[]"
