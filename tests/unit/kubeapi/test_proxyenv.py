"""drakit.kubeapi.proxyenv: Go's ProxyFromEnvironment decision, case by case (pure logic; the
tunnel itself is exercised through a real proxy in test_lightclient_transport.py)."""

from __future__ import annotations

import pytest

from drakit.kubeapi.proxyenv import Proxy, UnsupportedProxyError, proxy_for

PROXY = {"HTTPS_PROXY": "http://proxy.example:3128"}


def test_https_proxy_is_used_for_an_https_server() -> None:
    assert proxy_for("https://api.example:6443", PROXY) == Proxy("proxy.example", 3128)


def test_lowercase_variable_is_read_when_the_uppercase_one_is_unset() -> None:
    env = {"https_proxy": "proxy.example:8080"}  # no scheme: http:// as Go reads it
    assert proxy_for("https://api.example", env) == Proxy("proxy.example", 8080)


def test_proxy_credentials_are_kept_for_the_connect_request() -> None:
    env = {"HTTPS_PROXY": "http://user:p%40ss@proxy.example:3128"}
    assert proxy_for("https://api.example", env) == Proxy("proxy.example", 3128, "user", "p%40ss")


@pytest.mark.parametrize("server", ["https://localhost:6443", "https://127.0.0.5", "https://[::1]"])
def test_loopback_server_is_never_proxied(server: str) -> None:
    assert proxy_for(server, PROXY) is None


@pytest.mark.parametrize(
    ("no_proxy", "server"),
    [
        ("*", "https://api.example"),
        ("api.example", "https://api.example"),
        ("example", "https://api.example"),
        (".example", "https://api.example"),
        ("*.example", "https://api.example"),
        ("api.example:6443", "https://api.example:6443"),
        ("10.0.0.0/8", "https://10.1.2.3"),
        ("10.1.2.3", "https://10.1.2.3"),
        ("10.1.2.3:443", "https://10.1.2.3"),
        ("[fd00::1]:443", "https://[fd00::1]"),
        (" other.example , API.Example ", "https://api.example"),
    ],
)
def test_no_proxy_entry_sends_the_server_direct(no_proxy: str, server: str) -> None:
    assert proxy_for(server, {**PROXY, "NO_PROXY": no_proxy}) is None


@pytest.mark.parametrize(
    ("no_proxy", "server"),
    [
        (".api.example", "https://api.example"),  # a leading dot: subdomains only
        ("*.api.example", "https://api.example"),
        ("i.example", "https://api.example"),  # a suffix that is not a label
        ("api.example:443", "https://api.example:6443"),
        ("10.0.0.0/8", "https://11.0.0.1"),
        ("example", "https://10.1.2.3"),  # domains never match an address
        ("10.1.2.3:6443", "https://10.1.2.3"),
    ],
)
def test_no_proxy_entry_that_does_not_cover_the_server_keeps_the_proxy(
    no_proxy: str, server: str
) -> None:
    assert proxy_for(server, {**PROXY, "NO_PROXY": no_proxy}) is not None


def test_http_proxy_is_not_used_for_an_https_server() -> None:
    assert proxy_for("https://api.example", {"HTTP_PROXY": "http://proxy.example"}) is None


@pytest.mark.parametrize(
    ("env", "server", "variable"),
    [
        ({"HTTPS_PROXY": "socks5://proxy.example:1080"}, "https://api.example", "HTTPS_PROXY"),
        ({"HTTPS_PROXY": "https://proxy.example"}, "https://api.example", "HTTPS_PROXY"),
        ({"http_proxy": "http://proxy.example"}, "http://api.example", "http_proxy"),
    ],
)
def test_proxy_the_light_client_cannot_use_is_refused_naming_the_variable(
    env: dict[str, str], server: str, variable: str
) -> None:
    with pytest.raises(UnsupportedProxyError, match=rf"^\${variable} "):
        proxy_for(server, env)


def test_refusal_does_not_repeat_the_proxy_password() -> None:
    env = {"HTTPS_PROXY": "socks5://user:secret@proxy.example:1080"}
    with pytest.raises(UnsupportedProxyError) as caught:
        proxy_for("https://api.example", env)
    assert "secret" not in str(caught.value)
