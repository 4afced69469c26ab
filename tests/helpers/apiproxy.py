"""A TLS proxy in front of a local cluster's kube-apiserver that sees every request.

Tests that must count the requests a component makes, or refuse some of them the way API
priority and fairness does (429 with ``Retry-After``), point the component at
:meth:`ApiProxy.write_kubeconfig`. The proxy serves TLS with the apiserver's own serving
certificate (valid for 127.0.0.1), reads each request, records it, and either answers it
itself (when :attr:`ApiProxy.refuse` says so) or sends it to the apiserver over a new TLS
connection with the cluster's admin credentials and streams the answer back, watches
included. Each forwarded request gets ``Connection: close`` on both legs, so the proxy never
has to find where an answer ends.
"""

from __future__ import annotations

import contextlib
import io
import json
import socket
import ssl
import threading
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from drakit.localcluster import LocalCluster

__all__ = ["ApiProxy", "Request"]

_MAX_HEAD = 64 * 1024


@dataclass(frozen=True)
class Request:
    """One request as the proxy read it."""

    method: str
    path: str
    query: dict[str, str]

    @property
    def watch(self) -> bool:
        return self.query.get("watch") in ("true", "1")


class ApiProxy:
    """Listens on 127.0.0.1; ``refuse(request)`` returns the Retry-After seconds of a 429
    for a request the proxy must refuse, or None to forward it. Thread-safe counters."""

    def __init__(self, cluster: LocalCluster) -> None:
        certs = cluster.certs
        assert certs is not None, "the cluster is not running"
        self._cluster = cluster
        upstream = urllib.parse.urlsplit(cluster.server)
        self._upstream = (upstream.hostname or "127.0.0.1", upstream.port or 443)
        self._serve_tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._serve_tls.load_cert_chain(certs.serving_cert, certs.serving_key)
        self._upstream_tls = ssl.create_default_context(cafile=str(certs.ca_cert))
        self._upstream_tls.load_cert_chain(certs.admin_cert, certs.admin_key)
        self.refuse: Callable[[Request], int | None] = lambda _request: None
        self.requests: list[Request] = []
        self.refused: list[Request] = []
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True, name="apiproxy").start()

    def write_kubeconfig(self, path: Path) -> str:
        """An admin kubeconfig that reaches the apiserver through this proxy."""
        self._cluster.write_kubeconfig(path, f"https://127.0.0.1:{self.port}")
        return str(path)

    def count(self, match: Callable[[Request], bool]) -> int:
        with self._lock:
            return sum(1 for r in self.requests if match(r))

    def close(self) -> None:
        """Stop accepting and cut every connection (watches end)."""
        self._listener.close()
        with self._lock:
            sockets = list(self._sockets)
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    # -- serving -------------------------------------------------------------------------------

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _track(self, sock: socket.socket, add: bool) -> None:
        with self._lock:
            if add:
                self._sockets.add(sock)
            else:
                self._sockets.discard(sock)

    def _serve(self, raw: socket.socket) -> None:
        try:
            conn = self._serve_tls.wrap_socket(raw, server_side=True)
        except OSError:
            raw.close()
            return
        self._track(conn, True)
        try:
            reader = conn.makefile("rb")
            while True:
                head = _read_head(reader)
                if head is None:
                    return
                request, lines, body = _parse(head, reader)
                with self._lock:
                    self.requests.append(request)
                wait = self.refuse(request)
                if wait is None:
                    self._forward(conn, lines, body)
                    return  # the answer said Connection: close
                with self._lock:
                    self.refused.append(request)
                conn.sendall(_too_many_requests(wait))
        except (OSError, ValueError):
            return
        finally:
            self._track(conn, False)
            with contextlib.suppress(OSError):
                conn.close()

    def _forward(self, conn: ssl.SSLSocket, lines: list[bytes], body: bytes) -> None:
        upstream = self._upstream_tls.wrap_socket(
            socket.create_connection(self._upstream, timeout=30),
            server_hostname=self._upstream[0],
        )
        upstream.settimeout(None)  # a watch is quiet for minutes
        self._track(upstream, True)
        try:
            kept = [ln for ln in lines[1:] if not ln.lower().startswith(b"connection:")]
            head = b"\r\n".join([lines[0], *kept, b"Connection: close", b"", b""])
            upstream.sendall(head + body)
            while chunk := upstream.recv(65536):
                conn.sendall(chunk)
        finally:
            self._track(upstream, False)
            upstream.close()


def _read_head(reader: io.BufferedReader) -> bytes | None:
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        line = reader.readline(_MAX_HEAD)
        if not line:
            return None
        head += line
        if len(head) > _MAX_HEAD:
            raise ValueError("request head too long")
    return head


def _parse(head: bytes, reader: io.BufferedReader) -> tuple[Request, list[bytes], bytes]:
    lines = head[:-4].split(b"\r\n")
    method, target, _version = lines[0].decode("latin-1").split(" ", 2)
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
        if name.strip().lower() == b"transfer-encoding":
            raise ValueError("chunked request bodies are not supported by the test proxy")
    body = reader.read(length) if length else b""
    url = urllib.parse.urlsplit(target)
    query = dict(urllib.parse.parse_qsl(url.query, keep_blank_values=True))
    return Request(method, url.path, query), lines, body


def _too_many_requests(seconds: int) -> bytes:
    status = {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": "too many requests (refused by the test proxy)",
        "reason": "TooManyRequests",
        "code": 429,
    }
    body = json.dumps(status).encode()
    return (
        b"HTTP/1.1 429 Too Many Requests\r\n"
        + f"Retry-After: {seconds}\r\n".encode()
        + b"Content-Type: application/json\r\n"
        + f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
