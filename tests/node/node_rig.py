"""The real-node rig: a control plane, one real node (containerd, runc, the
kubelet), drakit's image built from deploy/Dockerfile and the Helm chart.

:class:`RealNodeStack` is what the tests read: install or upgrade the chart
with values, create pods from the examples, read a container's own output
from the kubelet's log folder, find the plugin's processes. Everything waits
with generous bounds that only keep a broken run from hanging; nothing
asserts on durations.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers.waiting import eventually as wait_until

from drakit.kubeapi.errors import NotFound
from drakit.kubeapi.objects import KubeObject
from drakit.kubeapi.resources import (
    NAMESPACES,
    PODS,
    RESOURCE_CLAIM_TEMPLATES,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
    Resource,
    ResourceType,
)
from drakit.localcluster import LocalCluster
from drakit.localcluster.node import LocalNode
from drakit.telemetry.address import LOOPBACK

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "drakit"
EXAMPLES = ROOT / "deploy" / "examples"
RELEASE_NAMESPACE = "drakit-system"
DRIVER = "gpu.drakit.dev"
WAIT = 120.0
#: The examples name busybox:1.36; the node has no registry, so Debian's
#: static busybox is imported under that name.
EXAMPLE_IMAGE = "docker.io/library/busybox:1.36"

SERVICE_ACCOUNTS = ResourceType("", "v1", "serviceaccounts", "ServiceAccount", namespaced=True)
CORE_EVENTS = ResourceType("", "v1", "events", "Event", namespaced=True)


def eventually(
    check: Callable[[], Any], what: str | Callable[[], str], timeout: float = WAIT
) -> Any:
    """:func:`helpers.waiting.eventually` with the real-node tier's default timeout."""
    return wait_until(check, what, timeout, interval=0.2)


def load_example(name: str) -> list[KubeObject]:
    return [d for d in yaml.safe_load_all((EXAMPLES / name).read_text()) if d]


