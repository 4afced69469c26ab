"""Version facts of this build of drakit and of what it targets.

``__version__`` is resolved on first access (PEP 562) and cached: reading the installed
distribution's version imports :mod:`importlib.metadata` (with zipfile, email and csv, about
1-2 MiB of resident memory), which a long-running program such as the node plugin never needs.
"""

from __future__ import annotations

#: The Kubernetes release drakit is built and tested against.
KUBERNETES_VERSION = "v1.37.2"
#: Every Kubernetes release drakit is tested against (make test-compat), oldest first;
#: the same list as KUBE_VERSIONS in hack/versions.env.
SUPPORTED_KUBERNETES_VERSIONS = ("v1.35.4", "v1.36.3", "v1.37.2")
#: resource.k8s.io API versions drakit reads (v1 preferred).
RESOURCE_API_VERSIONS = ("v1", "v1beta2", "v1beta1")
#: kubelet DRA gRPC services the node plugin serves, in the order it prefers them.
KUBELET_SERVICES = (
    "v1.DRAPlugin",
    "v1beta1.DRAPlugin",
    "v1.DRAResourceHealth",
    "v1alpha1.DRAResourceHealth",
)


def __getattr__(name: str) -> str:
    """``__version__``: the installed distribution's version, or ``0.0.0+unknown`` when
    running from a source tree without an install. Looked up once, then a plain attribute."""
    if name != "__version__":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import metadata  # noqa: PLC0415  (only when the version is read, see above)

    try:
        version = metadata.version("drakit")
    except metadata.PackageNotFoundError:
        version = "0.0.0+unknown"
    globals()["__version__"] = version  # later reads find it without calling this again
    return version
