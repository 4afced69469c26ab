"""Version facts of this build of drakit and of what it targets."""

from importlib import metadata

try:
    __version__ = metadata.version("drakit")
except metadata.PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0.0.0+unknown"

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
