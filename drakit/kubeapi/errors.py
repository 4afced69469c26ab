"""Errors raised by drakit's API access layer.

Callers branch on the exception type, never on HTTP status codes. The apiserver's own
``Status`` message and field causes are kept so that a caller can log or report them as-is::

    ApiError                   any failed request to the API server
    ├── ApiUnavailable         no HTTP answer at all (connection refused, reset, timeout)
    ├── BadRequest             400
    ├── Unauthorized           401
    ├── Forbidden              403
    ├── NotFound               404
    ├── Conflict               409 (stale resourceVersion, failed precondition)
    │   └── AlreadyExists      409 with reason AlreadyExists
    ├── Gone                   410 (resourceVersion too old: relist)
    ├── Invalid                422 (validation failed; see ``causes``)
    ├── TooManyRequests        429
    └── ServerError            5xx

``InvalidPathSegment`` (also a ``ValueError``) is raised before any request: a
namespace, name or subresource that cannot be one URL path segment.

``ConfigError`` is separate: no usable kubeconfig or in-cluster environment.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

from drakit.kubeapi import deepjson

__all__ = [
    "AlreadyExists",
    "ApiError",
    "ApiUnavailable",
    "BadRequest",
    "Cause",
    "ConfigError",
    "Conflict",
    "Forbidden",
    "Gone",
    "Invalid",
    "InvalidPathSegment",
    "MissingKubernetesError",
    "NotFound",
    "ServerError",
    "TooManyRequests",
    "Unauthorized",
    "error_from_status",
    "transport_errors",
]


class ConfigError(Exception):
    """No way to reach an API server: no usable kubeconfig and not running in a pod."""


class MissingKubernetesError(ConfigError):
    """The path needs the full ``kubernetes`` client, an extra that is not installed.

    Its text is one line naming the extra, so a program prints it as is.
    """

    def __init__(self, reason: str = "the kubernetes client is not installed") -> None:
        super().__init__(f"{reason}; install the extra: pip install 'drakit[kubernetes]'")


class InvalidPathSegment(ValueError):
    """A namespace, name or subresource that would not stay one URL path segment."""


@dataclass(frozen=True)
class Cause:
    """One entry of a Status' ``details.causes``: usually a field that failed validation."""

    reason: str
    message: str
    field: str


class ApiError(Exception):
    """A request to the API server failed.

    ``code`` is the HTTP status (0 when no answer came back), ``reason`` the Status reason
    (``NotFound``, ``Conflict``, ``Invalid``...), ``message`` the apiserver's explanation.
    """

    def __init__(
        self,
        message: str,
        *,
        code: int = 0,
        reason: str = "",
        causes: tuple[Cause, ...] = (),
        status: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.reason = reason
        self.causes = causes
        self.status = status or {}

    def __str__(self) -> str:
        # The apiserver usually spells the causes out in its message already; add only the rest.
        missing = [c for c in self.causes if c.message and c.message not in self.message]
        if not missing:
            return self.message
        details = "; ".join(f"{c.field}: {c.message}" if c.field else c.message for c in missing)
        return f"{self.message} ({details})"


class ApiUnavailable(ApiError):
    """The API server did not answer (connection refused, reset or timed out)."""


class BadRequest(ApiError):
    """400: the request was malformed (bad selector, bad patch)."""


class Unauthorized(ApiError):
    """401: the credentials were not accepted."""


class Forbidden(ApiError):
    """403: RBAC or an admission plugin refused the request."""


class NotFound(ApiError):
    """404: the object (or the resource type) does not exist."""


class Conflict(ApiError):
    """409: the write lost a race (stale resourceVersion) or a precondition (UID, RV) failed."""


class AlreadyExists(Conflict):
    """409 with reason AlreadyExists: an object with this name exists."""


class Gone(ApiError):
    """410: the requested resourceVersion is too old (compacted); list again."""


class Invalid(ApiError):
    """422: the object failed validation; ``causes`` names the fields."""


class TooManyRequests(ApiError):
    """429: the API server asked us to slow down."""


class ServerError(ApiError):
    """5xx: the API server failed; usually worth retrying."""


_BY_CODE: dict[int, type[ApiError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Gone,
    422: Invalid,
    429: TooManyRequests,
}


#: ``details.causes[].reason`` of a write refused because its namespace is being deleted.
NAMESPACE_TERMINATING_CAUSE = "NamespaceTerminating"


def namespace_terminating(err: ApiError) -> bool:
    """True when ``err`` refused a create because the namespace is being deleted.

    Nothing is to be done then: the namespace's objects are all going away. Controllers
    drop the work instead of retrying and warning (kube-controller-manager does the same).
    """
    return any(c.reason == NAMESPACE_TERMINATING_CAUSE for c in err.causes)


def error_from_status(code: int, body: bytes | str | dict[str, Any] | None) -> ApiError:
    """Build the matching ApiError from an HTTP status and a (possibly non-JSON) response body.

    ``body`` may be a decoded ``Status`` object (as found in watch ERROR events).
    """
    status = _parse_status(body)
    reason = str(status.get("reason") or "")
    message = str(status.get("message") or "") or _fallback_message(code, body)
    # A pod's answer through the pod proxy is not the apiserver's: any shape may come.
    details = status.get("details")
    listed = details.get("causes") if isinstance(details, dict) else None
    causes = tuple(
        Cause(
            reason=str(c.get("reason") or ""),
            message=str(c.get("message") or ""),
            field=str(c.get("field") or ""),
        )
        for c in (listed if isinstance(listed, list) else ())
        if isinstance(c, dict)
    )
    status_code = status.get("code")
    code = status_code if isinstance(status_code, int) and status_code > 0 else code
    cls: type[ApiError]
    if code == 409 and reason == "AlreadyExists":
        cls = AlreadyExists
    elif code >= 500:
        cls = ServerError
    else:
        cls = _BY_CODE.get(code, ApiError)
    return cls(message, code=code, reason=reason, causes=causes, status=status)


def _parse_status(body: bytes | str | dict[str, Any] | None) -> dict[str, Any]:
    if isinstance(body, dict):
        return body
    if not body:
        return {}
    try:
        parsed = deepjson.loads(body)  # also a pod's answer through the pod proxy
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) and parsed.get("kind") == "Status" else {}


def _fallback_message(code: int, body: bytes | str | dict[str, Any] | None) -> str:
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else str(body or "")
    text = text.strip()[:500]
    return f"HTTP {code}: {text}" if text else f"HTTP {code}"


def transport_errors() -> tuple[type[BaseException], ...]:
    """The exception types of a request that got no HTTP answer: ``OSError``, and
    ``urllib3.exceptions.HTTPError`` when urllib3 is loaded.

    For ``except transport_errors():`` clauses that must catch what either client raises
    (:class:`drakit.kubeapi.lightclient.LightApiClient` raises only ``OSError``; the
    kubernetes client, over urllib3, raises urllib3's too). It never imports urllib3: an
    exception of a module that was never imported cannot have been raised, and the node
    plugin, which talks through the light client only, keeps urllib3 (about 1.4 MiB of
    resident memory) out of its process.
    """
    module = sys.modules.get("urllib3.exceptions")
    if module is None:
        return (OSError,)
    return (OSError, module.HTTPError)
