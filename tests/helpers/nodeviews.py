"""Node views (``/debug/node-view`` documents) served over real HTTP, for the
``drakit devices --node`` tests."""

from __future__ import annotations

import contextlib
import http.server
import json
import threading
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["serving_view", "view"]


@contextlib.contextmanager
def serving_view(host: str, document: Mapping[str, Any]) -> Iterator[int]:
    """``document`` as JSON at /debug/node-view on ``host``; yields the port."""
    body = json.dumps(document).encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200 if self.path == "/debug/node-view" else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer((host, 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def view(node: str, claim: str, detail: str = "") -> dict[str, Any]:
    """A node view document as a plugin serves it."""
    return {
        "apiVersion": "drakit.dev/v1",
        "kind": "NodeView",
        "driver": "gpu.example.com",
        "node": node,
        "checkedAt": "2026-12-03T22:40:00Z",
        "error": "",
        "claims": [
            {
                "namespace": "team",
                "name": claim,
                "uid": str(uuid.uuid4()),
                "prepared": "completed",
                "devices": [f"{node}/gpu-0"],
                "containers": [
                    {"pod": "team/trainer", "container": "main", "devices": [f"{node}/gpu-0"]}
                ],
            }
        ],
        "findings": (
            [
                {
                    "kind": "leak",
                    "claim": f"team/{claim}",
                    "pods": [],
                    "devices": [f"{node}/gpu-0"],
                    "seconds": 912,
                    "detail": detail,
                }
            ]
            if detail
            else []
        ),
    }
