"""The Grafana dashboard and the Prometheus alert rules under deploy/monitoring/ load, and
every metric they query is exported by the running components: the real node plugin and the
real controller, started as processes (``python -m drakit.cli``) against the local control
plane, scraped over HTTP on 127.0.0.1."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from helpers.waiting import eventually
from prometheus_client.parser import text_string_to_metric_families

from drakit.kubeapi.client import load_client
from drakit.kubeapi.resources import NODES, RESOURCE_SLICES, Resource
from drakit.localcluster import LocalCluster
from drakit.localcluster.process import free_port

pytestmark = pytest.mark.integration

MONITORING = Path(__file__).resolve().parents[3] / "deploy" / "monitoring"
METRIC_NAME = re.compile(r"\b((?:drakit|dynamic_resource_allocation)_[a-z0-9_]+)\b")
# Sample names each metric type exposes beside its family name.
SUFFIXES = {
    "counter": ("_total", "_created"),
    "histogram": ("_bucket", "_sum", "_count", "_created"),
    "summary": ("_sum", "_count", "_created"),
}
# Only keeps a broken test from hanging; nothing here measures time.
EVENTUALLY = 90.0


def dashboard_expressions() -> list[str]:
    dashboard = json.loads((MONITORING / "drakit-dashboard.json").read_text())
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel.get("targets", [])]
    exprs += [
        v["query"]["query"]
        for v in dashboard["templating"]["list"]
        if isinstance(v.get("query"), dict)
    ]
    return exprs


def alert_expressions() -> list[str]:
    rules = yaml.safe_load((MONITORING / "drakit-alerts.yaml").read_text())
    return [rule["expr"] for group in rules["groups"] for rule in group["rules"]]


def queried_metrics(expressions: list[str]) -> set[str]:
    return {name for expr in expressions for name in METRIC_NAME.findall(expr)}


def exported_names(text: str) -> set[str]:
    names = set()
    for family in text_string_to_metric_families(text):
        names.add(family.name)
        names.update(family.name + suffix for suffix in SUFFIXES.get(family.type, ()))
    return names


def scrape(port: int, process: subprocess.Popen[bytes], log: Path) -> str:
    """The text of ``/metrics`` on ``port``, once the process serves it."""
    last: list[OSError] = []

    def text() -> str | None:
        if process.poll() is not None:
            raise AssertionError(f"process exited: {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                return str(r.read().decode())
        except OSError as err:
            last[:] = [err]
            return None

    answer: str = eventually(
        text, lambda: f"/metrics on port {port} (last error: {last})", EVENTUALLY, interval=0.2
    )
    return answer


def start(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "drakit.cli", *args], stdout=out, stderr=subprocess.STDOUT
        )


def stop(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@dataclass
class Running:
    """A real node plugin and a real controller, and how to scrape them."""

    driver: str
    node: str
    plugin: tuple[int, subprocess.Popen[bytes], Path]
    controller: tuple[int, subprocess.Popen[bytes], Path]

    def metrics(self) -> str:
        return scrape(*self.plugin) + "\n" + scrape(*self.controller)


@pytest.fixture
def running(cluster: LocalCluster, tmp_path: Path) -> Iterator[Running]:
    """A real node plugin (example backend: 8 plain GPUs on a Node of its own) and a real
    controller."""
    suffix = uuid.uuid4().hex[:6]
    driver, node = f"mon-{suffix}.example.com", f"node-mon-{suffix}"
    nodes = Resource(load_client(cluster.kubeconfig, qps=0), NODES)
    nodes.create({"metadata": {"name": node}})  # the plugin publishes only for a Node that exists
    for sub in ("registry", "plugins", "cdi"):
        (tmp_path / sub).mkdir()
    plugin_port, controller_port = free_port(), free_port()
    plugin = start(
        [
            "node-plugin", "--driver-name", driver, "--node-name", node,
            "--kubeconfig", cluster.kubeconfig, "--backend", "example",
            "--kubelet-registrar-dir", str(tmp_path / "registry"),
            "--kubelet-plugins-dir", str(tmp_path / "plugins"),
            "--cdi-root", str(tmp_path / "cdi"),
            "--metrics-address", f"127.0.0.1:{plugin_port}",
            # On (no kubelet here: rounds fail, counted): its metrics exist only then.
            "--podresources-check", "on",
            "--podresources-socket", str(tmp_path / "no-kubelet.sock"),
        ],
        tmp_path / "plugin.log",
    )  # fmt: skip
    controller = start(
        [
            "controller", "--kubeconfig", cluster.kubeconfig,
            "--scheduler-name", f"mon-{uuid.uuid4().hex[:6]}",
            "--metrics-address", f"127.0.0.1:{controller_port}",
        ],
        tmp_path / "controller.log",
    )  # fmt: skip
    try:
        yield Running(
            driver,
            node,
            (plugin_port, plugin, tmp_path / "plugin.log"),
            (controller_port, controller, tmp_path / "controller.log"),
        )
    finally:
        stop(controller)
        stop(plugin)
        _delete_slices(cluster, driver)
        nodes.delete(node)


def _delete_slices(cluster: LocalCluster, driver: str) -> None:
    slices = Resource(load_client(cluster.kubeconfig, qps=0), RESOURCE_SLICES)
    for s in slices.list().items:
        if s["spec"]["driver"] == driver:
            slices.delete(s["metadata"]["name"])


def test_dashboard_and_alerts_load_and_query_drakit_metrics() -> None:
    dashboard = json.loads((MONITORING / "drakit-dashboard.json").read_text())
    assert dashboard["panels"] and all(p["targets"] for p in dashboard["panels"])
    rules = yaml.safe_load((MONITORING / "drakit-alerts.yaml").read_text())
    alerts = {rule["alert"] for group in rules["groups"] for rule in group["rules"]}
    assert {
        "DrakitNodePluginNotRegistered", "DrakitPrepareErrors", "DrakitPoolExhausted",
        "DrakitSlicesMissing",
    } <= alerts  # fmt: skip
    assert queried_metrics(dashboard_expressions())
    assert queried_metrics(alert_expressions())


def test_every_metric_the_dashboard_and_alerts_query_is_exported(running: Running) -> None:
    exported = exported_names(running.metrics())
    wanted = queried_metrics(dashboard_expressions() + alert_expressions())
    assert wanted - exported == set()


def test_controller_counts_the_node_plugins_published_devices_as_free(running: Running) -> None:
    labels = f'driver="{running.driver}",node="{running.node}",pool="{running.node}",state="free"'
    free = f"drakit_pool_devices{{{labels}}}"
    lines: list[str] = []

    def eight_free() -> bool:
        lines[:] = [
            line for line in scrape(*running.controller).splitlines() if line.startswith(free)
        ]
        return lines == [f"{free} 8.0"]

    eventually(eight_free, lambda: f"8 free devices; the controller exports {lines}", EVENTUALLY)
