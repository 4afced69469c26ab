"""The node's own view for ``drakit devices --node``: what the node plugins on that node
learned from the kubelet's PodResources API (claim -> pod -> container -> device), beside
what the API server says.

Where it comes from: a drakit node plugin with the PodResources cross-check on serves its
last round as JSON at ``/debug/node-view`` on its metrics port and carries the annotation
``drakit.dev/node-view-port`` (the chart sets it). This module asks
:mod:`drakit.devices.pluginpods` which pods on the node are that DaemonSet's (others are
refused with a note) and GETs their views through the API server's pod proxy, so the user's
own RBAC decides; nothing is reached directly.

A view is input from another program: it is decoded into :class:`NodeView` (wrong types
become empty values, strings are cut at :data:`MAX_TEXT`, lists at :data:`MAX_ENTRIES`, a
document read from ``--node-view-url`` at :data:`MAX_VIEW_BYTES`), and printed only through
:mod:`drakit.devices.render`, which strips control characters.
"""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from drakit.devices.pluginpods import ANNOTATION, DEFAULT_NAMESPACE, PluginPod, find_plugin_pods
from drakit.kubeapi.errors import ApiError, Forbidden
from drakit.kubeapi.resources import PODS, Resource

__all__ = [
    "ANNOTATION",
    "NODE_VIEW_PATH",
    "ClaimView",
    "ContainerView",
    "FindingView",
    "NodeView",
    "NodeViews",
    "parse_view",
    "read_node_view_url",
    "read_node_views",
]
URL_TIMEOUT = 10.0
NODE_VIEW_PATH = "/debug/node-view"
# A node has at most a few hundred claims; a document beyond these is not a plugin's.
MAX_VIEW_BYTES = 8 * 1024 * 1024
MAX_ENTRIES = 5000
MAX_TEXT = 512


@dataclass(frozen=True)
class ContainerView:
    pod: str
    container: str
    devices: tuple[str, ...]


@dataclass(frozen=True)
class ClaimView:
    namespace: str
    name: str
    prepared: str
    devices: tuple[str, ...]
    containers: tuple[ContainerView, ...]


@dataclass(frozen=True)
class FindingView:
    kind: str
    claim: str
    pods: tuple[str, ...]
    devices: tuple[str, ...]
    seconds: str
    detail: str


@dataclass(frozen=True)
class NodeView:
    """One plugin's view; ``source`` is the pod (namespace/name) or URL it came from and
    ``cut`` counts the entries left out beyond :data:`MAX_ENTRIES`."""

    source: str
    node: str
    driver: str
    checked_at: str
    error: str
    claims: tuple[ClaimView, ...]
    findings: tuple[FindingView, ...]
    cut: int = 0


@dataclass(frozen=True)
class NodeViews:
    """The views read (one per plugin pod) and why others could not be read."""

    views: tuple[NodeView, ...] = ()
    problems: tuple[str, ...] = ()


def read_node_views(
    api: Any, node: str, namespace: str = DEFAULT_NAMESPACE, daemonset: str | None = None
) -> NodeViews:
    """Every node view served on ``node`` by a trusted plugin pod of ``namespace`` (see
    :mod:`drakit.devices.pluginpods`); never raises for one plugin's failure."""
    found = find_plugin_pods(api, node, namespace, daemonset)
    problems = [f"node view: {p}" for p in found.problems]
    views = []
    for pod in found.pods:
        view, problem = _read_pod(api, pod, node)
        if view is not None:
            views.append(view)
        if problem:
            problems.append(problem)
    if not found.pods and not found.problems:
        problems.append(
            f"node view: no node plugin pod in namespace {namespace} on {node} serves one "
            "(--plugin-namespace names the plugin's namespace; enable the PodResources "
            "cross-check: chart value nodePlugin.podResources.enabled)"
        )
    return NodeViews(tuple(views), tuple(problems))


