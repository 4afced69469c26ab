"""The light client's transport against real servers on 127.0.0.1: TLS names, a proxy from
the environment, rotated client certificates, and answers that ask to retry later.

The apiserver of the integration tests cannot be made to present another name, sit behind
a proxy or refuse with 429 on demand; these servers can (certificates made by the test).
"""

from __future__ import annotations

import datetime
import hashlib
import json
import shutil
import socket
import ssl
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from helpers.scriptedhttp import ConnectProxy, Handler, Reader, ScriptedServer, ok
from helpers.waiting import eventually

from drakit.kubeapi.client import load_client
from drakit.kubeapi.errors import ApiUnavailable, ServerError, TooManyRequests
from drakit.kubeapi.lightclient import LightApiClient, UnsupportedConfigError, from_kubeconfig
from drakit.kubeapi.resources import NAMESPACES, Resource
from drakit.kubeapi.retryafter import MAX_RETRIES
from drakit.localcluster.certs import CertPaths, write_certificates

Connect = Callable[[str, ScriptedServer], Resource]
SERVER_NAME = "apiserver.test"  # never resolved: only the proxy below sees it
NAMESPACE = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}}


@pytest.fixture
def servers() -> Iterator[list[ScriptedServer]]:
    started: list[ScriptedServer] = []
    yield started
    for server in started:
        server.close()


@pytest.fixture
def connect(tmp_path: Path) -> Iterator[Callable[[str, ScriptedServer], Resource]]:
    """``connect(kind, server)``: Namespaces through a "light" or "full" client of the
    plain-HTTP ``server``; the clients are closed after the test."""
    clients: list[Any] = []

    def make(kind: str, server: ScriptedServer) -> Resource:
        url = f"http://127.0.0.1:{server.port}"
        if kind == "light":
            api: Any = LightApiClient(url, None)
        else:
            api = load_client(str(kubeconfig(tmp_path, url, {})))
        clients.append(api)
        return Resource(api, NAMESPACES)

    yield make
    for api in clients:
        api.close()


@pytest.fixture
def certs(tmp_path: Path) -> CertPaths:
    """A CA, a serving certificate for SERVER_NAME only, and an admin client certificate."""
    return write_certificates(tmp_path / "pki", hosts=(SERVER_NAME,))


@pytest.fixture(autouse=True)
def no_proxy_from_the_host(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)


def answer_with_peer_certificate(read: Reader, conn: socket.socket) -> None:
    """Answers every request with the Namespace, naming the client certificate's digest."""
    assert isinstance(conn, ssl.SSLSocket)
    peer = conn.getpeercert(binary_form=True) or b""
    body = {**NAMESPACE, "peer": hashlib.sha256(peer).hexdigest() if peer else ""}
    while read():
        conn.sendall(ok(json.dumps(body).encode()))


