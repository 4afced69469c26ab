"""A local Kubernetes control plane (etcd, kube-apiserver, optionally
kube-scheduler and kube-controller-manager) for drakit's tests and demo.

One launcher serves the pytest fixtures, ``make demo`` and
``hack/local-cluster.sh``. See ``cluster.py`` for the contract.
"""

from drakit.localcluster.assets import MissingBinaryError
from drakit.localcluster.cluster import DEFAULT_FEATURE_GATES, ClusterConfig, LocalCluster
from drakit.localcluster.process import PortInUseError, StartError

__all__ = [
    "DEFAULT_FEATURE_GATES",
    "ClusterConfig",
    "LocalCluster",
    "MissingBinaryError",
    "PortInUseError",
    "StartError",
]