def _read_pod(api: Any, pod: PluginPod, node: str) -> tuple[NodeView | None, str]:
    """(the view, "") or (None, why not) for one trusted pod."""
    try:
        doc = Resource(api, PODS).proxy_get(pod.name, pod.namespace, pod.port, NODE_VIEW_PATH)
    except Forbidden as err:
        return None, f"node view: pod {pod.where}: needs get on pods/proxy: {err}"
    except (ApiError, ValueError) as err:
        return None, f"node view: pod {pod.where}: {err}"
    view = parse_view(doc, pod.where)
    if view is None:
        return None, f"node view: pod {pod.where}: the answer is not a JSON object"
    if view.node != node:
        return None, f"node view: pod {pod.where} serves the view of node {view.node!r}, not {node}"
    return view, ""


def read_node_view_url(url: str) -> NodeViews:
    """The view served at ``url`` (``--node-view-url``: a plugin's metrics address reached
    directly, e.g. on the node or through ``kubectl port-forward``); ``/debug/node-view`` is
    added when ``url`` has no path. The answer is read up to :data:`MAX_VIEW_BYTES`."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return NodeViews(problems=(f"node view: --node-view-url {url!r} is not an http(s) URL",))
    if parts.path in ("", "/"):
        url = urllib.parse.urlunsplit(parts._replace(path=NODE_VIEW_PATH))
    try:
        with urllib.request.urlopen(url, timeout=URL_TIMEOUT) as answer:
            data = answer.read(MAX_VIEW_BYTES + 1)
        if len(data) > MAX_VIEW_BYTES:
            return NodeViews(
                problems=(f"node view: {url}: answer larger than {MAX_VIEW_BYTES} bytes",)
            )
        doc = json.loads(data)
    except (OSError, ValueError) as err:
        return NodeViews(problems=(f"node view: {url}: {err}",))
    except RecursionError:
        return NodeViews(problems=(f"node view: {url}: the answer is nested too deeply",))
    view = parse_view(doc, url)
    if view is None:
        return NodeViews(problems=(f"node view: {url}: the answer is not a JSON object",))
    return NodeViews((view,))


def parse_view(doc: object, source: str) -> NodeView | None:
    """``doc`` (a decoded ``/debug/node-view`` answer) as a :class:`NodeView`, None unless it
    is a JSON object. Tolerant: a field of the wrong type reads as empty."""
    if not isinstance(doc, Mapping):
        return None
    claims, cut_claims = _entries(doc.get("claims"), _claim)
    findings, cut_findings = _entries(doc.get("findings"), _finding)
    return NodeView(
        source=source,
        node=_text(doc.get("node")),
        driver=_text(doc.get("driver")),
        checked_at=_text(doc.get("checkedAt")),
        error=_text(doc.get("error")),
        claims=claims,
        findings=findings,
        cut=cut_claims + cut_findings,
    )


def _text(value: object) -> str:
    """A scalar as text, cut at :data:`MAX_TEXT`; anything else (lists, objects) is ""."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str | int | float):
        text = str(value)
        return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 3] + "..."
    return ""


def _texts(value: object) -> tuple[str, ...]:
    items = value if isinstance(value, list) else []
    return tuple(_text(v) for v in items[:MAX_ENTRIES])


def _entries(value: object, decode: Any) -> tuple[tuple[Any, ...], int]:
    """Decoded mapping entries of a list (others skipped), at most MAX_ENTRIES; (entries,
    how many were left out)."""
    items = [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []
    return tuple(decode(v) for v in items[:MAX_ENTRIES]), max(0, len(items) - MAX_ENTRIES)


def _claim(doc: Mapping[str, Any]) -> ClaimView:
    containers, _ = _entries(doc.get("containers"), _container)
    return ClaimView(
        namespace=_text(doc.get("namespace")),
        name=_text(doc.get("name")),
        prepared=_text(doc.get("prepared")),
        devices=_texts(doc.get("devices")),
        containers=containers,
    )


def _container(doc: Mapping[str, Any]) -> ContainerView:
    return ContainerView(
        pod=_text(doc.get("pod")),
        container=_text(doc.get("container")),
        devices=_texts(doc.get("devices")),
    )


def _finding(doc: Mapping[str, Any]) -> FindingView:
    return FindingView(
        kind=_text(doc.get("kind")),
        claim=_text(doc.get("claim")),
        pods=_texts(doc.get("pods")),
        devices=_texts(doc.get("devices")),
        seconds=_text(doc.get("seconds")),
        detail=_text(doc.get("detail")),
    )
