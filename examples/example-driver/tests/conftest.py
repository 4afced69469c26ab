"""Fixtures of the example driver's tests: drakit's test kit, as any driver's tests load it.

They use drakit only through ``drakit.plugin`` and ``drakit.testing`` (test_layers.py
keeps it so), and run wherever the example is: in drakit's repository
(``.venv/bin/pytest examples/example-driver/tests``) and from a copy elsewhere with drakit,
drakit-localcluster and the example installed (``make test-example-standalone``). An
example that is not installed is imported from its source folder.
"""

from __future__ import annotations

import importlib.util
import sys

from example_paths import SRC

if importlib.util.find_spec("example_driver") is None:
    sys.path.insert(0, str(SRC))

pytest_plugins = ["drakit.testing"]
