"""``/metrics`` cannot be exhausted by whoever reaches its port: idle connections cost no
thread and are closed after the read timeout, the number of connections and threads is
bounded, and ``:PORT`` does not bind every interface (issue 30, item 4); connections are
bounded per client address, and a client sending its request slowly holds no worker
(issue 41, finding 1: the class of the webhook's slow clients)."""

from __future__ import annotations

import contextlib
import socket
import threading
import urllib.request
from collections.abc import Iterator
from dataclasses import replace

import pytest
from helpers.waiting import eventually

from drakit.telemetry import metrics
from drakit.telemetry.address import parse_address
from drakit.telemetry.boundedhttp import address_key
from drakit.telemetry.endpoint import Limits, MetricsEndpoint, serve

#: Long enough that no idle socket of a test is closed by the timeout while the test runs.
PATIENT = Limits(workers=2, max_connections=32, read_timeout=120.0, deadline=120.0)


@pytest.fixture
def registry() -> metrics.Registry:
    reg = metrics.Registry()
    metrics.Counter("served", "A sample to find in the answer.", registry=reg).inc()
    return reg


@contextlib.contextmanager
def endpoint(registry: metrics.Registry, limits: Limits) -> Iterator[MetricsEndpoint]:
    served = serve(registry, "127.0.0.1:0", limits)
    try:
        yield served
    finally:
        served.close()


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as response:
        return str(response.read().decode())


def open_idle(port: int, count: int, source: str = "127.0.0.1") -> list[socket.socket]:
    return [
        socket.create_connection(("127.0.0.1", port), timeout=30, source_address=(source, 0))
        for _ in range(count)
    ]


def wait_closed_by_peer(conn: socket.socket) -> bytes:
    """Block until the server closes ``conn`` or resets it, and return what it sent before;
    the 60 s socket timeout only ends a hung test."""
    conn.settimeout(60)
    received = b""
    try:
        while chunk := conn.recv(4096):
            received += chunk
    except ConnectionResetError:
        pass
    return received


def test_scrape_answers_while_hundreds_of_idle_connections_are_open_on_bounded_threads(
    registry: metrics.Registry,
) -> None:
    before = threading.active_count()
    with endpoint(registry, PATIENT) as served:
        idle = open_idle(served.port, 300)
        try:
            assert "served_total 1.0" in scrape(served.port)
            assert threading.active_count() <= before + PATIENT.workers + 1
            assert served.connections <= PATIENT.max_connections
        finally:
            for conn in idle:
                conn.close()


def test_connections_past_the_bound_close_the_oldest_idle_one(
    registry: metrics.Registry,
) -> None:
    with endpoint(registry, PATIENT) as served:
        idle = open_idle(served.port, PATIENT.max_connections)
        try:
            newest = open_idle(served.port, 1)
            assert wait_closed_by_peer(idle[0]) == b""
            assert "served_total" in scrape(served.port)
            newest[0].close()
        finally:
            for conn in idle:
                conn.close()


def test_connection_that_sends_nothing_is_closed_after_the_read_timeout(
    registry: metrics.Registry,
) -> None:
    limits = Limits(workers=1, max_connections=8, read_timeout=0.2, deadline=120.0)
    with (
        endpoint(registry, limits) as served,
        socket.create_connection(("127.0.0.1", served.port), timeout=30) as silent,
    ):
        assert wait_closed_by_peer(silent) == b""
        assert "served_total" in scrape(served.port)


def test_request_trickled_past_the_deadline_is_cut_off_and_frees_its_worker(
    registry: metrics.Registry,
) -> None:
    limits = Limits(workers=1, max_connections=8, read_timeout=120.0, deadline=0.5)
    with (
        endpoint(registry, limits) as served,
        socket.create_connection(("127.0.0.1", served.port), timeout=30) as slow,
    ):
        slow.sendall(b"GET /metrics HTTP/1.0\r\n")  # and never the end of the headers
        assert wait_closed_by_peer(slow).startswith(b"HTTP/1.1 408 ")
        assert "served_total" in scrape(served.port)  # the only worker is free again


