"""Typed access to the resources drakit uses, with objects as plain JSON dicts.

One ``Resource`` per resource type wraps the REST verbs (get, list with pagination, watch with
bookmarks, create, update, the four patch types, server-side apply, delete with preconditions)
on top of ``ApiClient.call_api``. Requests and responses are raw JSON on purpose: the generated
models of the Python client may drop fields newer than the client itself, which would silently
lose data on a read-modify-write of a ResourceClaim or ResourceSlice.

Every failure is raised as a ``drakit.kubeapi.errors.ApiError`` subclass.
"""

from __future__ import annotations

import builtins
import contextlib
import enum
import json
import random
import socket
import sys
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, TypedDict, Unpack

from drakit.kubeapi.deepjson import Decoder, depth_safe, loads
from drakit.kubeapi.errors import (
    ApiError,
    ApiUnavailable,
    InvalidPathSegment,
    error_from_status,
    transport_errors,
)
from drakit.kubeapi.objects import KubeObject

__all__ = [
    "DEVICE_CLASSES",
    "EVENTS",
    "LEASES",
    "NAMESPACES",
    "NODES",
    "PODS",
    "RESOURCE_CLAIMS",
    "RESOURCE_CLAIM_TEMPLATES",
    "RESOURCE_POOL_STATUS_REQUESTS",
    "RESOURCE_SLICES",
    "ObjectList",
    "PatchType",
    "Resource",
    "ResourceType",
    "WatchEvent",
    "WatchStream",
    "bind_pod",
]


DEFAULT_TIMEOUT = (10.0, 60.0)
DEFAULT_PAGE_SIZE = 500
# client-go picks a watch timeout between 5 and 10 minutes so that watches don't all end at once.
MIN_WATCH_TIMEOUT_SECONDS = 300
#: Levels of JSON around each object: a watch event's, a List's (the List and ``items``).
EVENT_LEVELS = 1
LIST_LEVELS = 2


