"""Sending a request again when the API server answers "retry after N seconds".

client-go's REST client (``rest/with_retry.go``) retries any request, whatever its
method, whose answer is 429 Too Many Requests or a 5xx that carries a ``Retry-After``
header of whole seconds: the server refused it before doing anything (API priority and
fairness rejecting a request, an apiserver shutting down). It waits the seconds asked,
takes a token of the client-side rate limiter again, and gives up after 10 retries,
returning the last answer. :func:`send_with_retry_after` does the same for both clients
(:class:`drakit.kubeapi.lightclient.LightApiClient` and
:class:`drakit.kubeapi.client.RateLimitedApiClient`)
with one bound more: no single wait is longer than :data:`MAX_WAIT_SECONDS`, so that a
wrong header cannot park a caller for hours.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Protocol, TypeVar

from drakit.kubeapi.errors import transport_errors
from drakit.telemetry.logs import get_logger

__all__ = ["MAX_RETRIES", "MAX_WAIT_SECONDS", "retry_after_seconds", "send_with_retry_after"]

logger = get_logger(__name__)

#: client-go's default ``maxRetries`` of a request.
MAX_RETRIES = 10
#: Longest single wait, whatever the header asks.
MAX_WAIT_SECONDS = 30
#: Largest refused answer whose body is read so that its connection can be reused
#: (client-go's ``maxBodySlurpSize``); a larger one is closed unread.
_SLURP_LIMIT = 2 * 1024

T = TypeVar("T")


class RefusedAnswer(Protocol):
    """What is read of an answer: urllib3's ``HTTPResponse`` and
    ``drakit.kubeapi.http11.Response``."""

    @property
    def status(self) -> int: ...
    @property
    def headers(self) -> Mapping[str, str]: ...
    @property
    def data(self) -> bytes: ...
    def release_conn(self) -> None: ...
    def close(self) -> None: ...


def retry_after_seconds(status: int, headers: Mapping[str, str]) -> int | None:
    """The seconds to wait before sending again (0 to MAX_WAIT_SECONDS), or None when the
    answer is final: client-go's ``checkWait``, 429 or 5xx with an integer Retry-After.

    ``headers`` must find the header by its lowercase name (both clients' mappings do).
    """
    if status != 429 and status < 500:
        return None
    value = (headers.get("retry-after") or "").strip()
    if not value.lstrip("+-").isdigit() or not value.isascii():
        return None  # an HTTP date or garbage: client-go's Atoi fails, no retry
    return max(0, min(int(value), MAX_WAIT_SECONDS))


def send_with_retry_after(
    send: Callable[[], T],
    answer_of: Callable[[T], RefusedAnswer],
    *,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """``send()`` until its answer is not a retry-after refusal, at most MAX_RETRIES more
    times; returns the last result. ``send`` must take the rate limiter's token itself
    (client-go throttles every retry too) and be safe to call again: only the server's
    refusal, which means nothing was done, leads to another call."""
    for attempt in range(1, MAX_RETRIES + 1):
        result = send()
        answer = answer_of(result)
        seconds = retry_after_seconds(answer.status, answer.headers)
        if seconds is None:
            return result
        _discard(answer)
        logger.debug(
            "API server asked to retry later",
            status=answer.status,
            retry_after=seconds,
            attempt=attempt,
        )
        sleep(seconds)
    return send()


def _discard(answer: RefusedAnswer) -> None:
    """Drop a refused answer, keeping its connection when its body is small."""
    length = (answer.headers.get("content-length") or "").strip()
    try:
        if length.isdigit() and int(length) <= _SLURP_LIMIT:
            answer.data  # noqa: B018  (reads the body to its end, so the connection is reusable)
            answer.release_conn()
            return
    except transport_errors():
        pass  # the connection is closed below
    answer.close()
    answer.release_conn()  # urllib3 frees the pool's slot; for http11 a no-op after close
