"""drakit: a Kubernetes Dynamic Resource Allocation driver kit in Python.

This package holds the ``drakit`` command line and the local control-plane
launcher used by the tests and ``make demo``. The driver itself lives in the
sibling packages ``allocator``, ``kubeapi``, ``node_plugin`` and ``controller``.
"""

from drakit.version import __version__

__all__ = ["__version__"]
