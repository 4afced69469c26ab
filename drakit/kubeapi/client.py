"""Client construction: from a kubeconfig file, or from the pod's service account.

``load_client`` returns a ``kubernetes.client.ApiClient`` (a subclass that applies a
client-side QPS/burst limit, like client-go's rest.Config), so the rest of ``kubeapi`` and the
generated typed APIs can both use it. As client-go's REST client it waits out and retries
answers that ask for it (:mod:`drakit.kubeapi.retryafter`); urllib3's own retries are narrowed to
what Go's transport replays (a PUT or DELETE whose answer was lost is not sent again). Its
JSON bodies are written as Go writes them (:mod:`drakit.kubeapi.gojson`), not with the
``json.dumps`` of the package's REST layer, whose ``", "`` separators the apiserver keeps
in opaque parameters and then finds changed by its own re-encoding on every later patch.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import urllib3

from drakit.kubeapi import gojson
from drakit.kubeapi.errors import ConfigError, MissingKubernetesError
from drakit.kubeapi.http11 import REPLAYABLE_METHODS
from drakit.kubeapi.ratelimit import TokenBucket
from drakit.kubeapi.retryafter import send_with_retry_after
from drakit.telemetry.logs import get_logger

# `kubernetes` is the extra drakit[kubernetes]: a program that gets here without it stops
# with one line naming the extra (a ConfigError, which every command prints as is) instead
# of an ImportError's traceback.
try:
    from kubernetes import client as k8s_client
    from kubernetes import config as k8s_config
    from kubernetes.client import rest as k8s_rest
except ImportError as missing:
    raise MissingKubernetesError() from missing

__all__ = [
    "DEFAULT_BURST",
    "DEFAULT_QPS",
    "DEFAULT_TIMEOUT",
    "RateLimitedApiClient",
    "context_namespace",
    "load_client",
]

logger = get_logger(__name__)

# Controllers in 1.37 run with QPS 50 / burst 100 (the client-go default of 5/10 is far too low
# for a scheduler-like component); the apiserver's priority-and-fairness is the real guard.
DEFAULT_QPS = 50.0
DEFAULT_BURST = 100
# (connect, read) seconds for ordinary requests; watches set their own read timeout.
DEFAULT_TIMEOUT = (10.0, 60.0)

CONNECTION_POOL_SIZE = 64

_IN_CLUSTER_HOST_ENV = "KUBERNETES_SERVICE_HOST"


#: urllib3's retries: connection failures, and read failures of replayable methods only
#: (its default also replays PUT and DELETE); answers are never retried here, but by
#: ``send_with_retry_after`` as client-go does.
URLLIB3_RETRIES = urllib3.Retry(
    total=3, allowed_methods=REPLAYABLE_METHODS, respect_retry_after_header=False
)


class GoJsonRestClient(k8s_rest.RESTClientObject):
    """The kubernetes package's REST layer, writing JSON bodies as Go does.

    Its ``request`` writes a structured body (what ``sanitize_for_serialization`` made of a
    model, or drakit's plain dicts) with ``json.dumps``' defaults; this one writes it with
    :func:`drakit.kubeapi.gojson.dumps` and sends the bytes as they are. Bodies already
    encoded, form posts and requests without a body take the package's own path.
    """

    def request(
        self,
        method: str,
        url: str,
        headers: dict[str, str] | None = None,
        body: Any = None,
        post_params: Any = None,
        _request_timeout: Any = None,
    ) -> Any:
        headers = headers or {}
        content_type = headers.get("Content-Type") or "application/json"
        matches: Any = k8s_rest.contenttype_matches
        if (
            body is None
            or post_params
            or isinstance(body, (str, bytes))
            or not matches(content_type, "application", "json")
            or (content_type == "application/json-patch+json" and not isinstance(body, list))
        ):
            send: Any = super().request  # the package's own path (untyped)
            return send(method, url, headers, body, post_params, _request_timeout)
        headers.setdefault("Content-Type", content_type)
        try:
            response = self.pool_manager.request(
                method,
                url,
                body=gojson.dumps(body),
                timeout=_urllib3_timeout(_request_timeout),
                headers=headers,
                preload_content=False,
            )
        except urllib3.exceptions.SSLError as err:  # as the package reports it
            raise k8s_client.ApiException(status=0, reason=f"{type(err).__name__}\n{err}") from err
        return k8s_rest.RESTResponse(response)


def _urllib3_timeout(timeout: Any) -> urllib3.Timeout | None:
    """The package's reading of ``_request_timeout``: a total, or (connect, read)."""
    if not timeout:
        return None
    if isinstance(timeout, (int, float)):
        return urllib3.Timeout(total=timeout)
    if isinstance(timeout, tuple) and len(timeout) == 2:
        return urllib3.Timeout(connect=timeout[0], read=timeout[1])
    return None


class RateLimitedApiClient(k8s_client.ApiClient):
    """An ApiClient that waits for a token before every request it sends, and sends it
    again after the wait an answer asks for (:func:`send_with_retry_after`); its JSON
    bodies are written as Go writes them (:class:`GoJsonRestClient`)."""

    def __init__(self, configuration: Any, *, qps: float, burst: int) -> None:
        super().__init__(configuration)
        self.rest_client.close()
        self.rest_client = GoJsonRestClient(configuration)
        self.rate_limiter = TokenBucket(qps, burst)
        self.default_timeout = DEFAULT_TIMEOUT

    def call_api(self, *args: Any, **kwargs: Any) -> Any:
        call = super().call_api

        def send() -> Any:
            self.rate_limiter.wait()
            return call(*args, **kwargs)

        return send_with_retry_after(send, lambda answer: answer.response)


def load_client(
    kubeconfig: str | None = None,
    *,
    context: str | None = None,
    qps: float = DEFAULT_QPS,
    burst: int = DEFAULT_BURST,
    user_agent: str = "drakit",
) -> RateLimitedApiClient:
    """Build an API client.

    With ``kubeconfig`` set, that file must work. Without it: the pod's service account when
    running in a cluster, else ``$KUBECONFIG``, else ``~/.kube/config``. Raises ConfigError
    naming what was tried when none of these works.
    """
    configuration = k8s_client.Configuration()
    source = _configure(configuration, kubeconfig, context)
    # Every informer holds a connection for its watch and workers run requests in parallel;
    # the default pool (5 per CPU) would keep discarding connections under that load.
    configuration.connection_pool_maxsize = CONNECTION_POOL_SIZE
    configuration.retries = URLLIB3_RETRIES
    logger.debug("Loaded API client configuration", source=source, host=configuration.host)
    api = RateLimitedApiClient(configuration, qps=qps, burst=burst)
    api.user_agent = user_agent
    return api


def _configure(configuration: Any, kubeconfig: str | None, context: str | None) -> str:
    if kubeconfig:
        _load_kubeconfig(configuration, kubeconfig, context)
        return kubeconfig
    tried: list[str] = []
    if os.environ.get(_IN_CLUSTER_HOST_ENV):
        try:
            k8s_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        except k8s_config.ConfigException as err:
            tried.append(f"in-cluster service account: {err}")
        else:
            return "in-cluster"
    else:
        tried.append(f"in-cluster service account: ${_IN_CLUSTER_HOST_ENV} is not set")
    for path in _default_kubeconfig_paths():
        if Path(path).is_file():
            _load_kubeconfig(configuration, path, context)
            return path
        tried.append(f"kubeconfig {path}: no such file")
    raise ConfigError("no Kubernetes API configuration found; tried " + "; ".join(tried))


def _default_kubeconfig_paths() -> list[str]:
    from_env = [p for p in os.environ.get("KUBECONFIG", "").split(os.pathsep) if p]
    return from_env or [str(Path("~/.kube/config").expanduser())]


def _load_kubeconfig(configuration: Any, path: str, context: str | None) -> None:
    if not Path(path).is_file():
        raise ConfigError(f"kubeconfig {path}: no such file")
    try:
        k8s_config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=path, context=context, client_configuration=configuration
        )
    except (k8s_config.ConfigException, OSError, ValueError, KeyError, TypeError) as err:
        raise ConfigError(f"kubeconfig {path}: {err}") from err


def context_namespace(kubeconfig: str | None = None, context: str | None = None) -> str:
    """The namespace a kubeconfig context names (kubectl's default namespace), else "default".

    Reads the same file ``load_client`` would; never fails (a missing or odd file: "default").
    """
    paths = [kubeconfig] if kubeconfig else _default_kubeconfig_paths()
    for path in paths:
        if not Path(path).is_file():
            continue
        try:
            contexts, active = k8s_config.list_kube_config_contexts(config_file=path)  # type: ignore[no-untyped-call]
        except (k8s_config.ConfigException, OSError, ValueError, KeyError, TypeError):
            return "default"
        chosen = (
            next((c for c in contexts if c.get("name") == context), None) if context else active
        )
        namespace = ((chosen or {}).get("context") or {}).get("namespace")
        return str(namespace) if namespace else "default"
    return "default"


def plain_client(kubeconfig: str) -> Any:
    """A plain ``kubernetes.client.ApiClient`` for ``kubeconfig``: no rate limit, for the
    local-cluster launcher and tests that use the generated typed APIs. Programs use
    :func:`load_client`."""
    return k8s_config.new_client_from_config(config_file=kubeconfig)  # type: ignore[no-untyped-call]
