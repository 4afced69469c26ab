"""Which proxy, if any, a request to the API server goes through: Go's rules, from the environment.

client-go's transport takes its proxy from ``http.ProxyFromEnvironment`` (package
``golang.org/x/net/http/httpproxy``), so a cluster reached through ``HTTPS_PROXY`` with
exceptions in ``NO_PROXY`` works the same for drakit as for kubectl. The rules, as Go's:

* ``HTTPS_PROXY`` (else ``https_proxy``) for ``https://`` servers, ``HTTP_PROXY`` (else
  ``http_proxy``) for ``http://`` ones; a value without a scheme means ``http://``.
* Never for ``localhost`` or a loopback address.
* ``NO_PROXY`` (else ``no_proxy``): comma-separated entries, ``*`` for every host; an IP
  address (optionally ``:port``) or a CIDR range matches that address; a domain matches
  itself and its subdomains (``example.com`` and ``.example.com`` and ``*.example.com``
  alike for subdomains; only the form without a leading dot matches the name itself),
  optionally limited to one ``:port``. Domains never match an IP address.

:func:`proxy_for` returns the :class:`Proxy` of a server URL, or None for a direct
connection; it raises :class:`UnsupportedProxyError` naming the variable for a proxy that
:mod:`drakit.kubeapi.http11` cannot use (anything but an ``http://`` proxy for an ``https://``
server), so that the caller can hand the configuration to a client that can.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import SplitResult, urlsplit

from drakit.kubeapi.errors import ConfigError

__all__ = ["Proxy", "UnsupportedProxyError", "proxy_for"]

_DEFAULT_PORTS = {"http": 80, "https": 443}
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class UnsupportedProxyError(ConfigError):
    """The environment names a proxy the light HTTP client cannot use."""


@dataclass(frozen=True)
class Proxy:
    """An HTTP proxy that opens ``CONNECT`` tunnels; credentials still percent-encoded."""

    host: str
    port: int
    username: str = ""
    password: str = ""


def proxy_for(server: str, environ: Mapping[str, str] | None = None) -> Proxy | None:
    """The proxy for requests to ``server`` (``https://host[:port]``), None for none."""
    env = os.environ if environ is None else environ
    target = urlsplit(server)
    names = (
        ("HTTPS_PROXY", "https_proxy") if target.scheme == "https" else ("HTTP_PROXY", "http_proxy")
    )
    variable, value = _first_set(env, names)
    if not value:
        return None
    host = (target.hostname or "").lower()
    port = target.port or _DEFAULT_PORTS.get(target.scheme, 0)
    if not _use_proxy(host, port, _first_set(env, ("NO_PROXY", "no_proxy"))[1]):
        return None
    return _parse_proxy(variable, value, target.scheme)


def _first_set(env: Mapping[str, str], names: tuple[str, str]) -> tuple[str, str]:
    for name in names:
        if env.get(name):
            return name, env[name]
    return names[0], ""


def _parse_proxy(variable: str, value: str, scheme: str) -> Proxy:
    parts = urlsplit(value)
    if not parts.scheme or not parts.netloc:
        parts = urlsplit("http://" + value)  # Go's reading of a bare host:port
    try:
        port = parts.port
    except ValueError as err:
        raise ConfigError(f"${variable} {value!r}: {err}") from err
    if parts.scheme != "http" or scheme != "https" or not parts.hostname:
        raise UnsupportedProxyError(
            f"${variable} {_without_password(parts)!r}: only an http:// proxy for an "
            "https:// API server is supported by the light client"
        )
    return Proxy(
        host=parts.hostname,
        port=port or 80,
        username=parts.username or "",
        password=parts.password or "",
    )


def _without_password(parts: SplitResult) -> str:
    host = parts.hostname or ""
    return f"{parts.scheme}://{host}" + (f":{parts.port}" if parts.port else "")


def _use_proxy(host: str, port: int, no_proxy: str) -> bool:
    """False when ``host`` is loopback or matches an entry of ``no_proxy``."""
    if not host or host == "localhost":
        return False
    ip = _ip(host)
    if ip is not None and ip.is_loopback:
        return False
    return not any(_matches(entry, host, port, ip) for entry in _entries(no_proxy))


def _entries(no_proxy: str) -> list[str]:
    return [e for e in (raw.strip().lower() for raw in no_proxy.split(",")) if e]


def _matches(entry: str, host: str, port: int, ip: IPAddress | None) -> bool:
    """Whether one ``NO_PROXY`` entry covers ``host:port`` (see the module's rules)."""
    if entry == "*":
        return True
    if "/" in entry:
        try:
            network = ipaddress.ip_network(entry, strict=False)
        except ValueError:
            return False  # Go skips an entry it cannot read
        return ip is not None and ip.version == network.version and ip in network
    entry_host, entry_port = _split_port(entry)
    if not entry_host:
        return False
    if entry_port and entry_port != str(port):
        return False
    entry_ip = _ip(entry_host)
    if entry_ip is not None:
        return ip is not None and ip == entry_ip
    if ip is not None:
        return False
    if entry_host.startswith("*."):
        entry_host = entry_host[1:]
    if entry_host.startswith("."):
        return host.endswith(entry_host)
    return host == entry_host or host.endswith("." + entry_host)


def _split_port(entry: str) -> tuple[str, str]:
    """``host:port`` or ``[v6]:port`` apart; an entry without a port is all host."""
    if entry.startswith("["):
        host, bracket, rest = entry[1:].partition("]")
        if bracket and rest.startswith(":") and rest[1:].isdigit():
            return host, rest[1:]
        return host if bracket and not rest else entry, ""
    host, colon, port = entry.rpartition(":")
    if colon and port.isdigit() and ":" not in host:
        return host, port
    return entry, ""


def _ip(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None