def tls_server(
    servers: list[ScriptedServer], certs: CertPaths, *, client_cas: tuple[Path, ...] = ()
) -> tuple[ScriptedServer, list[str]]:
    """A TLS server with ``certs``' serving certificate; it asks for a client certificate
    from ``client_cas`` when given. Returns it and the server names clients asked for."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certs.serving_cert, certs.serving_key)
    for ca in client_cas:
        context.load_verify_locations(ca)
    if client_cas:
        context.verify_mode = ssl.CERT_REQUIRED
    names: list[str] = []

    def note_server_name(_sock: ssl.SSLObject, name: str | None, _ctx: ssl.SSLContext) -> None:
        names.append(name or "")

    context.sni_callback = note_server_name
    server = ScriptedServer(answer_with_peer_certificate, tls=context)
    servers.append(server)
    return server, names


def kubeconfig(
    tmp_path: Path, server: str, cluster: dict[str, Any], user: dict[str, Any] | None = None
) -> Path:
    path = tmp_path / "kubeconfig"
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server, **cluster}}],
        "users": [{"name": "u", "user": user or {}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    path.write_text(yaml.safe_dump(config))
    return path


def test_server_certificate_for_another_name_is_refused(
    servers: list[ScriptedServer], certs: CertPaths, tmp_path: Path
) -> None:
    server, _ = tls_server(servers, certs)
    config = kubeconfig(
        tmp_path, f"https://127.0.0.1:{server.port}", {"certificate-authority": str(certs.ca_cert)}
    )
    api = from_kubeconfig(config)
    with pytest.raises(ApiUnavailable, match="IP address mismatch"):
        Resource(api, NAMESPACES).get("default")


def test_tls_server_name_is_the_name_sent_and_checked_instead_of_the_address(
    servers: list[ScriptedServer], certs: CertPaths, tmp_path: Path
) -> None:
    server, names = tls_server(servers, certs)
    cluster = {"certificate-authority": str(certs.ca_cert), "tls-server-name": SERVER_NAME}
    api = from_kubeconfig(kubeconfig(tmp_path, f"https://127.0.0.1:{server.port}", cluster))
    assert Resource(api, NAMESPACES).get("default")["metadata"]["name"] == "default"
    assert names == [SERVER_NAME]
    api.close()


def test_https_proxy_from_the_environment_tunnels_the_requests(
    servers: list[ScriptedServer],
    certs: CertPaths,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server, _ = tls_server(servers, certs)
    proxy = ConnectProxy()
    monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{proxy.port}")
    monkeypatch.setenv("NO_PROXY", "other.test,10.0.0.0/8")
    cluster = {"certificate-authority": str(certs.ca_cert)}
    api = from_kubeconfig(kubeconfig(tmp_path, f"https://{SERVER_NAME}:{server.port}", cluster))
    try:
        assert Resource(api, NAMESPACES).get("default")["metadata"]["name"] == "default"
        assert proxy.targets == [f"{SERVER_NAME}:{server.port}"]
    finally:
        api.close()
        proxy.close()


def test_proxy_the_light_client_cannot_use_is_refused_naming_the_variable(
    certs: CertPaths, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "socks5://127.0.0.1:1080")
    config = kubeconfig(
        tmp_path, f"https://{SERVER_NAME}:6443", {"certificate-authority": str(certs.ca_cert)}
    )
    with pytest.raises(UnsupportedConfigError, match=r"\$HTTPS_PROXY"):
        from_kubeconfig(config)


def test_rotated_client_certificate_files_are_presented_on_later_requests(
    servers: list[ScriptedServer], certs: CertPaths, tmp_path: Path
) -> None:
    rotated_cert, rotated_key = client_certificate(certs, tmp_path / "rotated")
    server, _ = tls_server(servers, certs, client_cas=(certs.ca_cert,))
    cert_file, key_file = tmp_path / "client.crt", tmp_path / "client.key"
    shutil.copyfile(certs.admin_cert, cert_file)
    shutil.copyfile(certs.admin_key, key_file)
    cluster = {"certificate-authority": str(certs.ca_cert), "tls-server-name": SERVER_NAME}
    user = {"client-certificate": "client.crt", "client-key": "client.key"}
    api = from_kubeconfig(kubeconfig(tmp_path, f"https://127.0.0.1:{server.port}", cluster, user))
    namespaces = Resource(api, NAMESPACES)
    try:
        assert namespaces.get("default")["peer"] == digest(certs.admin_cert)
        # Rotation as kubelet-style tools do it: new files renamed over the old ones.
        for source, target in ((rotated_cert, cert_file), (rotated_key, key_file)):
            shutil.copyfile(source, target.with_suffix(".new"))
            target.with_suffix(".new").replace(target)
        wanted = digest(rotated_cert)
        eventually(
            lambda: namespaces.get("default")["peer"] == wanted,
            what="a request presenting the rotated certificate",
            timeout=30,
        )
    finally:
        api.close()


def client_certificate(certs: CertPaths, folder: Path) -> tuple[Path, Path]:
    """Another client certificate from the same CA (what a rotation brings)."""
    ca_key = serialization.load_pem_private_key(certs.ca_key.read_bytes(), password=None)
    ca_cert = x509.load_pem_x509_certificate(certs.ca_cert.read_bytes())
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "rotated")]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .sign(ca_key, hashes.SHA256())
    )
    folder.mkdir()
    cert_file, key_file = folder / "client.crt", folder / "client.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_file, key_file


def digest(pem_file: Path) -> str:
    der = ssl.PEM_cert_to_DER_cert(pem_file.read_text())
    return hashlib.sha256(der).hexdigest()


def refuse_then_answer(refusals: int, refusal: bytes) -> Handler:
    """Answers the first ``refusals`` requests (over all connections) with ``refusal``."""
    count = [0]

    def handler(read: Reader, conn: socket.socket) -> None:
        while read():
            count[0] += 1
            answer = refusal if count[0] <= refusals else ok(json.dumps(NAMESPACE).encode())
            conn.sendall(answer)

    return handler


TOO_MANY = b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 0\r\nContent-Length: 2\r\n\r\n{}"


def plain_server(servers: list[ScriptedServer], handler: Handler) -> ScriptedServer:
    server = ScriptedServer(handler)
    servers.append(server)
    return server


CLIENTS = ("light", "full")


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("method", ["GET", "POST"])
def test_answer_429_with_retry_after_is_sent_again_until_it_succeeds(
    servers: list[ScriptedServer], connect: Connect, client: str, method: str
) -> None:
    server = plain_server(servers, refuse_then_answer(2, TOO_MANY))
    namespaces = connect(client, server)
    if method == "GET":
        assert namespaces.get("default")["metadata"]["name"] == "default"
    else:
        assert namespaces.create(NAMESPACE)["metadata"]["name"] == "default"
    assert [line.split()[0] for line in server.requests] == [method.encode()] * 3


@pytest.mark.parametrize("client", CLIENTS)
def test_retry_after_refusals_are_retried_ten_times_then_reported(
    servers: list[ScriptedServer], connect: Connect, client: str
) -> None:
    server = plain_server(servers, refuse_then_answer(100, TOO_MANY))
    with pytest.raises(TooManyRequests):
        connect(client, server).get("default")
    assert len(server.requests) == 1 + MAX_RETRIES


def test_server_error_with_retry_after_is_retried_and_without_it_is_not(
    servers: list[ScriptedServer], connect: Connect
) -> None:
    unavailable = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n"
    asked = unavailable.replace(b"\r\n\r\n", b"\r\nRetry-After: 0\r\n\r\n", 1)
    server = plain_server(servers, refuse_then_answer(1, asked))
    assert connect("light", server).get("default")["metadata"]["name"] == "default"
    plain = plain_server(servers, refuse_then_answer(1, unavailable))
    with pytest.raises(ServerError):
        connect("light", plain).get("default")
    assert len(plain.requests) == 1


def test_full_client_does_not_send_a_put_again_when_its_answer_was_lost(
    servers: list[ScriptedServer], connect: Connect
) -> None:
    def answer_once_then_close(read: Reader, conn: socket.socket) -> None:
        read()
        conn.sendall(ok(json.dumps(NAMESPACE).encode()))
        read()  # the PUT arrives whole; the connection closes without an answer

    server = plain_server(servers, answer_once_then_close)
    namespaces = connect("full", server)
    namespaces.update({**NAMESPACE, "metadata": {"name": "default", "resourceVersion": "1"}})
    with pytest.raises(ApiUnavailable):
        namespaces.update({**NAMESPACE, "metadata": {"name": "default", "resourceVersion": "1"}})
    assert [line.split()[0] for line in server.requests] == [b"PUT", b"PUT"]
