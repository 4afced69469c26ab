"""drakit: a Kubernetes Dynamic Resource Allocation driver kit in Python.

One import namespace. Driver authors write against :mod:`drakit.plugin`; the parts of the
kit are ``drakit.allocator`` (structured-parameters allocation and CEL, pure),
``drakit.kubeapi`` (all API-server access), ``drakit.node_plugin`` (the kubelet plugin),
``drakit.controller`` (claim lifecycle and scheduling), ``drakit.telemetry`` (logs and
metrics) and ``drakit.kubeletapi`` (the generated kubelet gRPC code). This package itself
holds the ``drakit`` command line. Every one of those packages is a real folder under
``drakit/`` in the repository (no links): the tree is what it imports.

The development tools (``drakit.localcluster``, ``drakit.demo``, ``drakit.testing``) are
another distribution, drakit-localcluster, with its own source root
(``distributions/drakit-localcluster/src/drakit/``). Installed from wheels, both land in
one ``drakit`` folder; in a source checkout (editable installs) each has its folder, and
``__path__`` is extended (:func:`pkgutil.extend_path`) so that ``drakit.localcluster`` is
found in the other one. The extension only appends folders named ``drakit`` found on
``sys.path``; it imports nothing.
"""

from __future__ import annotations

from pkgutil import extend_path

__path__ = extend_path(__path__, __name__)

__all__ = ["__version__"]


def __getattr__(name: str) -> str:
    """``drakit.__version__``, resolved on first access (PEP 562, see :mod:`drakit.version`):
    importing drakit does not load :mod:`importlib.metadata`."""
    if name != "__version__":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from drakit.version import __version__  # noqa: PLC0415  (the lookup is the point)

    globals()["__version__"] = __version__
    return __version__
