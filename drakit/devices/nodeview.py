"""The node's own view for ``drakit devices --node``: what the node plugins on that node
learned from the kubelet's PodResources API (claim -> pod -> container -> device), beside
what the API server says.

Where it comes from: a drakit node plugin with the PodResources cross-check on serves its
last round as JSON at ``/debug/node-view`` on its metrics port and carries the annotation
``drakit.dev/node-view-port`` (the chart sets it). This module lists the pods on the node,
keeps the annotated running ones, and GETs the view through the API server's pod proxy, so
the user's own RBAC decides (``list pods``, ``get pods/proxy``); nothing is reached directly.
"""

from __future__ import annotations

import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from drakit.kubeapi import deepjson
from drakit.kubeapi.errors import ApiError, Forbidden
from drakit.kubeapi.resources import PODS, Resource

__all__ = [
    "ANNOTATION",
    "NODE_VIEW_PATH",
    "NodeViews",
    "read_node_view_url",
    "read_node_views",
    "render_node_views",
]
URL_TIMEOUT = 10.0

ANNOTATION = "drakit.dev/node-view-port"
NODE_VIEW_PATH = "/debug/node-view"


@dataclass(frozen=True)
class NodeViews:
    """The views read (one per plugin pod) and why others could not be read."""

    views: tuple[dict[str, Any], ...] = ()
    problems: tuple[str, ...] = ()


def read_node_views(api: Any, node: str) -> NodeViews:
    """Every node view served on ``node``; never raises for one plugin's failure."""
    pods = Resource(api, PODS)
    try:
        listed = pods.list(field_selector=f"spec.nodeName={node}").items
    except Forbidden as err:
        return NodeViews(problems=(f"node view: cannot list pods on {node}: {err}",))
    except ApiError as err:
        return NodeViews(problems=(f"node view: listing pods on {node} failed: {err}",))
    views, problems = [], []
    for pod in listed:
        meta = pod.get("metadata") or {}
        port = (meta.get("annotations") or {}).get(ANNOTATION, "")
        if not port or (pod.get("status") or {}).get("phase") != "Running":
            continue
        where = f"{meta.get('namespace')}/{meta.get('name')}"
        try:
            view = pods.proxy_get(meta["name"], meta["namespace"], int(port), NODE_VIEW_PATH)
        except ValueError:
            problems.append(f"node view: pod {where}: annotation {ANNOTATION}={port!r} is no port")
        except Forbidden as err:
            problems.append(f"node view: pod {where}: needs get on pods/proxy: {err}")
        except ApiError as err:
            problems.append(f"node view: pod {where}: {err}")
        else:
            views.append({**view, "pod": where})
    if not views and not problems:
        problems.append(
            f"node view: no node plugin on {node} serves one (enable the PodResources "
            "cross-check: chart value nodePlugin.podResources.enabled)"
        )
    return NodeViews(tuple(views), tuple(problems))


def read_node_view_url(url: str) -> NodeViews:
    """The view served at ``url`` (``--node-view-url``: a plugin's metrics address reached
    directly, e.g. on the node or through ``kubectl port-forward``); ``/debug/node-view`` is
    added when ``url`` has no path."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return NodeViews(problems=(f"node view: --node-view-url {url!r} is not an http(s) URL",))
    if parts.path in ("", "/"):
        url = urllib.parse.urlunsplit(parts._replace(path=NODE_VIEW_PATH))
    try:
        with urllib.request.urlopen(url, timeout=URL_TIMEOUT) as answer:
            view = deepjson.loads(answer.read())
    except (OSError, ValueError) as err:
        return NodeViews(problems=(f"node view: {url}: {err}",))
    if not isinstance(view, dict):
        return NodeViews(problems=(f"node view: {url}: the answer is not a JSON object",))
    return NodeViews(({**view, "pod": url},))


def render_node_views(found: NodeViews) -> str:
    """The views as text: one table per plugin (claim, pod, container, devices, prepared),
    then its findings, then the problems."""
    out = []
    for view in found.views:
        out.append(
            f"\nNode view of {view.get('node', '?')} from driver {view.get('driver', '?')} "
            f"(from {view['pod']}, kubelet PodResources read at {view.get('checkedAt', '?')}):\n"
        )
        out.append(_claims_table(view.get("claims") or []))
        if view.get("error"):
            out.append(f"error: {view['error']}\n")
        out.extend(_finding_line(f) for f in view.get("findings") or [])
    out.extend(f"note: {p}\n" for p in found.problems)
    return "".join(out)


def _finding_line(finding: dict[str, Any]) -> str:
    pods = ", ".join(finding.get("pods") or [])
    devices = ", ".join(finding.get("devices") or [])
    return (
        f"finding: {finding.get('kind')}: claim {finding.get('claim')}"
        + (f" ({pods})" if pods else "")
        + (f" devices {devices}" if devices else "")
        + f", for {finding.get('seconds')} s: {finding.get('detail')}\n"
    )


def _claims_table(claims: Sequence[dict[str, Any]]) -> str:
    header = ("CLAIM", "POD", "CONTAINER", "DEVICES", "PREPARED")
    rows = []
    for claim in claims:
        name = f"{claim.get('namespace')}/{claim.get('name')}"
        prepared = str(claim.get("prepared", ""))
        containers = claim.get("containers") or []
        if not containers:
            rows.append((name, "-", "-", ",".join(claim.get("devices") or []) or "-", prepared))
        for c in containers:
            rows.append(
                (
                    name,
                    c.get("pod", ""),
                    c.get("container", ""),
                    ",".join(c.get("devices") or []),
                    prepared,
                )
            )
    if not rows:
        return "(no claims of this driver prepared or in use on the node)\n"
    widths = [max(len(str(r[i])) for r in (header, *rows)) for i in range(len(header))]
    return "".join(
        "   ".join(str(cell).ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() + "\n"
        for row in (header, *rows)
    )