@dataclass(frozen=True)
class ResourceType:
    """Where a resource lives in the API: group, version, plural, kind and scope."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(
        self, namespace: str | None = None, name: str | None = None, subresource: str | None = None
    ) -> str:
        """The URL path; ``namespace=None`` on a namespaced type means all namespaces.

        Namespace, name and subresource are single path segments: one that could
        leave its place (``..``, ``/``, ``%``) raises :class:`InvalidPathSegment`
        (as client-go's ``IsValidPathSegmentName``), and the rest are percent-quoted,
        so ``?`` or ``#`` can never start a query or fragment.
        """
        root = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        parts = [root]
        if self.namespaced and namespace:
            parts.append(f"namespaces/{path_segment(self.kind, 'namespace', namespace)}")
        parts.append(self.plural)
        if name:
            parts.append(path_segment(self.kind, "name", name))
            if subresource:
                parts.append(path_segment(self.kind, "subresource", subresource))
        return "/".join(parts)


def path_segment(kind: str, field: str, value: str) -> str:
    """``value`` quoted as one URL path segment; InvalidPathSegment if it cannot be one."""
    if value in (".", "..") or "/" in value or "%" in value:
        raise InvalidPathSegment(
            f"{kind} {field} {value[:80]!r} may not be '.' or '..' or contain '/' or '%'"
        )
    return urllib.parse.quote(value, safe="")


PODS = ResourceType("", "v1", "pods", "Pod", namespaced=True)
NODES = ResourceType("", "v1", "nodes", "Node", namespaced=False)
NAMESPACES = ResourceType("", "v1", "namespaces", "Namespace", namespaced=False)
RESOURCE_SLICES = ResourceType(
    "resource.k8s.io", "v1", "resourceslices", "ResourceSlice", namespaced=False
)
RESOURCE_CLAIMS = ResourceType(
    "resource.k8s.io", "v1", "resourceclaims", "ResourceClaim", namespaced=True
)
RESOURCE_CLAIM_TEMPLATES = ResourceType(
    "resource.k8s.io", "v1", "resourceclaimtemplates", "ResourceClaimTemplate", namespaced=True
)
DEVICE_CLASSES = ResourceType(
    "resource.k8s.io", "v1", "deviceclasses", "DeviceClass", namespaced=False
)
# Alpha (KEP-5677, feature gate DRAResourcePoolStatus, off by default in 1.37; the apiserver
# serves it only with --runtime-config=resource.k8s.io/v1alpha3=true).
RESOURCE_POOL_STATUS_REQUESTS = ResourceType(
    "resource.k8s.io",
    "v1alpha3",
    "resourcepoolstatusrequests",
    "ResourcePoolStatusRequest",
    namespaced=False,
)
EVENTS = ResourceType("events.k8s.io", "v1", "events", "Event", namespaced=True)
LEASES = ResourceType("coordination.k8s.io", "v1", "leases", "Lease", namespaced=True)


class PatchType(enum.StrEnum):
    """The patch formats the apiserver accepts (server-side apply is ``Resource.apply``)."""

    MERGE = "application/merge-patch+json"
    JSON = "application/json-patch+json"
    STRATEGIC = "application/strategic-merge-patch+json"
    APPLY = "application/apply-patch+yaml"


@dataclass(frozen=True)
class ObjectList:
    """The items of a list and the resourceVersion to start a watch from."""

    items: list[KubeObject]
    resource_version: str


@dataclass(frozen=True)
class WatchEvent:
    """One watch event: ``type`` is ADDED, MODIFIED, DELETED or BOOKMARK."""

    type: str
    object: KubeObject

    @property
    def resource_version(self) -> str:
        return str((self.object.get("metadata") or {}).get("resourceVersion", ""))


class WatchStream:
    """An open watch: iterate it for events; ``close()`` (from any thread) ends the iteration.

    An ERROR event from the server is raised as the matching ApiError (``Gone`` when the start
    resourceVersion is too old). The iteration also ends when the server closes the watch at
    its timeout; the caller then watches again from the last resourceVersion it saw.
    """

    def __init__(self, response: Any, rtype: ResourceType, decode: Decoder = loads) -> None:
        self._response = response
        self._rtype = rtype
        self._loads = decode
        self._closed = False

    def __enter__(self) -> WatchStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __iter__(self) -> Iterator[WatchEvent]:
        try:
            for line in self._lines():
                yield self._decode(line)
        except transport_errors() as err:
            if not self._closed:
                raise ApiUnavailable(f"watch {self._rtype.plural}: {err}") from err
        finally:
            self._release()

    def close(self) -> None:
        """Stop the watch; safe to call more than once and from another thread."""
        if self._closed:
            return
        self._closed = True
        # Shutting the socket down is what unblocks a thread sitting in a read; close() alone
        # waits for the read to finish.
        try:
            self._response.shutdown()
        except Exception:  # already closed or released: shut the raw socket if there is one
            sock = getattr(getattr(self._response, "connection", None), "sock", None)
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def _lines(self) -> Iterator[bytes]:
        buffer = b""
        for chunk in self._response.stream(amt=None, decode_content=True):
            if self._closed:
                return
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            yield from (line for line in lines if line.strip())
        if buffer.strip() and not self._closed:
            yield buffer

    def _decode(self, line: bytes) -> WatchEvent:
        try:
            raw = self._loads(line, EVENT_LEVELS)
        except ValueError as err:
            raise ApiError(f"watch {self._rtype.plural}: undecodable event: {err}") from err
        event_type = raw.get("type", "")
        obj = raw.get("object") or {}
        if event_type == "ERROR":
            raise error_from_status(int(obj.get("code") or 500), obj)
        if event_type != "BOOKMARK":
            obj.setdefault("apiVersion", self._rtype.api_version)
            obj.setdefault("kind", self._rtype.kind)
        return WatchEvent(event_type, obj)

    def _release(self) -> None:
        self._closed = True
        # Close rather than reuse: after a shutdown or a broken stream the connection is dead.
        with contextlib.suppress(Exception):
            self._response.close()
            self._response.release_conn()


class _SendOptions(TypedDict, total=False):
    """The keyword arguments of ``Resource._send`` (which ``_request`` passes on)."""

    query: builtins.list[tuple[str, str]] | None
    body: Any
    content_type: str
    timeout: tuple[float, float] | None


class Resource:
    """The REST verbs for one resource type.

    ``namespace`` is required for namespaced types on single-object verbs (taken from the
    object's metadata where there is one); on list and watch, ``None`` means all namespaces.
    """

    def __init__(
        self,
        api: Any,
        rtype: ResourceType,
        *,
        request_timeout: tuple[float, float] = DEFAULT_TIMEOUT,
    ) -> None:
        self.api = api
        self.rtype = rtype
        # The client's JSON decoder where it has one (the light client's may be orjson),
        # keeping the depth bound of kubeapi.deepjson: every object it returns nests at most
        # MAX_DEPTH levels of plain containers, deeper parts are DeepJSON leaves.
        self._decode: Decoder = depth_safe(getattr(api, "json_loads", json.loads))
        #: (connect, read) seconds for every request but watches.
        self.request_timeout = request_timeout

    # -- reads ---------------------------------------------------------------------------------

    def get(self, name: str, namespace: str | None = None) -> KubeObject:
        """The object; raises NotFound."""
        return self._object(self._request("GET", self._path(namespace, name)))

    def list(
        self,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        resource_version: str | None = None,
        resource_version_match: str | None = None,
        page_size: int = DEFAULT_PAGE_SIZE,
    ) -> ObjectList:
        """All matching objects, fetched in pages of ``page_size`` from one consistent snapshot.

        ``resource_version="0"`` allows the apiserver to answer from its watch cache.
        """
        query = _query(
            labelSelector=label_selector,
            fieldSelector=field_selector,
            resourceVersion=resource_version,
            resourceVersionMatch=resource_version_match,
            limit=page_size if page_size > 0 else None,
        )
        items: list[KubeObject] = []
        list_rv = ""
        continue_token: str | None = None
        while True:
            page_query = query + ([("continue", continue_token)] if continue_token else [])
            page = self._request(
                "GET", self.rtype.path(namespace), query=page_query, outer=LIST_LEVELS
            )
            meta = page.get("metadata") or {}
            list_rv = list_rv or str(meta.get("resourceVersion", ""))
            items.extend(self._object(item) for item in page.get("items") or ())
            continue_token = meta.get("continue")
            if not continue_token:
                return ObjectList(items=items, resource_version=list_rv)
            # Later pages come from the snapshot of the first; an explicit RV is not allowed.
            query = [
                (k, v) for k, v in query if k not in ("resourceVersion", "resourceVersionMatch")
            ]

    def watch(
        self,
        namespace: str | None = None,
        *,
        resource_version: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        allow_bookmarks: bool = True,
        timeout_seconds: int | None = None,
    ) -> WatchStream:
        """Open a watch starting after ``resource_version``.

        The server ends the watch after ``timeout_seconds`` (default: random, 5 to 10 minutes).
        """
        if timeout_seconds is None:
            timeout_seconds = int(MIN_WATCH_TIMEOUT_SECONDS * (1 + random.random()))
        query = _query(
            watch="true",
            resourceVersion=resource_version,
            labelSelector=label_selector,
            fieldSelector=field_selector,
            allowWatchBookmarks="true" if allow_bookmarks else None,
            timeoutSeconds=timeout_seconds,
        )
        response = self._send(
            "GET",
            self.rtype.path(namespace),
            query=query,
            timeout=(self.request_timeout[0], timeout_seconds + 30.0),
        )
        return WatchStream(response, self.rtype, self._decode)

    # -- writes --------------------------------------------------------------------------------

    def create(
        self,
        obj: KubeObject,
        namespace: str | None = None,
        *,
        field_manager: str | None = None,
        dry_run: bool = False,
    ) -> KubeObject:
        """Create ``obj`` (with ``metadata.generateName`` the server picks the name)."""
        namespace = namespace or _meta(obj).get("namespace")
        return self._object(
            self._request(
                "POST",
                self._collection_path(namespace),
                body=self._with_type(obj),
                query=_query(fieldManager=field_manager, dryRun="All" if dry_run else None),
            )
        )

    def create_subresource(
        self, name: str, subresource: str, body: KubeObject, namespace: str | None = None
    ) -> KubeObject:
        """POST to a subresource such as ``pods/<name>/binding``; returns the server's answer."""
        return self._request("POST", self._path(namespace, name, subresource), body=body)

    def update(
        self,
        obj: KubeObject,
        *,
        subresource: str | None = None,
        field_manager: str | None = None,
        dry_run: bool = False,
    ) -> KubeObject:
        """Replace the object (PUT). With ``metadata.resourceVersion`` set, Conflict if stale.
        ``dry_run``: validated and admitted as a real write, then not stored."""
        meta = _meta(obj)
        path = self._path(meta.get("namespace"), _required_name(obj), subresource)
        query = _query(fieldManager=field_manager, dryRun="All" if dry_run else None)
        return self._object(self._request("PUT", path, body=self._with_type(obj), query=query))

    def update_status(self, obj: KubeObject, *, field_manager: str | None = None) -> KubeObject:
        """Replace the status subresource (PUT ``.../status``)."""
        return self.update(obj, subresource="status", field_manager=field_manager)

    def patch_status(
        self,
        obj: KubeObject,
        patch: KubeObject | builtins.list[dict[str, Any]],
        *,
        patch_type: PatchType,
        field_manager: str | None = None,
    ) -> KubeObject:
        """Patch the status subresource of ``obj`` (named by its metadata); see ``patch``."""
        return self.patch(
            _required_name(obj),
            patch,
            _meta(obj).get("namespace"),
            patch_type=patch_type,
            subresource="status",
            field_manager=field_manager,
        )

    def patch(
        self,
        name: str,
        patch: KubeObject | builtins.list[dict[str, Any]],
        namespace: str | None = None,
        *,
        patch_type: PatchType = PatchType.MERGE,
        subresource: str | None = None,
        field_manager: str | None = None,
        dry_run: bool = False,
    ) -> KubeObject:
        """Patch the object. A JSON patch (a list of ops) may use ``test`` ops as preconditions;
        a failed ``test`` is raised as Invalid or Conflict, whichever the apiserver reports.
        ``dry_run``: validated and admitted as a real write, then not stored."""
        if patch_type is PatchType.JSON and not isinstance(patch, list):
            raise TypeError("a JSON patch is a list of operations")
        if patch_type is not PatchType.JSON and not isinstance(patch, dict):
            raise TypeError(f"a {patch_type.name.lower()} patch is an object")
        return self._object(
            self._request(
                "PATCH",
                self._path(namespace, name, subresource),
                body=patch,
                content_type=patch_type.value,
                query=_query(fieldManager=field_manager, dryRun="All" if dry_run else None),
            )
        )

    def apply(
        self,
        obj: KubeObject,
        *,
        field_manager: str,
        force: bool = False,
        subresource: str | None = None,
    ) -> KubeObject:
        """Server-side apply ``obj`` as ``field_manager``; ``force`` takes over conflicting fields.

        ``obj`` must be the complete intent of this manager: fields it owned before and leaves
        out are removed.
        """
        meta = _meta(obj)
        return self._object(
            self._request(
                "PATCH",
                self._path(meta.get("namespace"), _required_name(obj), subresource),
                body=self._with_type(obj),
                content_type=PatchType.APPLY.value,
                query=_query(fieldManager=field_manager, force="true" if force else None),
            )
        )

    def delete(
        self,
        name: str,
        namespace: str | None = None,
        *,
        uid: str | None = None,
        resource_version: str | None = None,
        propagation_policy: str | None = None,
        grace_period_seconds: int | None = None,
        dry_run: bool = False,
    ) -> KubeObject | None:
        """Delete the object, only if its UID / resourceVersion still match (Conflict if not).

        Returns what the server answered: the object's final state, or the object marked with
        ``metadata.deletionTimestamp`` when finalizers (or a grace period) keep it for now; None
        when the server only sent a Status. Raises NotFound when it is already gone.
        ``dry_run``: authorized and admitted as a real delete, then nothing is deleted.
        """
        body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
        preconditions = {
            k: v for k, v in (("uid", uid), ("resourceVersion", resource_version)) if v
        }
        if preconditions:
            body["preconditions"] = preconditions
        if propagation_policy:
            body["propagationPolicy"] = propagation_policy
        if grace_period_seconds is not None:
            body["gracePeriodSeconds"] = grace_period_seconds
        if dry_run:
            body["dryRun"] = ["All"]
        answer = self._request("DELETE", self._path(namespace, name), body=body)
        return None if answer.get("kind") == "Status" else self._object(answer)

    def proxy_get(self, name: str, namespace: str, port: int, path: str) -> KubeObject:
        """GET ``path`` (a fixed, absolute path) from port ``port`` of the pod ``name``
        through the apiserver's pod proxy (``pods/proxy``), decoded as a JSON object."""
        if not 0 < port < 65536 or not path.startswith("/") or ".." in path:
            raise ValueError(f"pod proxy: bad port {port} or path {path!r}")
        return self._request("GET", f"{self._path(namespace, name)}:{port}/proxy{path}")

    # -- plumbing ------------------------------------------------------------------------------

    def _path(self, namespace: str | None, name: str, subresource: str | None = None) -> str:
        if self.rtype.namespaced and not namespace:
            raise ValueError(f"{self.rtype.kind} {name!r}: a namespace is required")
        return self.rtype.path(namespace, name, subresource)

    def _collection_path(self, namespace: str | None) -> str:
        if self.rtype.namespaced and not namespace:
            raise ValueError(f"creating a {self.rtype.kind}: a namespace is required")
        return self.rtype.path(namespace)

    def _with_type(self, obj: KubeObject) -> KubeObject:
        return {"apiVersion": self.rtype.api_version, "kind": self.rtype.kind, **obj}

    def _object(self, obj: KubeObject) -> KubeObject:
        # List items carry no apiVersion/kind; fill them in so every object looks the same.
        obj.setdefault("apiVersion", self.rtype.api_version)
        obj.setdefault("kind", self.rtype.kind)
        return obj

    def _request(
        self, method: str, path: str, outer: int = 0, **options: Unpack[_SendOptions]
    ) -> KubeObject:
        """``_send`` and decode the answer's JSON object (``outer``: see ``Decoder``)."""
        response = self._send(method, path, **options)
        try:
            data = response.data
        except transport_errors() as err:
            raise ApiUnavailable(f"{method} {path}: {err}") from err
        finally:
            response.release_conn()
        try:
            decoded = self._decode(data, outer) if data else {}
        except ValueError as err:
            raise ApiError(f"{method} {path}: answer is not JSON: {err}") from err
        if not isinstance(decoded, dict):
            raise ApiError(f"{method} {path}: answer is not a JSON object")
        return decoded

    def _send(
        self,
        method: str,
        path: str,
        *,
        query: builtins.list[tuple[str, str]] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: tuple[float, float] | None = None,
    ) -> Any:
        """Send a request; returns the open response (urllib3's or http11's) of a 2xx answer,
        raises otherwise."""
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type
        # The light client encodes the body in param_serialize (deep values included, see
        # kubeapi.deepjson). The kubernetes client's param_serialize would walk it with the
        # recursive sanitize_for_serialization (RecursionError on a claim a few hundred
        # levels deep): its body, plain JSON already, goes to the REST layer's json.dumps.
        encodes_body = not hasattr(self.api, "sanitize_for_serialization")
        method, url, headers, encoded, _ = self.api.param_serialize(
            method=method,
            resource_path=path,
            query_params=query or None,
            header_params=headers,
            body=body if encodes_body else None,
            auth_settings=["BearerToken"],
        )
        if encodes_body:
            body = encoded
        try:
            rest_response = self.api.call_api(
                method,
                url,
                header_params=headers,
                body=body,
                _request_timeout=timeout or self.request_timeout,
            )
        except _kubernetes_api_exceptions() as err:  # the REST layer's wrapper for TLS failures
            raise ApiUnavailable(f"{method} {path}: {getattr(err, 'reason', err)}") from err
        except transport_errors() as err:
            raise ApiUnavailable(f"{method} {path}: {err}") from err
        except TypeError as err:  # a DeepJSON value: only the light client writes those
            raise ApiError(f"{method} {path}: the body cannot be written as JSON: {err}") from err
        response = rest_response.response
        if 200 <= response.status < 300:
            return response
        try:
            data = response.data
        except transport_errors():
            data = b""
        finally:
            response.release_conn()
        raise error_from_status(response.status, data)


def bind_pod(pods: Resource, namespace: str, name: str, node_name: str, *, uid: str = "") -> None:
    """Bind a pod to a node (``pods/binding``), the way a scheduler does.

    With ``uid`` the binding only succeeds for that incarnation of the pod (Conflict otherwise).
    Raises Conflict if the pod is already bound.
    """
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if uid:
        metadata["uid"] = uid
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": metadata,
        "target": {"apiVersion": "v1", "kind": "Node", "name": node_name},
    }
    pods.create_subresource(name, "binding", binding, namespace)


def _kubernetes_api_exceptions() -> tuple[type[BaseException], ...]:
    """The kubernetes client's ApiException when that client is loaded (never imports it:
    ``api`` may be a :class:`drakit.kubeapi.lightclient.LightApiClient`, which raises only
    ``OSError``)."""
    module = sys.modules.get("kubernetes.client.exceptions")
    return (module.ApiException,) if module is not None else ()


def _meta(obj: KubeObject) -> dict[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _required_name(obj: KubeObject) -> str:
    name = _meta(obj).get("name")
    if not name:
        raise ValueError(f"{obj.get('kind', 'object')}: metadata.name is required")
    return str(name)


def _query(**params: Any) -> list[tuple[str, str]]:
    return [(key, str(value)) for key, value in params.items() if value is not None]
