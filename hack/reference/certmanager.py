"""cert-manager for the Go driver's run, as upstream's e2e setup gives it.

Upstream's `test/e2e/setup-e2e.sh` installs cert-manager v1.20.2 from its Helm chart with
`crds.enabled=true`; the driver's chart then asks it for the webhook's serving
certificate (an `Issuer` with `selfSigned: {}`, a `Certificate` for the webhook
Service's DNS name, whose Secret the webhook Pod mounts) and for the CA bundle of its
ValidatingWebhookConfiguration (the `cert-manager.io/inject-ca-from` annotation, read by
cert-manager's cainjector).

Here: the CRDs are rendered from that chart (the module's `deploy/charts/cert-manager`,
`helm template --set crds.enabled=true`, CRD templates only) and created; cert-manager's
certificate controllers and its cainjector run as two host processes
(`hack/tools/cert-manager`, built from the v1.20.2 module) with the admin kubeconfig.
Their images would need a registry this machine does not reach, and nothing the driver
sees depends on where they run: the same Secret, the same caBundle.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import yaml

from drakit.kubeapi.client import load_client
from drakit.kubeapi.resources import Resource, ResourceType
from drakit.localcluster import StartError
from drakit.localcluster.process import ManagedProcess

#: The cert-manager version upstream's e2e setup installs (and hack/tools/cert-manager pins).
VERSION = "v1.20.2"
CRDS = ResourceType(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False
)
#: How long the CRDs may take to be served, and the processes to report they started.
READY_TIMEOUT = 60.0


def render_crds(helm: Path, chart: Path, kube_version: str) -> list[dict[str, Any]]:
    """The CRDs cert-manager's chart installs with ``crds.enabled=true`` on a cluster of
    ``kube_version`` (helm template's own default, v1.20, is below the chart's minimum).

    The module carries the chart as its release tool leaves it (``Chart.template.yaml``,
    version v0.0.0); a copy gets a ``Chart.yaml`` of this version.
    """
    templates = sorted(p.name for p in (chart / "templates").glob("crd-*.yaml"))
    if not templates:
        raise StartError(f"{chart}: no crd-*.yaml templates; is this cert-manager's chart?")
    with tempfile.TemporaryDirectory(prefix="drakit-cert-manager-chart-") as tmp:
        staged = Path(tmp) / "cert-manager"
        shutil.copytree(chart, staged)
        template = (staged / "Chart.template.yaml").read_text()
        (staged / "Chart.yaml").write_text(
            template.replace("version: v0.0.0", f"version: {VERSION}")
            .replace("appVersion: v0.0.0", f"appVersion: {VERSION}")
            .replace("{{IS_PRERELEASE}}", "false")
        )
        argv = [str(helm), "template", "cert-manager", str(staged), "--namespace", "cert-manager"]
        argv += [f"--kube-version={kube_version}", "--set", "crds.enabled=true"]
        for name in templates:
            argv += ["--show-only", f"templates/{name}"]
        proc = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=120)
    if proc.returncode != 0:
        raise StartError(f"rendering cert-manager's CRDs failed: {proc.stderr.strip()}")
    crds = [d for d in yaml.safe_load_all(proc.stdout) if d]
    if len(crds) != len(templates) or any(d.get("kind") != CRDS.kind for d in crds):
        raise StartError(f"cert-manager's chart rendered {len(crds)} objects, not its CRDs")
    return crds


def install_crds(kubeconfig: str, crds: list[dict[str, Any]]) -> None:
    """Create ``crds`` and wait until the apiserver serves each of them."""
    resource = Resource(load_client(kubeconfig, user_agent="drakit-reference"), CRDS)
    for crd in crds:
        resource.create(crd)
    deadline = time.monotonic() + READY_TIMEOUT
    for crd in crds:
        name = crd["metadata"]["name"]
        while not _established(resource.get(name)):
            if time.monotonic() > deadline:
                raise StartError(f"CRD {name} was not Established within {READY_TIMEOUT:.0f}s")
            time.sleep(0.2)


def _established(crd: dict[str, Any]) -> bool:
    conditions = crd.get("status", {}).get("conditions", [])
    return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)


@contextmanager
def running(binary: Path, kubeconfig: str, logs: Path) -> Iterator[None]:
    """cert-manager's controller and cainjector, stopped on exit (and, as every
    ManagedProcess, killed with the launcher); their logs in ``logs``."""
    logs.mkdir(parents=True, exist_ok=True)
    with ExitStack() as stack:
        for role in ("controller", "cainjector"):
            proc = ManagedProcess(
                f"cert-manager-{role}",
                [str(binary), role, f"--kubeconfig={kubeconfig}"],
                logs / f"cert-manager-{role}.log",
            )
            proc.start()
            stack.callback(proc.stop)
            proc.wait_ready(partial(_started, proc.log_path, role), READY_TIMEOUT)
            print(f"reference: cert-manager {role} {VERSION} running (pid {proc.pid})")
        yield


def _started(log: Path, role: str) -> bool:
    """hack/tools/cert-manager logs this once every loop is set up."""
    return log.is_file() and f"cert-manager {role} started" in log.read_text(errors="replace")
