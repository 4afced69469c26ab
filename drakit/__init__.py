"""drakit: a Kubernetes Dynamic Resource Allocation driver kit in Python.

One import namespace. Driver authors write against :mod:`drakit.plugin`; the parts of the
kit are ``drakit.allocator`` (structured-parameters allocation and CEL, pure),
``drakit.kubeapi`` (all API-server access), ``drakit.node_plugin`` (the kubelet plugin),
``drakit.controller`` (claim lifecycle and scheduling), ``drakit.telemetry`` (logs and
metrics) and ``drakit.kubeletapi`` (the generated kubelet gRPC code). This package itself
holds the ``drakit`` command line and the local control-plane launcher used by the tests and
``make demo``. In the repository those packages keep their own folders at the root
(``allocator/``, ``controller/``, ...), linked into ``drakit/``.
"""

from __future__ import annotations

__all__ = ["__version__"]


def __getattr__(name: str) -> str:
    """``drakit.__version__``, resolved on first access (PEP 562, see :mod:`drakit.version`):
    importing drakit does not load :mod:`importlib.metadata`."""
    if name != "__version__":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from drakit.version import __version__  # noqa: PLC0415  (the lookup is the point)

    globals()["__version__"] = __version__
    return __version__
