"""A real HTTP/1.1 server on 127.0.0.1 whose answers each test scripts, and a CONNECT proxy.

Tests of ``drakit.kubeapi.http11`` and the light client need what the apiserver does not do on
demand (close an idle connection, cut an answer short, ask to retry later). Traffic stays
on loopback: the proxy tunnels every ``CONNECT`` to 127.0.0.1, whatever host it names.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
from collections.abc import Callable

__all__ = ["ConnectProxy", "Handler", "Reader", "ScriptedServer", "ok"]

#: Reads one request (up to its blank line and Content-Length body) from a connection's
#: file and returns its request line, or b"" when the client closed the connection.
Reader = Callable[[], bytes]
#: Serves one connection: gets the reader and the socket, answers as the test wants.
Handler = Callable[[Reader, socket.socket], None]


def ok(body: bytes) -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)


class ScriptedServer:
    """Accepts connections on 127.0.0.1 and hands each to ``handler`` on its own thread;
    with ``tls``, each connection is a TLS server connection of that context first."""

    def __init__(self, handler: Handler, tls: ssl.SSLContext | None = None) -> None:
        self.handler = handler
        self.tls = tls
        self.connections = 0
        self.requests: list[bytes] = []
        self.headers: list[dict[bytes, bytes]] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._threads: list[threading.Thread] = []
        self._accepting = threading.Thread(target=self._accept, daemon=True)
        self._accepting.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            self.connections += 1
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            if self.tls is not None:
                conn = self.tls.wrap_socket(conn, server_side=True)
        except OSError:  # a handshake the client refused (the test looks at its side)
            conn.close()
            return
        reader = conn.makefile("rb")

        def read_request() -> bytes:
            line = reader.readline()
            length = 0
            headers: dict[bytes, bytes] = {}
            while (header := reader.readline()) not in (b"\r\n", b""):
                name, _, value = header.partition(b":")
                headers[name.strip().lower()] = value.strip()
                if name.strip().lower() == b"content-length":
                    length = int(value)
            reader.read(length)
            if line:
                self.requests.append(line.strip())
                self.headers.append(headers)
            return line

        try:
            self.handler(read_request, conn)
        except OSError:
            pass
        finally:
            reader.close()
            conn.close()

    def close(self) -> None:
        self._listener.close()
        for thread in self._threads:
            thread.join(5)


class ConnectProxy:
    """An HTTP proxy on 127.0.0.1 that answers ``CONNECT host:port`` with a tunnel to
    127.0.0.1:port; ``targets`` lists the authorities asked for, in order."""

    def __init__(self) -> None:
        self.targets: list[str] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._tunnel, args=(client,), daemon=True).start()

    def _tunnel(self, client: socket.socket) -> None:
        with contextlib.ExitStack() as stack:
            stack.callback(client.close)
            head = b""
            while not head.endswith(b"\r\n\r\n"):
                byte = client.recv(1)
                if not byte:
                    return
                head += byte
            method, authority, _ = head.split(b" ", 2)
            if method != b"CONNECT":
                client.sendall(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
                return
            self.targets.append(authority.decode())
            port = int(authority.rsplit(b":", 1)[1])
            upstream = socket.create_connection(("127.0.0.1", port))
            stack.callback(upstream.close)
            client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            pump = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
            pump.start()
            _pump(client, upstream)
            pump.join(10)

    def close(self) -> None:
        self._listener.close()


def _pump(source: socket.socket, sink: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := source.recv(65536):
            sink.sendall(data)
        sink.shutdown(socket.SHUT_WR)
