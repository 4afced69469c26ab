"""Connection-pool sizing for clients used by many threads at once.

The Kubernetes client keeps at most ``connection_pool_maxsize`` idle HTTPS connections per host
(default: 5 x CPU count). A controller with more workers than that throws connections away
and pays a TLS handshake for most requests ("Connection pool is full, discarding connection").
"""

from __future__ import annotations

from typing import Any

from drakit.kubeapi.errors import MissingKubernetesError

try:  # the kubernetes extra (drakit[kubernetes]); see kubeapi.client
    from kubernetes.client import rest
except ImportError as missing:
    raise MissingKubernetesError() from missing

__all__ = ["widen_connection_pool"]


def widen_connection_pool(api: Any, size: int) -> None:
    """Let ``api`` (a ``kubernetes.client.ApiClient``) keep ``size`` connections per host.

    Call right after building the client, before it is shared between threads.
    """
    if size < 1:
        raise ValueError(f"connection pool size must be at least 1, got {size}")
    api.configuration.connection_pool_maxsize = size
    api.rest_client = rest.RESTClientObject(api.configuration)
