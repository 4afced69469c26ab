"""Which pods on a node are drakit node plugins whose node view ``drakit devices --node`` may
trust.

The view reaches an administrator's terminal, so who serves it matters: any user who may
create a pod can annotate it ``drakit.dev/node-view-port`` and serve a made-up view, and
anyone who may patch a pod can change the port it names. A pod's own labels and annotations
prove nothing. A pod is trusted only when all of this holds:

1. it is in the plugin's namespace (``--plugin-namespace``, default ``drakit-system`` as the
   install docs use); only that namespace is listed;
2. its controller (``ownerReferences`` entry with ``controller: true``) is an ``apps/v1``
   DaemonSet, named ``--plugin-daemonset`` when that flag is given;
3. that DaemonSet, read from the API server (``get daemonsets`` in the namespace), has the
   UID the reference names, carries the chart's label
   ``app.kubernetes.io/component: node-plugin``, and its selector matches the pod's labels;
4. the port is the DaemonSet's, not the pod's: the pod template's annotation must be a port
   number (1 to 65535), and the pod's annotation must say the same.

The boundary is the namespace: whoever may create pods or DaemonSets there can run the
plugin's own service account, so no check here could keep them out. Everyone else is refused,
with a note naming the pod and the reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from drakit.kubeapi.errors import ApiError, Forbidden, NotFound
from drakit.kubeapi.resources import PODS, Resource, ResourceType

__all__ = [
    "ANNOTATION",
    "COMPONENT",
    "COMPONENT_LABEL",
    "DAEMONSETS",
    "DEFAULT_NAMESPACE",
    "PluginPod",
    "PluginPods",
    "find_plugin_pods",
    "port_of",
    "selector_matches",
]

ANNOTATION = "drakit.dev/node-view-port"
COMPONENT_LABEL = "app.kubernetes.io/component"
COMPONENT = "node-plugin"
DEFAULT_NAMESPACE = "drakit-system"
DAEMONSETS = ResourceType("apps", "v1", "daemonsets", "DaemonSet", namespaced=True)
MAX_PORT = 65535


@dataclass(frozen=True)
class PluginPod:
    """A trusted plugin pod and the port (its DaemonSet's) that serves its view."""

    namespace: str
    name: str
    port: int

    @property
    def where(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class PluginPods:
    """The trusted pods, and one line for each pod refused or not readable."""

    pods: tuple[PluginPod, ...] = ()
    problems: tuple[str, ...] = ()


def port_of(value: object) -> int | None:
    """``value`` as a port number (decimal digits only, 1 to 65535), else None."""
    if not isinstance(value, str) or not value.isascii() or not value.isdigit():
        return None
    if len(value) > len(str(MAX_PORT)):
        return None
    port = int(value)
    return port if 0 < port <= MAX_PORT else None


def find_plugin_pods(
    api: Any, node: str, namespace: str, daemonset: str | None = None
) -> PluginPods:
    """The running, annotated pods on ``node`` in ``namespace`` that pass the checks of the
    module docstring. Never raises for an API error: it becomes a problem line."""
    try:
        listed = Resource(api, PODS).list(namespace, field_selector=f"spec.nodeName={node}")
    except Forbidden as err:
        return PluginPods(problems=(f"cannot list pods in namespace {namespace}: {err}",))
    except ApiError as err:
        return PluginPods(problems=(f"listing pods in namespace {namespace} failed: {err}",))
    owners = _DaemonSets(api, namespace)
    pods, problems = [], []
    for pod in listed.items:
        meta = pod.get("metadata") or {}
        if ANNOTATION not in (meta.get("annotations") or {}):
            continue
        if (pod.get("status") or {}).get("phase") != "Running":
            continue
        where = f"{namespace}/{meta.get('name')}"
        port, reason = _check(pod, owners, daemonset)
        if port is None:
            problems.append(f"pod {where} is not trusted: {reason}")
        else:
            pods.append(PluginPod(namespace, str(meta.get("name")), port))
    return PluginPods(tuple(pods), tuple(problems))


def _check(
    pod: Mapping[str, Any], owners: _DaemonSets, wanted: str | None
) -> tuple[int | None, str]:
    """(the port to read, "") for a trusted pod, else (None, why not)."""
    meta = pod.get("metadata") or {}
    ref = _controller(meta)
    if ref is None:
        return None, (
            "it is not controlled by a DaemonSet (no ownerReferences entry with "
            "controller: true, kind DaemonSet, apiVersion apps/v1)"
        )
    name = str(ref.get("name", ""))
    if wanted is not None and name != wanted:
        return None, f"its DaemonSet is {name!r}, not {wanted!r} (--plugin-daemonset)"
    ds, error = owners.get(name)
    if ds is None:
        return None, error
    ds_meta = ds.get("metadata") or {}
    if ds_meta.get("uid") != ref.get("uid"):
        return None, (
            f"its owner reference names DaemonSet {name} with uid {ref.get('uid')!r}, but that "
            f"DaemonSet's uid is {ds_meta.get('uid')!r}"
        )
    if (ds_meta.get("labels") or {}).get(COMPONENT_LABEL) != COMPONENT:
        return None, (
            f"DaemonSet {name} is not a drakit node plugin (no label {COMPONENT_LABEL}={COMPONENT})"
        )
    spec = ds.get("spec") or {}
    if not selector_matches(spec.get("selector"), meta.get("labels") or {}):
        return None, f"its labels do not match the selector of DaemonSet {name}"
    template = ((spec.get("template") or {}).get("metadata") or {}).get("annotations") or {}
    port = port_of(template.get(ANNOTATION))
    if port is None:
        return None, (
            f"DaemonSet {name}'s pod template has no valid {ANNOTATION} annotation "
            "(a port number, 1 to 65535)"
        )
    if (meta.get("annotations") or {}).get(ANNOTATION) != template.get(ANNOTATION):
        return None, f"its {ANNOTATION} annotation differs from its DaemonSet's ({port})"
    return port, ""


def _controller(meta: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The pod's controller reference when it is an apps/v1 DaemonSet, else None."""
    refs = meta.get("ownerReferences")
    if not isinstance(refs, list):
        return None
    for ref in refs:
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            if (ref.get("apiVersion"), ref.get("kind")) == ("apps/v1", "DaemonSet"):
                return ref
            return None  # one controller at most; this one is no DaemonSet
    return None


def selector_matches(selector: object, labels: Mapping[str, Any]) -> bool:
    """Whether a ``LabelSelector`` (matchLabels, matchExpressions) selects ``labels``. An
    empty or malformed selector selects nothing here: a DaemonSet always has a non-empty
    one, so anything else is no reason to trust a pod."""
    if not isinstance(selector, Mapping):
        return False
    match_labels = selector.get("matchLabels") or {}
    expressions = selector.get("matchExpressions") or []
    if not isinstance(match_labels, Mapping) or not isinstance(expressions, list):
        return False
    if not match_labels and not expressions:
        return False
    if any(labels.get(k) != v for k, v in match_labels.items()):
        return False
    return all(_expression_matches(e, labels) for e in expressions)


def _expression_matches(expression: object, labels: Mapping[str, Any]) -> bool:
    if not isinstance(expression, Mapping):
        return False
    key, operator = expression.get("key"), expression.get("operator")
    values = expression.get("values") or []
    if not isinstance(key, str) or not isinstance(values, list):
        return False
    if operator == "In":
        return key in labels and labels[key] in values
    if operator == "NotIn":
        return key not in labels or labels[key] not in values
    if operator == "Exists":
        return key in labels
    if operator == "DoesNotExist":
        return key not in labels
    return False


class _DaemonSets:
    """DaemonSets of one namespace, each read once: (object, "") or (None, why not)."""

    def __init__(self, api: Any, namespace: str) -> None:
        self._resource = Resource(api, DAEMONSETS)
        self._namespace = namespace
        self._read: dict[str, tuple[Mapping[str, Any] | None, str]] = {}

    def get(self, name: str) -> tuple[Mapping[str, Any] | None, str]:
        if name not in self._read:
            self._read[name] = self._fetch(name)
        return self._read[name]

    def _fetch(self, name: str) -> tuple[Mapping[str, Any] | None, str]:
        try:
            return self._resource.get(name, self._namespace), ""
        except NotFound:
            return None, f"its DaemonSet {name} does not exist"
        except Forbidden as err:
            return None, (
                f"cannot read its DaemonSet {name} (needs get on daemonsets.apps in namespace "
                f"{self._namespace}): {err}"
            )
        except (ApiError, ValueError) as err:  # ValueError: a name that is no path segment
            return None, f"cannot read its DaemonSet {name}: {err}"
