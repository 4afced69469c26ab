"""The webhook's HTTPS endpoint and certificates over real loopback TLS: reviews answered,
hostile requests refused without harm, a swapped certificate served from the next
connection. (The rotation order: test_rotation.py.)"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import threading
from collections.abc import Iterator

import pydantic
import pytest
from cryptography import x509

from drakit.node_plugin.config import validate_parameters
from drakit.webhook.certs import Issued, issue, server_context
from drakit.webhook.server import MAX_BODY, REVIEW_PATH, WebhookServer

DRIVER = "gpu.example.com"


class Params(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")
    interval: str = "Default"

    def validate_config(self) -> None:
        if self.interval != "Default":
            raise ValueError(f"unknown time-slice interval: {self.interval}")


class Served:
    def __init__(self, server: WebhookServer, issued: Issued) -> None:
        self.server = server
        self.issued = issued
        self.port = server.server_address[1]
        self.ready = threading.Event()

    def client(self, issued: Issued | None = None) -> http.client.HTTPSConnection:
        context = ssl.create_default_context(cadata=(issued or self.issued).ca_pem.decode())
        return http.client.HTTPSConnection("127.0.0.1", self.port, context=context, timeout=10)

    def post(self, body: bytes, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
        conn = self.client()
        try:
            conn.request("POST", REVIEW_PATH, body=body,
                         headers=headers or {"Content-Type": "application/json"})  # fmt: skip
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()

    def get(self, path: str) -> tuple[int, bytes]:
        conn = self.client()
        try:
            conn.request("GET", path)
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    issued = issue(("127.0.0.1", "webhook.example.svc"), 3600, name="test-webhook")
    ready = threading.Event()
    server = WebhookServer(
        ("127.0.0.1", 0),
        driver=DRIVER,
        validate=lambda params: validate_parameters(Params, params),
        ready=ready.is_set,
    )
    server.use(server_context(issued))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    s = Served(server, issued)
    s.ready = ready
    yield s
    server.shutdown()
    server.server_close()
    thread.join(10)


def review(interval: str) -> bytes:
    config = {"opaque": {"driver": DRIVER, "parameters": {"interval": interval}}}
    return json.dumps({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "abc", "operation": "CREATE",
            "resource": {"group": "resource.k8s.io", "version": "v1", "resource": "resourceclaims"},
            "object": {"metadata": {"name": "c", "namespace": "n"},
                       "spec": {"devices": {"config": [config]}}},
        },
    }).encode()  # fmt: skip


def test_a_review_is_answered_over_tls_verified_by_the_webhooks_own_ca(served: Served) -> None:
    status, body = served.post(review("Default"))
    assert status == 200
    assert json.loads(body)["response"] == {"uid": "abc", "allowed": True}
    status, body = served.post(review("Bogus"))
    response = json.loads(body)["response"]
    assert response["allowed"] is False
    assert "unknown time-slice interval: Bogus" in response["status"]["message"]


def test_serving_certificate_names_loopback_and_the_dns_names() -> None:
    issued = issue(("127.0.0.1", "hook.ns.svc"), 60, name="n")
    cert = x509.load_pem_x509_certificate(issued.cert_pem)
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert sans.get_values_for_type(x509.DNSName) == ["hook.ns.svc"]
    ca = x509.load_pem_x509_certificate(issued.ca_pem)
    assert cert.issuer == ca.subject
    assert ca.not_valid_after_utc > cert.not_valid_after_utc  # outlives it: overlap on rotation
    assert "PRIVATE KEY" not in repr(issued) and "PRIVATE KEY" not in str(issued)


def test_readyz_follows_the_published_bundle_and_livez_the_process(served: Served) -> None:
    served.ready.clear()
    assert served.get("/readyz")[0] == 503
    assert served.get("/livez")[0] == 200
    served.ready.set()
    assert served.get("/readyz") == (200, b"ok")


@pytest.mark.parametrize(
    ("body", "headers", "status"),
    [
        (b"{}", {"Content-Type": "text/plain"}, 415),
        (b"not json", {"Content-Type": "application/json"}, 400),
        (b'{"kind": "Pod"}', {"Content-Type": "application/json"}, 400),
        (b"[" * 300_000 + b"]" * 300_000, {"Content-Type": "application/json"}, 413),
        (b"[" * 300 + b"]" * 300, {"Content-Type": "application/json"}, 400),
    ],
    ids=["content-type", "not-json", "not-a-review", "deeply-nested-and-costly", "too-deep"],
)
def test_hostile_bodies_get_a_clear_status_and_the_server_lives_on(
    served: Served, body: bytes, headers: dict[str, str], status: int
) -> None:
    code, text = served.post(body, headers)
    assert code == status, text
    assert b"Traceback" not in text
    assert served.post(review("Default"))[0] == 200


def test_a_kept_alive_connection_gets_one_answer_per_request(served: Served) -> None:
    # The apiserver reuses its connections: anything sent after an answer (an answer to the
    # body read as a request) makes Go close the connection as "unsolicited". Raw TLS:
    # http.client would drop the extra bytes with its read buffer.
    context = ssl.create_default_context(cadata=served.issued.ca_pem.decode())
    raw = socket.create_connection(("127.0.0.1", served.port), timeout=30)
    with context.wrap_socket(raw, server_hostname="127.0.0.1") as conn:
        stream = conn.makefile("rb")
        for interval in ("Default", "Bogus", "Default"):
            body = review(interval)
            conn.sendall(
                f"POST {REVIEW_PATH} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n".encode()
                + body
            )
            assert stream.readline() == b"HTTP/1.1 200 OK\r\n"
            fields = dict(line.decode().split(":", 1) for line in iter(stream.readline, b"\r\n"))
            answer = json.loads(stream.read(int(fields["Content-Length"])))["response"]
            assert answer["allowed"] is (interval == "Default")


def test_a_body_over_the_limit_is_refused_before_it_is_read(served: Served) -> None:
    conn = served.client()
    conn.putrequest("POST", REVIEW_PATH)
    conn.putheader("Content-Type", "application/json")
    conn.putheader("Content-Length", str(MAX_BODY + 1))
    conn.endheaders()
    response = conn.getresponse()
    assert response.status == 413
    conn.close()


def test_a_chunked_body_is_refused(served: Served) -> None:
    # Headers only: the server answers before any chunk (sending them would race its close).
    conn = served.client()
    conn.putrequest("POST", REVIEW_PATH)
    conn.putheader("Content-Type", "application/json")
    conn.putheader("Transfer-Encoding", "chunked")
    conn.endheaders()
    response = conn.getresponse()
    assert response.status == 411
    conn.close()


def test_a_peer_that_never_speaks_tls_does_not_hold_up_others(served: Served) -> None:
    with (
        socket.create_connection(("127.0.0.1", served.port)),
        socket.create_connection(("127.0.0.1", served.port)) as raw,
    ):
        raw.sendall(b"GET / HTTP/1.1\r\n\r\n")  # plain HTTP on the TLS port
        assert served.post(review("Default"))[0] == 200


def test_a_swapped_certificate_is_served_from_the_next_connection(served: Served) -> None:
    fresh = issue(("127.0.0.1",), 3600, name="test-webhook")
    old = served.issued
    kept = served.client(old)
    kept.request("GET", "/livez")
    assert kept.getresponse().read() == b"ok"
    served.server.use(server_context(fresh))
    try:
        with pytest.raises(ssl.SSLCertVerificationError):
            served.client(old).request("GET", "/livez")
        conn = served.client(fresh)
        conn.request("GET", "/livez")
        assert conn.getresponse().status == 200
        conn.close()
        kept.request("GET", "/livez")  # a connection made before keeps its certificate
        assert kept.getresponse().status == 200
    finally:
        kept.close()
        served.server.use(server_context(old))
