"""A small REST client for components that only need :class:`drakit.kubeapi.resources.Resource`.

``Resource`` sends every request through two calls of its ``api`` object,
``param_serialize`` and ``call_api``. :class:`LightApiClient` implements exactly
those two over one pool of :mod:`drakit.kubeapi.http11` connections, so a process that never
touches the generated typed APIs (the node plugin, the controller) need not import
``kubernetes`` at all: that package imports every API model and pydantic (about 21 MiB
of RSS) and its request path costs about 1 ms per call more than urllib3 on the same
connection, and urllib3's about 0.5 ms more than ``drakit.kubeapi.http11``.

What it understands: a kubeconfig whose context names a server with
``certificate-authority(-data)``, ``insecure-skip-tls-verify``, ``tls-server-name``
and a user with ``client-certificate(-data)``/``client-key(-data)``, ``token`` or
``tokenFile``; and the pod's service account (token re-read every minute, as
client-go does, because projected tokens rotate). Client certificate files are re-read
when they change (:mod:`drakit.kubeapi.clientcert`). A proxy named by ``HTTPS_PROXY`` (with the
exceptions of ``NO_PROXY``, :mod:`drakit.kubeapi.proxyenv`) is used as client-go uses it.
Answers that ask to retry later (429, or 5xx with ``Retry-After``) are retried as
client-go does (:mod:`drakit.kubeapi.retryafter`). Anything else (``exec`` or
``auth-provider`` plugins, a kubeconfig ``proxy-url``, a proxy other than ``http://``,
basic auth, several kubeconfig files to merge) raises :class:`UnsupportedConfigError`;
:func:`load_light_client` then falls back to the full client of
:func:`drakit.kubeapi.client.load_client`, so every kubeconfig that works there still works.
"""

from __future__ import annotations

import base64
import json
import os
import ssl
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

from drakit.kubeapi import gojson
from drakit.kubeapi.clientcert import RotatingTLSContext
from drakit.kubeapi.documents import DocumentError, parse_document
from drakit.kubeapi.errors import ConfigError, MissingKubernetesError
from drakit.kubeapi.http11 import ConnectionPool, Response
from drakit.kubeapi.proxyenv import Proxy, UnsupportedProxyError, proxy_for
from drakit.kubeapi.ratelimit import TokenBucket
from drakit.kubeapi.retryafter import send_with_retry_after

__all__ = ["LightApiClient", "UnsupportedConfigError", "load_light_client"]

DEFAULT_QPS = 50.0
DEFAULT_BURST = 100
POOL_SIZE = 16
TOKEN_REFRESH_SECONDS = 60.0
SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
_IN_CLUSTER_HOST_ENV = "KUBERNETES_SERVICE_HOST"
_IN_CLUSTER_PORT_ENV = "KUBERNETES_SERVICE_PORT"
_USER_KEYS = frozenset(
    {
        "client-certificate",
        "client-certificate-data",
        "client-key",
        "client-key-data",
        "token",
        "tokenFile",
    }
)
_CLUSTER_KEYS = frozenset(
    {
        "server",
        "certificate-authority",
        "certificate-authority-data",
        "insecure-skip-tls-verify",
        "tls-server-name",
        "extensions",
    }
)


class UnsupportedConfigError(ConfigError):
    """The configuration needs a feature only the full kubernetes client has."""


class _NoKubeconfigError(UnsupportedConfigError):
    """No configuration at all (no service account, no kubeconfig file): the full client
    tries the same places and says so in its own words."""


@dataclass(frozen=True)
class _Answer:
    """What ``call_api`` returns: ``Resource`` reads ``.response`` (status, ``data``,
    ``stream()``, ``release_conn()``, ``shutdown()``: the parts of urllib3's it uses)."""

    response: Response


