"""A prepare whose claim GET gets a malformed answer reports that claim, and only that
claim, as unreadable (the API server's bytes come through a real socket on 127.0.0.1)."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from helpers.scriptedhttp import Reader, ScriptedServer
from pydantic import BaseModel

from drakit.kubeapi.lightclient import LightApiClient
from drakit.kubeapi.resources import RESOURCE_CLAIMS, Resource
from drakit.node_plugin.claims import ClaimError, ClaimReader
from drakit.plugin import ClaimRef


@pytest.fixture(
    params=[b"-5", b"ffffffffffffffffffffffff", b"1000000000"],
    ids=["negative", "beyond-64-bits", "64-GiB"],
)
def bad_chunk_server(request: pytest.FixtureRequest) -> Iterator[ScriptedServer]:
    """Answers every GET with a chunked body whose first chunk size is ``param``."""

    def answer(read: Reader, conn: socket.socket) -> None:
        while read():
            head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            conn.sendall(head + b"Transfer-Encoding: chunked\r\n\r\n" + request.param + b"\r\n")

    server = ScriptedServer(answer)
    yield server
    server.close()


def test_claim_whose_answer_has_a_bad_chunk_size_is_a_per_claim_error(
    bad_chunk_server: ScriptedServer,
) -> None:
    api = LightApiClient(f"http://127.0.0.1:{bad_chunk_server.port}", None)
    reader = ClaimReader(Resource(api, RESOURCE_CLAIMS), "gpu.example.com", BaseModel)
    refs = [ClaimRef("ns", "uid-1", "claim-1"), ClaimRef("ns", "uid-2", "claim-2")]
    try:
        outcomes = reader.read(refs, is_active=lambda: True)
    finally:
        reader.close()
        api.close()
    assert [type(o) for o in outcomes] == [ClaimError, ClaimError]
    assert all(
        isinstance(o, ClaimError) and o.reason == "ResourceClaimUnreadable" for o in outcomes
    )
    assert "ResourceClaim ns/claim-1" in str(outcomes[0])
    assert "chunk size" in str(outcomes[0])