@dataclass
class Helm:
    """The pinned helm with a private home, talking to the stack's apiserver."""

    binary: Path
    home: Path
    kubeconfig: str

    def run(self, *args: str) -> str:
        env = {
            **os.environ,
            "HELM_CONFIG_HOME": str(self.home / "config"),
            "HELM_CACHE_HOME": str(self.home / "cache"),
            "HELM_DATA_HOME": str(self.home / "data"),
            "KUBECONFIG": self.kubeconfig,
        }
        proc = subprocess.run(
            [str(self.binary), *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        if proc.returncode != 0:
            raise AssertionError(
                f"helm {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
            )
        return proc.stdout


@dataclass
class RealNodeStack:
    """One control plane, one real node, drakit's image imported into it."""

    cluster: LocalCluster
    node: LocalNode
    helm: Helm
    image_repository: str
    image_tag: str
    client: Any
    releases: list[str] = field(default_factory=list)
    values: dict[str, dict[str, Any]] = field(default_factory=dict)

    # -- API -------------------------------------------------------------------

    def resource(self, kind: Any) -> Resource:
        return Resource(self.client, kind)

    @property
    def pods(self) -> Resource:
        return self.resource(PODS)

    @property
    def claims(self) -> Resource:
        return self.resource(RESOURCE_CLAIMS)

    @property
    def slices(self) -> Resource:
        return self.resource(RESOURCE_SLICES)

    def create_namespace(self) -> str:
        name = f"rn-{uuid.uuid4().hex[:8]}"
        self.resource(NAMESPACES).create({"metadata": {"name": name}})
        # The ServiceAccount admission plugin needs the namespace's `default`
        # account, which kube-controller-manager creates shortly after.
        accounts = self.resource(SERVICE_ACCOUNTS)
        eventually(
            lambda: _exists(lambda: accounts.get("default", name)),
            f"the default ServiceAccount in {name}",
        )
        return name

    def delete_namespace(self, name: str, timeout: float = WAIT) -> None:
        """Delete the namespace and wait for its pods to be gone (their claims unprepared)."""
        with suppress(NotFound):
            self.resource(NAMESPACES).delete(name)
        eventually(
            lambda: not self.pods.list(name).items,
            lambda: f"the pods of {name} gone (left: {self._pod_names(name)})",
            timeout,
        )

    def _pod_names(self, namespace: str) -> list[str]:
        return [p["metadata"]["name"] for p in self.pods.list(namespace).items]

    def apply_example(self, name: str, namespace: str) -> list[KubeObject]:
        """Create every object of ``deploy/examples/<name>`` as the file has it."""
        created = []
        kinds = {
            "Pod": PODS,
            "ResourceClaim": RESOURCE_CLAIMS,
            "ResourceClaimTemplate": RESOURCE_CLAIM_TEMPLATES,
        }
        for obj in load_example(name):
            created.append(self.resource(kinds[obj["kind"]]).create(obj, namespace))
        return created

    def get_pod(self, name: str, namespace: str) -> KubeObject | None:
        try:
            return self.pods.get(name, namespace)
        except NotFound:
            return None

    def running_pod(self, name: str, namespace: str, timeout: float = WAIT) -> KubeObject:
        """Wait until every container of the pod runs; fail with its events otherwise."""

        def running() -> KubeObject | None:
            pod = self.get_pod(name, namespace)
            statuses = ((pod or {}).get("status") or {}).get("containerStatuses") or []
            if pod and statuses and all("running" in (s.get("state") or {}) for s in statuses):
                return pod
            return None

        try:
            return eventually(running, f"pod {namespace}/{name} to run", timeout)
        except pytest.fail.Exception:
            raise AssertionError(
                f"pod {namespace}/{name} is not running; events:\n{self.events(namespace)}"
            ) from None

    def events(self, namespace: str) -> str:
        items = self.resource(CORE_EVENTS).list(namespace).items
        return "\n".join(
            f"  {e.get('type')} {e.get('reason')} {e['involvedObject'].get('name')}: "
            f"{e.get('message')}"
            for e in items
        )

    def delete_pod(self, name: str, namespace: str) -> None:
        with suppress(NotFound):
            self.pods.delete(name, namespace)

    def pod_gone(self, name: str, namespace: str) -> None:
        eventually(
            lambda: self.get_pod(name, namespace) is None, f"pod {namespace}/{name} to be gone"
        )

    def container_output(
        self, namespace: str, pod: str, container: str, until: str = "ready"
    ) -> str:
        """The container's own output, once it has printed ``until``."""
        return str(
            eventually(
                lambda: (
                    (out := self.node.pod_log(namespace, pod, container)) and until in out and out
                ),
                f"{namespace}/{pod}/{container} to print {until!r}",
            )
        )

    def node_slices(self, driver: str = DRIVER) -> list[KubeObject]:
        return [
            s
            for s in self.slices.list().items
            if s["spec"].get("driver") == driver and s["spec"].get("nodeName") == self.node.name
        ]

    # -- the chart ---------------------------------------------------------------

    def chart_values(self, **overrides: Any) -> dict[str, Any]:
        """Values for this node: local image, the node's folders, the apiserver on loopback."""
        host, port = self.cluster.server.removeprefix("https://").rsplit(":", 1)
        values: dict[str, Any] = {
            "image": {
                "repository": self.image_repository,
                "tag": self.image_tag,
                "pullPolicy": "Never",
            },
            "kubeletDir": str(self.node.kubelet_dir),
            "cdiRoot": str(self.node.cdi_root),
            "apiServer": {"host": host, "port": port},
            "logging": {"format": "text", "level": "info"},
            # On the host network the pod IP is the node's: the tests scrape loopback.
            "nodePlugin": {
                "hostNetwork": True,
                "metrics": {"port": _free_port(), "host": LOOPBACK},
            },
            "controller": {
                "hostNetwork": True,
                "replicas": 1,
                "metrics": {"port": _free_port(), "host": LOOPBACK},
            },
        }
        return merge_values(values, overrides)

    def install(
        self, release: str, values: dict[str, Any], namespace: str = RELEASE_NAMESPACE
    ) -> None:
        """``helm upgrade --install`` with ``values``; waits for the node plugin to run."""
        path = self.node.paths.root / f"values-{release}.yaml"
        path.write_text(yaml.safe_dump(values))
        self.helm.run(
            "upgrade",
            "--install",
            release,
            str(CHART),
            "--namespace",
            namespace,
            "--create-namespace",
            "--values",
            str(path),
        )
        if release not in self.releases:
            self.releases.append(release)
        self.values[release] = values

    def chart_values_of(self, release: str) -> dict[str, Any]:
        """The values ``release`` was last installed with."""
        return dict(self.values[release])

    def uninstall_all(self) -> None:
        for release in reversed(self.releases):
            with suppress(AssertionError):
                self.helm.run(
                    "uninstall",
                    release,
                    "--namespace",
                    RELEASE_NAMESPACE,
                    "--wait",
                    "--timeout",
                    "60s",
                )
        self.releases.clear()

    def plugin_pods(self, release: str = "drakit") -> list[KubeObject]:
        selector = f"app.kubernetes.io/instance={release},app.kubernetes.io/component=node-plugin"
        return [
            p
            for p in self.pods.list(RELEASE_NAMESPACE, label_selector=selector).items
            if not p["metadata"].get("deletionTimestamp")
        ]

    def all_plugin_pods(self, release: str = "drakit") -> list[KubeObject]:
        """Plugin pods of ``release``, terminating ones included."""
        selector = f"app.kubernetes.io/instance={release},app.kubernetes.io/component=node-plugin"
        return list(self.pods.list(RELEASE_NAMESPACE, label_selector=selector).items)

    def running_plugin_pod(self, release: str = "drakit") -> KubeObject:
        found: KubeObject = self.eventually_or_logs(
            lambda: next((p for p in self.plugin_pods(release) if _ready(p)), None),
            f"a ready node plugin pod of release {release}",
            release,
        )
        return found

    def plugin_logs(self, release: str = "drakit", lines: int = 40) -> str:
        """The last lines of every plugin container's output of ``release``."""
        out = []
        for pod in self.all_plugin_pods(release):
            text = self.node.pod_log(RELEASE_NAMESPACE, pod["metadata"]["name"], "plugin")
            states = [
                (c["image"].rsplit(":", 1)[-1], c.get("restartCount"), list(c.get("state") or {}))
                for c in (pod.get("status") or {}).get("containerStatuses") or []
            ]
            gone = " terminating" if pod["metadata"].get("deletionTimestamp") else ""
            header = f"--- {pod['metadata']['name']}{gone} {states}"
            out.append(header + "\n" + "\n".join(text.splitlines()[-lines:]))
        return "\n".join(out) or "(no plugin pods)"

    def eventually_or_logs(self, check: Callable[[], Any], what: str, release: str) -> Any:
        """``eventually``, failing with the plugin's log lines (what a person would read next)."""
        try:
            return eventually(check, what)
        except pytest.fail.Exception:
            raise AssertionError(
                f"timed out waiting for {what}; plugin logs:\n{self.plugin_logs(release)}\n"
                f"events in {RELEASE_NAMESPACE}:\n{self.events(RELEASE_NAMESPACE)}"
            ) from None

    def container_pid(self, pod: KubeObject, container: str) -> int:
        """Host pid of a running container's main process (through crictl)."""
        status = next(s for s in pod["status"]["containerStatuses"] if s["name"] == container)
        container_id = status["containerID"].split("://", 1)[1]
        info = yaml.safe_load(self.node.crictl("inspect", container_id).stdout)
        return int(info["info"]["pid"])

    def cdi_specs(self) -> list[str]:
        return sorted(p.name for p in self.node.cdi_root.glob("*") if p.is_file())


def _exists(get: Callable[[], Any]) -> bool:
    try:
        get()
    except Exception:
        return False
    return True


def _ready(pod: KubeObject) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def _free_port() -> int:
    from drakit.localcluster.process import free_port  # noqa: PLC0415

    return free_port()


def merge_values(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``extra`` merged in, nested mappings key by key (chart values)."""
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge_values(out[key], value)
        else:
            out[key] = value
    return out


def run_drakit(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -m drakit ARGS`` from the repository, its output captured."""
    return subprocess.run(
        [sys.executable, "-m", "drakit", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def template_pod(name: str, template: str, **spec: Any) -> dict[str, Any]:
    """A pod whose container ``main`` uses the claim made from ``template`` and prints the
    GPU_* environment it sees, then ``ready``; ``spec`` adds pod spec fields."""
    return {
        "metadata": {"name": name},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}],
            "containers": [
                {
                    "name": "main",
                    "image": "busybox:1.36",
                    "command": [
                        "sh",
                        "-c",
                        "env | grep '^GPU_' | sort; echo ready; exec sleep 86400",
                    ],
                    "resources": {"claims": [{"name": "gpu"}]},
                }
            ],
            **spec,
        },
    }