class TokenSource:
    """A bearer token, fixed or read from a file that is re-read every minute."""

    def __init__(
        self,
        token: str = "",
        path: Path | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._token = token
        self._path = path
        self._clock = clock
        self._read_at = float("-inf")
        self._lock = threading.Lock()

    def __call__(self) -> str:
        if self._path is None:
            return self._token
        with self._lock:
            if self._clock() - self._read_at >= TOKEN_REFRESH_SECONDS:
                try:
                    self._token = self._path.read_text(encoding="utf-8").strip()
                except OSError as err:
                    if not self._token:  # keep the last good token through a hiccup
                        raise ConfigError(f"token file {self._path}: {err}") from err
                self._read_at = self._clock()
            return self._token


class LightApiClient:
    """``param_serialize`` + ``call_api`` over :class:`drakit.kubeapi.http11.ConnectionPool`, with
    a client-side QPS/burst limit. ``proxy`` and ``tls_source`` are passed to the pool."""

    def __init__(
        self,
        server: str,
        ssl_context: ssl.SSLContext | None,
        *,
        token: Callable[[], str] = lambda: "",
        server_hostname: str | None = None,
        qps: float = DEFAULT_QPS,
        burst: int = DEFAULT_BURST,
        user_agent: str = "drakit",
        pool_size: int = POOL_SIZE,
        fast_json: bool = False,
        proxy: Proxy | None = None,
        tls_source: Callable[[], ssl.SSLContext] | None = None,
    ) -> None:
        self.host = server.rstrip("/")
        self.user_agent = user_agent
        self.rate_limiter = TokenBucket(qps, burst)
        self._token = token
        #: How ``Resource`` decodes this client's answers and watch events.
        self.json_loads: Callable[[bytes], Any] = json.loads
        self._json_dumps: Callable[[Any], bytes] = gojson.dumps
        if fast_json:
            # orjson decodes about 3x and encodes about 10x faster than json; loaded only
            # for a client that asks (the controller), not in the node plugin, whose idle
            # RSS it would raise by about 1.4 MiB.
            import orjson  # noqa: PLC0415

            self.json_loads = orjson.loads
            self._json_dumps = gojson.dumps_fast
        parts = urlsplit(self.host)
        self._origin = f"{parts.scheme}://{parts.netloc}"
        self.pool = ConnectionPool(
            self._origin,
            ssl_context,
            server_hostname=server_hostname,
            maxsize=pool_size,
            proxy=proxy,
            tls_source=tls_source,
        )

    def param_serialize(  # noqa: PLR0917  (the kubernetes client's signature)
        self,
        method: str,
        resource_path: str,
        query_params: list[tuple[str, str]] | None = None,
        header_params: Mapping[str, str] | None = None,
        body: Any = None,
        auth_settings: list[str] | None = None,
    ) -> tuple[str, str, dict[str, str], bytes | None, None]:
        """Method, URL, headers and encoded body of a request (as the kubernetes client)."""
        del auth_settings  # the bearer token, if any, is always sent
        url = self.host + resource_path
        if query_params:
            url += "?" + urlencode(query_params)
        headers = {"User-Agent": self.user_agent, **(header_params or {})}
        token = self._token()
        if token:
            headers["Authorization"] = f"Bearer {token}"
        data = None if body is None else self._json_dumps(body)
        return method, url, headers, data, None

    def call_api(
        self,
        method: str,
        url: str,
        header_params: Mapping[str, str] | None = None,
        body: bytes | None = None,
        _request_timeout: tuple[float, float] | float | None = None,
    ) -> _Answer:
        """Send the request after a token of the rate limiter; the body is not read yet.

        An answer asking to retry later is waited out and the request sent again
        (:func:`drakit.kubeapi.retryafter.send_with_retry_after`, a token each time).
        ``url`` must be on this client's server (``param_serialize`` made it).
        """
        if not url.startswith(self.host + "/"):
            raise ValueError(f"{method} {url[:200]!r}: not on the server {self.host}")
        timeout: tuple[float | None, float | None]
        if isinstance(_request_timeout, tuple):
            timeout = _request_timeout
        else:
            timeout = (_request_timeout, _request_timeout)

        def send() -> Response:
            self.rate_limiter.wait()
            return self.pool.request(
                method,
                url[len(self._origin) :],  # the server's own path prefix, if any, included
                headers=header_params or {},
                body=body,
                timeout=timeout,
            )

        return _Answer(send_with_retry_after(send, lambda response: response))

    def close(self) -> None:
        self.pool.clear()


def load_light_client(
    kubeconfig: str | None = None,
    *,
    qps: float = DEFAULT_QPS,
    burst: int = DEFAULT_BURST,
    user_agent: str = "drakit",
    pool_size: int = POOL_SIZE,
    fast_json: bool = False,
) -> Any:
    """A :class:`LightApiClient` for the configuration ``load_client`` would pick.

    Same order: ``kubeconfig`` if given, else the pod's service account, else
    ``$KUBECONFIG``, else ``~/.kube/config``. Falls back to the full client
    (``drakit.kubeapi.client.load_client``) for configurations it does not understand.
    ``pool_size`` connections per host are kept open for reuse: at least one per thread
    that sends requests at the same time, or the surplus pays a TLS handshake each.
    ``fast_json`` decodes and encodes with orjson (the full client ignores it).
    """
    try:
        return _light_client(
            kubeconfig,
            qps=qps,
            burst=burst,
            user_agent=user_agent,
            pool_size=pool_size,
            fast_json=fast_json,
        )
    except UnsupportedConfigError as unsupported:
        try:
            from drakit.kubeapi.client import load_client  # noqa: PLC0415  (imports kubernetes: only here)
            from drakit.kubeapi.pool import widen_connection_pool  # noqa: PLC0415
        except MissingKubernetesError:
            # Without the extra, say what the light client could not do and which extra
            # does it; a missing file is just that (the full client would only repeat it).
            if isinstance(unsupported, _NoKubeconfigError):
                raise ConfigError(str(unsupported)) from None
            raise MissingKubernetesError(str(unsupported)) from None

        api = load_client(kubeconfig, qps=qps, burst=burst, user_agent=user_agent)
        widen_connection_pool(api, pool_size)
        return api


def _light_client(
    kubeconfig: str | None,
    *,
    qps: float,
    burst: int,
    user_agent: str,
    pool_size: int,
    fast_json: bool,
) -> LightApiClient:
    limits: dict[str, Any] = {
        "qps": qps, "burst": burst, "user_agent": user_agent, "pool_size": pool_size,
        "fast_json": fast_json,
    }  # fmt: skip
    if kubeconfig:
        return from_kubeconfig(Path(kubeconfig), **limits)
    if os.environ.get(_IN_CLUSTER_HOST_ENV):
        return in_cluster(**limits)
    paths = [p for p in os.environ.get("KUBECONFIG", "").split(os.pathsep) if p]
    if len(paths) > 1:
        raise UnsupportedConfigError("$KUBECONFIG names several files to merge")
    path = Path(paths[0]) if paths else Path("~/.kube/config").expanduser()
    if not path.is_file():
        raise _NoKubeconfigError(f"kubeconfig {path}: no such file")  # the full client says why
    return from_kubeconfig(path, **limits)


def in_cluster(*, folder: Path = SERVICE_ACCOUNT_DIR, **limits: Any) -> LightApiClient:
    """The pod's service account: API server from the environment, CA and token from files."""
    host = os.environ.get(_IN_CLUSTER_HOST_ENV, "")
    port = os.environ.get(_IN_CLUSTER_PORT_ENV, "443")
    if not host or not port.isdigit():
        raise ConfigError(f"in-cluster service account: ${_IN_CLUSTER_HOST_ENV}/PORT not usable")
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    server = f"https://{host}:{port}"
    context = ssl.create_default_context(cafile=str(folder / "ca.crt"))
    token = TokenSource(path=folder / "token")
    token()  # fail now, with the file's name, rather than on the first request
    return LightApiClient(server, context, token=token, proxy=_proxy(server), **limits)


def _proxy(server: str) -> Proxy | None:
    """The environment's proxy for ``server``; UnsupportedConfigError for one http11
    cannot use (the full client then serves the configuration)."""
    try:
        return proxy_for(server)
    except UnsupportedProxyError as err:
        raise UnsupportedConfigError(str(err)) from err


def from_kubeconfig(path: Path, **limits: Any) -> LightApiClient:
    """A client for the current context of one kubeconfig file."""
    try:
        document = parse_document(path.read_text(encoding="utf-8"))
    except FileNotFoundError as err:
        raise ConfigError(f"kubeconfig {path}: no such file") from err
    except OSError as err:
        raise ConfigError(f"kubeconfig {path}: {err.strerror or err}") from err
    except DocumentError as err:
        raise ConfigError(f"kubeconfig {path}: {err}") from err
    if not isinstance(document, dict):
        raise ConfigError(f"kubeconfig {path}: not a mapping")
    context = _named(document, "contexts", document.get("current-context"), path)
    cluster = _named(document, "clusters", context.get("cluster"), path)
    user = _named(document, "users", context.get("user"), path) if context.get("user") else {}
    if set(cluster) - _CLUSTER_KEYS or set(user) - _USER_KEYS:
        extra = sorted((set(cluster) - _CLUSTER_KEYS) | (set(user) - _USER_KEYS))
        raise UnsupportedConfigError(f"kubeconfig {path}: needs the full client for {extra}")
    server = str(cluster.get("server") or "")
    if not server.startswith(("https://", "http://")):
        raise ConfigError(f"kubeconfig {path}: cluster server {server!r} is not an http(s) URL")
    proxy = _proxy(server)
    ssl_context, tls_source = (
        _tls(path, cluster, user) if server.startswith("https://") else (None, None)
    )
    token_file = user.get("tokenFile")
    token = TokenSource(
        token=str(user.get("token") or ""),
        path=_relative(path, token_file) if token_file else None,
    )
    return LightApiClient(
        server,
        ssl_context,
        token=token,
        server_hostname=cluster.get("tls-server-name"),
        proxy=proxy,
        tls_source=tls_source,
        **limits,
    )


def _tls(
    path: Path, cluster: dict[str, Any], user: dict[str, Any]
) -> tuple[ssl.SSLContext, RotatingTLSContext | None]:
    """The cluster's TLS context, and what rebuilds it when client certificate files change."""
    cert_files = [
        _relative(path, user[k]) for k in ("client-certificate", "client-key") if user.get(k)
    ]
    if not cert_files:
        return _ssl_context(path, cluster, user), None
    source = RotatingTLSContext(lambda: _ssl_context(path, cluster, user), cert_files)
    return source(), source


def _named(document: dict[str, Any], section: str, name: Any, path: Path) -> dict[str, Any]:
    for item in document.get(section) or ():
        if isinstance(item, dict) and item.get("name") == name:
            body = item.get(section[:-1])
            if isinstance(body, dict):
                return body
    raise ConfigError(f"kubeconfig {path}: no {section[:-1]} named {name!r}")


def _relative(kubeconfig: Path, value: Any) -> Path:
    """Paths in a kubeconfig are relative to the file's folder."""
    return kubeconfig.parent / Path(str(value)).expanduser()


def _ssl_context(path: Path, cluster: dict[str, Any], user: dict[str, Any]) -> ssl.SSLContext:
    """TLS for the kubeconfig's cluster. A cluster with a certificate authority trusts that
    authority only, as client-go does (its RootCAs are then the kubeconfig's CA alone);
    the system's trust store is loaded only for a cluster without one. Loading the system
    store as well would trust every public CA and cost about 1 MiB of resident memory."""
    try:
        if cluster.get("certificate-authority-data"):
            ca = base64.b64decode(cluster["certificate-authority-data"]).decode("ascii")
            context = ssl.create_default_context(cadata=ca)
        elif cluster.get("certificate-authority"):
            ca_file = _relative(path, cluster["certificate-authority"])
            context = ssl.create_default_context(cafile=str(ca_file))
        else:
            context = ssl.create_default_context()
        if cluster.get("insecure-skip-tls-verify"):
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        cert = _pem(path, user, "client-certificate")
        key = _pem(path, user, "client-key")
        if cert and key:
            _load_chain(context, cert, key)
        elif cert or key:
            raise ConfigError(f"kubeconfig {path}: a client certificate needs its key and back")
    except (ValueError, OSError, ssl.SSLError) as err:
        raise ConfigError(f"kubeconfig {path}: TLS material: {err}") from err
    return context


def _pem(path: Path, user: dict[str, Any], key: str) -> bytes:
    if user.get(f"{key}-data"):
        return base64.b64decode(user[f"{key}-data"])
    if user.get(key):
        return _relative(path, user[key]).read_bytes()
    return b""


def _load_chain(context: ssl.SSLContext, cert: bytes, key: bytes) -> None:
    """``load_cert_chain`` reads files only: write both to a private folder, load, delete."""
    with tempfile.TemporaryDirectory(prefix="drakit-tls-") as folder:
        cert_file, key_file = Path(folder) / "cert.pem", Path(folder) / "key.pem"
        for file, data in ((cert_file, cert), (key_file, key)):
            fd = os.open(file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as out:
                out.write(data)
        context.load_cert_chain(str(cert_file), str(key_file))
