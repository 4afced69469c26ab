"""The chaos proxy with real sockets: a tiny echo server upstream, and the real apiserver
(a kubeapi informer through the proxy loses its watch on a cut and recovers)."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.waiting import eventually

from drakit.kubeapi.client import load_client
from drakit.kubeapi.informer import Informer
from drakit.kubeapi.resources import RESOURCE_CLAIMS, Resource
from soak.chaosproxy import ChaosProxy
from soak.checker_world import proxied_kubeconfig


class EchoServer:
    """Echoes every byte back on each connection until the peer closes; 127.0.0.1 only."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.1)
        self.port = self.listener.getsockname()[1]
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._accept, daemon=True)]
        self._threads[0].start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            thread = threading.Thread(target=self._echo, args=(conn,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _echo(self, conn: socket.socket) -> None:
        conn.settimeout(0.1)
        with conn:
            while not self._stop.is_set():
                try:
                    data = conn.recv(65536)
                except TimeoutError:
                    continue
                except OSError:
                    return
                if not data:
                    return
                with contextlib.suppress(OSError):
                    conn.sendall(data)

    def close(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(5)
        self.listener.close()


@pytest.fixture
def echo() -> Iterator[EchoServer]:
    server = EchoServer()
    yield server
    server.close()


@pytest.fixture
def proxy(echo: EchoServer) -> Iterator[ChaosProxy]:
    with ChaosProxy("127.0.0.1", echo.port) as running:
        yield running


def connect(proxy: ChaosProxy) -> socket.socket:
    return socket.create_connection(("127.0.0.1", proxy.port), timeout=10)


def roundtrip(sock: socket.socket, payload: bytes) -> bytes:
    """Send ``payload`` (from a thread: the echo may fill the buffers) and read it back."""
    sender = threading.Thread(target=sock.sendall, args=(payload,), daemon=True)
    sender.start()
    got = b""
    while len(got) < len(payload):
        chunk = sock.recv(65536)
        if not chunk:
            break
        got += chunk
    sender.join(10)
    return got


def refused(proxy: ChaosProxy) -> bool:
    """Whether a new connection is reset (RST) at connect or at first use, rather than
    served or closed with a FIN."""
    try:
        with connect(proxy) as sock:
            sock.sendall(b"x")
            sock.recv(1)
    except (ConnectionResetError, BrokenPipeError):
        return True
    return False


def test_pass_mode_forwards_bytes_both_ways_unchanged(proxy: ChaosProxy) -> None:
    payload = bytes(range(256)) * 1000
    with connect(proxy) as sock:
        assert roundtrip(sock, payload) == payload
    stats = eventually(lambda: (s := proxy.stats())["active"] == 0 and s)
    assert stats["accepted"] == 1 and stats["up"] == stats["down"] == len(payload)


def test_drop_new_resets_new_connections_and_keeps_established_ones(proxy: ChaosProxy) -> None:
    with connect(proxy) as established:
        assert roundtrip(established, b"before") == b"before"
        proxy.set_mode("drop_new")
        assert refused(proxy)
        assert roundtrip(established, b"during") == b"during"
        proxy.set_mode("pass")
        with connect(proxy) as later:
            assert roundtrip(later, b"after") == b"after"
    assert proxy.stats()["dropped"] == 1
    assert proxy.stats()["faults"] == {"drop_new": 1}


def test_reset_all_resets_established_connections_and_new_ones_while_it_lasts(
    proxy: ChaosProxy,
) -> None:
    with connect(proxy) as established:
        assert roundtrip(established, b"hello") == b"hello"
        proxy.set_mode("reset_all")
        established.settimeout(10)
        with pytest.raises(ConnectionResetError):
            while established.recv(1):
                pass
        assert refused(proxy)
    proxy.set_mode("pass")
    with connect(proxy) as later:
        assert roundtrip(later, b"back") == b"back"


def test_cut_all_resets_established_connections_once(proxy: ChaosProxy) -> None:
    with connect(proxy) as first, connect(proxy) as second:
        assert roundtrip(first, b"1") == b"1" and roundtrip(second, b"2") == b"2"
        assert proxy.cut_all() == 2
        for sock in (first, second):
            with pytest.raises(ConnectionResetError):
                while sock.recv(1):
                    pass
    assert proxy.mode == "pass"
    with connect(proxy) as later:
        assert roundtrip(later, b"still works") == b"still works"
    assert proxy.stats()["faults"] == {"cut": 1}


def test_blackhole_holds_data_until_the_mode_ends(proxy: ChaosProxy) -> None:
    with connect(proxy) as established:
        assert roundtrip(established, b"ping") == b"ping"
        proxy.set_mode("blackhole")
        established.sendall(b"held")
        eventually(lambda: proxy.stats()["held_up"] == 1, "the proxy holding the data")
        established.setblocking(False)
        with pytest.raises(BlockingIOError):  # nothing went upstream, so nothing came back
            established.recv(4)
        with connect(proxy) as newcomer:  # accepted, but not connected upstream yet
            newcomer.sendall(b"queued")
            proxy.set_mode("pass")
            established.settimeout(10)
            newcomer.settimeout(10)
            assert established.recv(4) == b"held"
            assert newcomer.recv(6) == b"queued"


def test_delay_mode_delivers_every_chunk_late_but_intact(proxy: ChaosProxy) -> None:
    with connect(proxy) as sock:
        proxy.set_mode("delay", delay=0.3)
        started = time.monotonic()
        assert roundtrip(sock, b"slow") == b"slow"
        # Both directions wait: a lower bound only (a slow machine cannot make it fail).
        assert time.monotonic() - started >= 0.6


def test_bad_arguments_are_refused_with_the_reason() -> None:
    with pytest.raises(ValueError, match="not a loopback address"):
        ChaosProxy("10.0.0.1", 6443)
    with pytest.raises(ValueError, match="not an IP address"):
        ChaosProxy("example.com", 6443)
    proxy = ChaosProxy("127.0.0.1", 6443)
    with pytest.raises(ValueError, match="mode 'flap' is not one of"):
        proxy.set_mode("flap")
    with pytest.raises(ValueError, match="delay"):
        proxy.set_mode("delay", delay=0)


def test_stop_resets_connections_and_frees_the_port(echo: EchoServer) -> None:
    proxy = ChaosProxy("127.0.0.1", echo.port).start()
    with connect(proxy) as sock:
        assert roundtrip(sock, b"x") == b"x"
        proxy.stop()
        with pytest.raises(ConnectionResetError):
            while sock.recv(1):
                pass
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", proxy.port), timeout=5).close()


# -- the real apiserver ------------------------------------------------------------------


def make_claim(claims: Resource, namespace: str) -> str:
    name = f"c-{uuid.uuid4().hex[:6]}"
    request = {"name": "gpu", "exactly": {"deviceClassName": "any"}}
    claims.create(
        {
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"devices": {"requests": [request]}},
        }
    )
    return name


@pytest.mark.parametrize("fault", ["cut", "reset_all", "blackhole"])
def test_an_informer_through_the_proxy_loses_its_watch_and_recovers(
    cluster: Any, api: Any, namespace: str, tmp_path: Path, fault: str
) -> None:
    port = int(cluster.server.rsplit(":", 1)[1])
    with ChaosProxy("127.0.0.1", port) as proxy:
        client = load_client(proxied_kubeconfig(cluster.kubeconfig, proxy.port, tmp_path), qps=0)
        direct = Resource(api, RESOURCE_CLAIMS)
        informer = Informer(
            Resource(client, RESOURCE_CLAIMS, request_timeout=(2.0, 3.0)), namespace=namespace
        )
        informer.start()
        try:
            assert informer.wait_for_sync(60)
            first = make_claim(direct, namespace)
            eventually(lambda: informer.store.get_by_name(first, namespace))
            if fault == "cut":
                assert proxy.cut_all() >= 1
            else:
                proxy.set_mode(fault)
                stats = proxy.stats()
                hidden = make_claim(direct, namespace)
                # Proof the fault stood between the informer and the new claim: the watch's
                # next data (the claim's event) held by the blackhole, or, with the watch
                # reset, the informer's next connection refused.
                proof = "held_down" if fault == "blackhole" else "dropped"
                eventually(lambda: proxy.stats()[proof] > stats[proof], f"the proxy {proof}")
                assert informer.store.get_by_name(hidden, namespace) is None
                proxy.set_mode("pass")
            after = make_claim(direct, namespace)
            eventually(lambda: informer.store.get_by_name(after, namespace), timeout=90)
            if fault != "blackhole":  # the watch's connection was reset: listed again
                assert informer.relists >= 1 and proxy.stats()["reset"] >= 1
        finally:
            informer.stop()
            client.close()
