"""The metrics endpoint waits for a taken port instead of failing the plugin
(host-network DaemonSet pods overlap during a rolling update)."""

from __future__ import annotations

import socket
import urllib.request

from helpers.waiting import eventually

from drakit.node_plugin.metrics import PluginMetrics, serve_metrics


def _listen() -> socket.socket:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", 0))
    s.listen()
    return s


def test_endpoint_serves_once_a_taken_port_is_released() -> None:
    holder = _listen()
    port = holder.getsockname()[1]
    endpoint = serve_metrics(PluginMetrics(), f"127.0.0.1:{port}")
    try:
        assert not endpoint.serving
        assert endpoint.port == port
        holder.close()
        eventually(lambda: endpoint.serving, "the endpoint to serve once the port is free", 30)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
            assert b"drakit_node_plugin_registered" in resp.read()
    finally:
        endpoint.close()
        holder.close()


def test_endpoint_on_a_free_port_serves_at_once() -> None:
    endpoint = serve_metrics(PluginMetrics(), "127.0.0.1:0")
    try:
        assert endpoint.serving and endpoint.port != 0
    finally:
        endpoint.close()