def test_a_slow_request_holds_no_worker(registry: metrics.Registry) -> None:
    # One worker, and a client that sends its request a byte at a time: the request is read
    # by the listener as it comes, so the worker serves others meanwhile.
    limits = replace(PATIENT, workers=1)
    with endpoint(registry, limits) as served:
        slow = open_idle(served.port, 1, "127.0.0.2")[0]
        try:
            slow.sendall(b"GET /metrics HTTP/1.0\r\nX: ")
            eventually(lambda: served.busy == 1, what="the slow request begun", timeout=30)
            with urllib.request.urlopen(
                f"http://127.0.0.1:{served.port}/metrics", timeout=10
            ) as response:
                assert b"served_total" in response.read()
        finally:
            slow.close()


def test_connections_past_the_per_address_bound_are_refused_or_replace_that_addresss_idle_ones(
    registry: metrics.Registry,
) -> None:
    limits = replace(PATIENT, max_per_address=4)
    with endpoint(registry, limits) as served:
        other = open_idle(served.port, 1, "127.0.0.3")
        idle = open_idle(served.port, 4, "127.0.0.2")
        newest = open_idle(served.port, 1, "127.0.0.2")
        assert wait_closed_by_peer(idle[0]) == b""  # the address's oldest idle one, only
        for conn in idle[1:] + newest:
            conn.sendall(b"GET /metrics HTTP/1.0\r\n")  # begun: no longer idle
        eventually(lambda: served.busy == 4, what="four requests begun", timeout=30)
        refused = open_idle(served.port, 1, "127.0.0.2")[0]
        assert wait_closed_by_peer(refused) == b""
        assert "served_total" in scrape(served.port)
        other[0].settimeout(0.5)
        with pytest.raises(TimeoutError):  # another address's idle connection is left alone
            other[0].recv(1)
        for conn in other + idle + newest + [refused]:
            conn.close()


def test_a_head_longer_than_allowed_is_refused_before_it_ends(registry: metrics.Registry) -> None:
    with endpoint(registry, PATIENT) as served:
        conn = open_idle(served.port, 1)[0]
        conn.sendall(b"GET /metrics HTTP/1.0\r\nX: " + b"a" * PATIENT.max_head)
        assert wait_closed_by_peer(conn).startswith(b"HTTP/1.1 431 ")
        conn.close()
        assert "served_total" in scrape(served.port)


def test_connections_are_counted_per_ipv4_address_and_per_ipv6_64_network() -> None:
    assert address_key("10.0.0.1") != address_key("10.0.0.2")
    assert address_key("::ffff:10.0.0.1") == address_key("10.0.0.1")
    assert address_key("2001:db8:1:2::1") == address_key("2001:db8:1:2:ffff::9")  # one host's /64
    assert address_key("2001:db8:1:2::1") != address_key("2001:db8:1:3::1")
    assert address_key("fe80::1%eth0") == address_key("fe80::2")


def test_address_without_host_binds_the_pod_ip_and_else_loopback_never_every_interface() -> None:
    assert parse_address(":9400", {}) == ("127.0.0.1", 9400)
    assert parse_address(":9400", {"POD_IP": "10.1.2.3"}) == ("10.1.2.3", 9400)
    assert parse_address("0.0.0.0:9400", {"POD_IP": "10.1.2.3"}) == ("0.0.0.0", 9400)


def test_endpoint_started_with_only_a_port_listens_on_loopback_not_every_interface(
    registry: metrics.Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("POD_IP", raising=False)
    served = serve(registry, ":0", PATIENT)
    try:
        assert served.host == "127.0.0.1"
        assert "served_total" in scrape(served.port)
    finally:
        served.close()
