"""``HOST:PORT`` addresses of the metrics endpoints (no Prometheus import: CLIs check flags
with it before anything heavy is loaded)."""

from __future__ import annotations

__all__ = ["parse_address"]


def parse_address(address: str) -> tuple[str, int]:
    """Split ``HOST:PORT`` (``:PORT`` means all interfaces); ValueError if malformed."""
    host, sep, port_text = address.rpartition(":")
    if not sep or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ValueError(f"{address!r} is not HOST:PORT (for example :8080 or 127.0.0.1:8080)")
    return host.strip("[]") or "0.0.0.0", int(port_text)
