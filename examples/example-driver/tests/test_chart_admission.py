"""The example chart's webhook and admission policies against the real kube-apiserver.

The chart is installed for real (``helm install``) with its webhook on the host network at
a free port and scoped to one namespace by ``webhook.namespaceSelector`` (the control plane
is shared by the whole session). No kubelet runs its pods: the test runs ``drakit webhook``
itself, with the rendered Deployment's arguments and a token of the chart's own webhook
ServiceAccount, so the chart's RBAC and policies are what it works with. Node plugin tokens
are TokenRequests bound to a pod on a node, as the kubelet mounts them. The API is
drakit.testing's ``KubeAPI``, as the chart's own ServiceAccounts too (``as_token``).
"""

from __future__ import annotations

import base64
import json
import os
import socket
import ssl
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from example_paths import CHART, subprocess_env

from drakit.testing import APIError, KubeAPI, eventually

pytestmark = pytest.mark.integration

RES = "resource.k8s.io"
INVALID = {
    "apiVersion": "gpu.resource.example.com/v1alpha1",
    "kind": "GpuConfig",
    "sharing": {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "InvalidInterval"}},
}
VALID = {
    "apiVersion": "gpu.resource.example.com/v1alpha1",
    "kind": "GpuConfig",
    "sharing": {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Long"}},
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Release:
    """The installed chart and the names it made."""

    helm: list[str]
    name: str
    namespace: str
    claims_namespace: str
    driver: str
    port: int
    configuration: str
    secret: str
    webhook_account: str
    plugin_account: str
    webhook_args: list[str]
    admin: KubeAPI

    def token(self, account: str, bound_pod: dict[str, Any] | None = None) -> str:
        return self.admin.token(account, self.namespace, bound_to_pod=bound_pod)

    def client_for(self, token: str) -> KubeAPI:
        return self.admin.as_token(token)

    def kubeconfig_for(self, token: str, dest: Path) -> Path:
        return self.admin.write_kubeconfig(dest, token=token)

    def bundles(self) -> set[bytes]:
        hooks = self.admin.webhook_configurations.get(self.configuration)["webhooks"]
        return {base64.b64decode(h["clientConfig"].get("caBundle") or "") for h in hooks}

    def secret_data(self) -> dict[str, str]:
        return dict(self.admin.secrets.get(self.secret, self.namespace).get("data") or {})


@pytest.fixture(scope="module")
def release(
    drakit_helm: Path, drakit_cluster: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Release]:
    suffix = uuid.uuid4().hex[:6]
    name, namespace, claims_ns = f"ex-{suffix}", f"exd-{suffix}", f"exc-{suffix}"
    driver = f"gpu-{suffix}.example.com"
    admin = KubeAPI(drakit_cluster.kubeconfig)
    for ns in (namespace, claims_ns):
        admin.namespaces.create({"metadata": {"name": ns}})
    home = tmp_path_factory.mktemp("helm")
    env = {
        **os.environ,
        **{f"HELM_{n}_HOME": str(home / n.lower()) for n in ("CONFIG", "CACHE", "DATA")},
    }
    helm = [str(drakit_helm), "--kubeconfig", drakit_cluster.kubeconfig, "--namespace", namespace]
    port = free_port()
    selector = {"matchLabels": {"kubernetes.io/metadata.name": claims_ns}}
    values = [
        "--set", f"driverName={driver}", "--set", "webhook.enabled=true",
        "--set", "webhook.endpoint=hostNetwork", "--set", f"webhook.port={port}",
        "--set", "webhook.replicas=1",
        "--set-json", f"webhook.namespaceSelector={json.dumps(selector)}",
    ]  # fmt: skip
    done = subprocess.run([*helm, "install", name, str(CHART), *values], env=env,
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    manifest = subprocess.run([*helm, "get", "manifest", name], env=env, capture_output=True,
                              text=True, timeout=60, check=True).stdout  # fmt: skip
    docs = [d for d in yaml.safe_load_all(manifest) if d]
    component = {(d["kind"], d["metadata"]["labels"].get("app.kubernetes.io/component")): d
                 for d in docs}  # fmt: skip
    deployment = component["Deployment", "webhook"]
    configuration = next(d for d in docs if d["kind"] == "ValidatingWebhookConfiguration")
    account = deployment["spec"]["template"]["spec"]["serviceAccountName"]
    plugin = next(d for d in docs if d["kind"] == "DaemonSet")["spec"]["template"]["spec"]
    try:
        yield Release(
            helm=helm, name=name, namespace=namespace, claims_namespace=claims_ns, driver=driver,
            port=port, configuration=configuration["metadata"]["name"],
            secret=f"{configuration['metadata']['name']}-ca", webhook_account=account,
            plugin_account=plugin["serviceAccountName"],
            webhook_args=deployment["spec"]["template"]["spec"]["containers"][0]["args"],
            admin=admin,
        )  # fmt: skip
    finally:
        subprocess.run([*helm, "uninstall", name], env=env, capture_output=True, timeout=120,
                       check=False)  # fmt: skip
        for ns in (namespace, claims_ns):
            admin.namespaces.delete(ns, missing_ok=True)
        admin.close()


class Webhook:
    """``drakit webhook`` as the chart's Deployment runs it, with its ServiceAccount."""

    def __init__(self, release: Release, tmp: Path) -> None:
        self.release = release
        self.tmp = tmp
        self.kubeconfig = release.kubeconfig_for(release.token(release.webhook_account),
                                                 tmp / "kubeconfig")  # fmt: skip
        self.processes: list[subprocess.Popen[bytes]] = []

    def start(self, *extra: str, port: int | None = None) -> subprocess.Popen[bytes]:
        args = [a for a in self.release.webhook_args
                if not (port is not None and a.startswith("--port="))]  # fmt: skip
        if port is not None:
            args.append(f"--port={port}")
        log = (self.tmp / f"webhook-{len(self.processes)}.log").open("wb")
        env = {**subprocess_env(), "BIND_ADDRESS": "127.0.0.1"}
        process = subprocess.Popen(
            [sys.executable, "-m", "drakit", "webhook", *args, "--kubeconfig", str(self.kubeconfig),
             "--log-format", "text", *extra],
            env=env, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        log.close()
        self.processes.append(process)
        return process

    def stop(self, process: subprocess.Popen[bytes] | None = None) -> None:
        for p in [process] if process is not None else self.processes:
            if p.poll() is None:
                p.terminate()
                p.wait(timeout=15)

    def logs(self) -> str:
        return "".join(
            p.read_text(errors="replace") for p in sorted(self.tmp.glob("webhook-*.log"))
        )

    def served_certificate(self, port: int | None = None) -> bytes:
        """The DER certificate the webhook on ``port`` presents."""
        context = ssl.create_default_context()
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        address = ("127.0.0.1", port or self.release.port)
        with socket.create_connection(address, timeout=5) as raw, context.wrap_socket(raw) as tls:
            der = tls.getpeercert(binary_form=True)
        assert der is not None
        return der


@pytest.fixture
def webhook(release: Release, tmp_path: Path) -> Iterator[Webhook]:
    hook = Webhook(release, tmp_path)
    yield hook
    hook.stop()
    assert "Traceback" not in hook.logs()


def claim(name: str, params: Any | None, driver: str, version: str = "v1") -> dict[str, Any]:
    request: dict[str, Any] = {"name": "gpu"}
    if version == "v1beta1":
        request["deviceClassName"] = driver
    else:
        request["exactly"] = {"deviceClassName": driver}
    devices: dict[str, Any] = {"requests": [request]}
    if params is not None:
        devices["config"] = [
            {"requests": ["gpu"], "opaque": {"driver": driver, "parameters": params}}
        ]
    return {"apiVersion": f"{RES}/{version}", "kind": "ResourceClaim",
            "metadata": {"name": name}, "spec": {"devices": devices}}  # fmt: skip


def template(name: str, params: Any, driver: str, version: str = "v1") -> dict[str, Any]:
    spec = claim("", params, driver, version)["spec"]
    return {"apiVersion": f"{RES}/{version}", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name}, "spec": {"spec": spec}}  # fmt: skip


def create(release: Release, obj: dict[str, Any], *, dry_run: bool = True) -> dict[str, Any]:
    plural = "resourceclaims" if obj["kind"] == "ResourceClaim" else "resourceclaimtemplates"
    kind = release.admin.objects(obj["apiVersion"], plural, obj["kind"])
    return kind.create(obj, release.claims_namespace, dry_run=dry_run)


def refused(call: Callable[[], Any], status: int | None = None) -> str:
    """The apiserver's message refusing ``call`` (with HTTP ``status``, when given)."""
    with pytest.raises(APIError) as caught:
        call()
    if status is not None:
        assert caught.value.code == status, caught.value.message
    return caught.value.message


def wait_serving(release: Release, webhook: Webhook) -> None:
    """The apiserver refuses this driver's invalid config through the webhook."""

    def judged() -> bool:
        try:
            create(release, claim("probe", INVALID, release.driver))
        except APIError as exc:
            return "unknown time-slice interval" in exc.message
        return False

    eventually(judged, what=f"the webhook judging claims ({webhook.logs()[-2000:]})", timeout=90)


# -- availability -----------------------------------------------------------------------------


def test_claims_without_this_drivers_config_are_admitted_while_the_webhook_is_down(
    release: Release, webhook: Webhook
) -> None:
    process = webhook.start()
    wait_serving(release, webhook)
    # KubeAPI writes JSON as Go clients do (compact): the apiserver compares opaque
    # parameters byte for byte on update, and spaced JSON would not survive a patch.
    claims = release.admin.claims
    ours = claims.create(claim("ours", VALID, release.driver), release.claims_namespace)
    webhook.stop(process)  # nothing answers at the configuration's URL from here on

    assert create(release, claim("no-config", None, release.driver))
    assert create(release, claim("other", {"anything": 1}, "nic.example.com"))
    assert create(release, template("tpl", {"anything": 1}, "nic.example.com"))
    # A finalizer update of this driver's claim leaves its config as it was.
    name, namespace = ours["metadata"]["name"], release.claims_namespace
    # (A JSON patch, as controllers write claims: a merge patch re-encodes the opaque
    # parameters, which the apiserver then refuses as a change of the immutable spec.)
    add = [{"op": "add", "path": "/metadata/finalizers", "value": ["example.com/keep"]}]
    patched = claims.patch(name, add, namespace, kind="json")
    assert patched["metadata"]["finalizers"] == ["example.com/keep"]
    remove = [{"op": "remove", "path": "/metadata/finalizers"}]
    claims.patch(name, remove, namespace, kind="json")
    # This driver's config still waits on the webhook (failurePolicy Fail).
    message = refused(lambda: create(release, claim("mine", VALID, release.driver)), 500)
    assert "failed calling webhook" in message


@pytest.mark.parametrize("version", ["v1", "v1beta2", "v1beta1"])
def test_every_served_version_of_claims_and_templates_is_judged(
    release: Release, webhook: Webhook, version: str
) -> None:
    webhook.start()
    wait_serving(release, webhook)
    for make, path in ((claim, "spec.devices"), (template, "spec.spec.devices")):
        bad = make(f"bad-{version}", INVALID, release.driver, version)
        message = refused(lambda bad=bad: create(release, bad))
        assert f"{path}.config[0].opaque.parameters" in message, message
        assert "unknown time-slice interval: InvalidInterval" in message
        assert create(release, make(f"good-{version}", VALID, release.driver, version))


# -- the CA Secret ----------------------------------------------------------------------------


def test_a_restarted_webhook_serves_the_ca_the_apiserver_already_trusts(
    release: Release, webhook: Webhook
) -> None:
    process = webhook.start()
    wait_serving(release, webhook)
    bundle, data, served = release.bundles(), release.secret_data(), webhook.served_certificate()
    webhook.stop(process)
    webhook.start()
    wait_serving(release, webhook)
    assert release.bundles() == bundle
    assert release.secret_data()["tls.crt"] == data["tls.crt"]
    assert webhook.served_certificate() == served


def test_a_second_replica_serves_the_same_certificate_without_writing_anything(
    release: Release, webhook: Webhook
) -> None:
    webhook.start("--resync", "1")
    wait_serving(release, webhook)
    admin = release.admin

    def versions() -> tuple[str, str]:
        return (
            admin.webhook_configurations.get(release.configuration)["metadata"]["resourceVersion"],
            admin.secrets.get(release.secret, release.namespace)["metadata"]["resourceVersion"],
        )

    before = versions()
    other = free_port()
    webhook.start("--resync", "1", port=other)

    def serving() -> bool:
        try:
            return webhook.served_certificate(other) == webhook.served_certificate()
        except OSError:  # not listening or no certificate yet
            return False

    eventually(serving, what="the second replica serving the shared certificate", timeout=60)
    assert versions() == before


def test_a_requested_rotation_overlaps_and_deleting_the_secret_starts_over(
    release: Release, webhook: Webhook
) -> None:
    webhook.start("--resync", "1")
    wait_serving(release, webhook)
    (first,) = release.bundles()
    served = webhook.served_certificate()
    secrets = release.admin.secrets
    request = {"metadata": {"annotations": {"webhook.drakit.dev/rotate": "1"}}}
    secrets.patch(release.secret, request, release.namespace)
    seen: set[bytes] = set()

    def rotated() -> bool:
        (bundle,) = release.bundles()
        seen.add(bundle)
        # Every request in between is judged: no moment without a trusted certificate.
        wait_serving(release, webhook)
        return webhook.served_certificate() != served

    eventually(rotated, what="the served certificate rotated", timeout=60)
    assert any(first in b and b != first for b in seen), "the new CA published beside the old"
    annotations = secrets.get(release.secret, release.namespace)["metadata"]["annotations"]
    assert annotations["webhook.drakit.dev/rotated-for"] == "1"

    secrets.delete(release.secret, release.namespace)
    eventually(lambda: first not in b"".join(release.bundles()) and release.secret_data(),
               what="a new CA after the Secret was deleted", timeout=60)  # fmt: skip
    wait_serving(release, webhook)


# -- the webhook's own configuration and Secret -----------------------------------------------


MUTATIONS: dict[str, list[dict[str, Any]]] = {
    "rules": [{"op": "add", "path": "/webhooks/0/rules/-", "value": {
        "apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
        "resources": ["secrets"], "scope": "*"}}],
    "url": [{"op": "replace", "path": "/webhooks/0/clientConfig/url",
             "value": "https://attacker.example.com/"}],
    "failurePolicy": [{"op": "replace", "path": "/webhooks/0/failurePolicy", "value": "Ignore"}],
    "namespaceSelector": [{"op": "replace", "path": "/webhooks/0/namespaceSelector",
                           "value": {}}],
    "objectSelector": [{"op": "replace", "path": "/webhooks/0/objectSelector",
                        "value": {"matchLabels": {"a": "b"}}}],
    "matchConditions": [{"op": "remove", "path": "/webhooks/0/matchConditions"}],
    "timeoutSeconds": [{"op": "replace", "path": "/webhooks/0/timeoutSeconds", "value": 30}],
    "another webhook": [{"op": "copy", "from": "/webhooks/0", "path": "/webhooks/-"},
                        {"op": "replace", "path": "/webhooks/1/name", "value": "x.example.com"}],
    "labels": [{"op": "add", "path": "/metadata/labels/extra", "value": "x"}],
    "annotations": [{"op": "add", "path": "/metadata/annotations", "value": {"a": "b"}}],
    "finalizers": [{"op": "add", "path": "/metadata/finalizers", "value": ["example.com/x"]}],
}  # fmt: skip


@pytest.fixture(scope="module")
def as_webhook(release: Release) -> KubeAPI:
    return release.client_for(release.token(release.webhook_account))


@pytest.mark.parametrize("field", sorted(MUTATIONS))
def test_the_webhook_may_not_change_its_configuration_beyond_the_ca_bundle(
    release: Release, as_webhook: KubeAPI, field: str
) -> None:
    """RBAC gave it patch on the whole object: it could have asked to be sent every Secret."""
    message = refused(lambda: as_webhook.webhook_configurations.patch(
        release.configuration, MUTATIONS[field], kind="json", dry_run=True), 403)  # fmt: skip
    assert "may change only webhooks[].clientConfig.caBundle" in message, message


def test_the_webhook_may_change_the_ca_bundle(release: Release, as_webhook: KubeAPI) -> None:
    bundle = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n")
    patch = [{"op": "add", "path": "/webhooks/0/clientConfig/caBundle", "value": bundle.decode()}]
    assert as_webhook.webhook_configurations.patch(
        release.configuration, patch, kind="json", dry_run=True
    )


def test_the_webhook_may_not_replace_or_delete_its_configuration(
    release: Release, as_webhook: KubeAPI
) -> None:
    current = release.admin.webhook_configurations.get(release.configuration)
    configurations = as_webhook.webhook_configurations
    refused(lambda: configurations.replace(current, dry_run=True), 403)
    refused(lambda: configurations.delete(release.configuration, dry_run=True), 403)


@pytest.mark.parametrize(
    ("name", "secret_type", "expected"),
    [
        ("other-secret", "Opaque", "may create only the Opaque Secret"),
        (None, "kubernetes.io/service-account-token", "not kubernetes.io/service-account-token"),
    ],
)
def test_the_webhook_may_create_only_its_own_opaque_secret(
    release: Release, name: str | None, secret_type: str, expected: str
) -> None:
    secrets = release.client_for(release.token(release.webhook_account)).secrets
    annotations = {"kubernetes.io/service-account.name": release.webhook_account}
    body = {"metadata": {"name": name or release.secret, "annotations": annotations},
            "type": secret_type}  # fmt: skip
    message = refused(lambda: secrets.create(body, release.namespace, dry_run=True), 403)
    assert expected in message, message


# -- the kubelet plugin's slices --------------------------------------------------------------


@pytest.fixture(scope="module")
def plugin_on_a(release: Release) -> Iterator[tuple[KubeAPI, str, str]]:
    """The plugin's token bound to a pod on node A (nodes A and B exist)."""
    admin = release.admin
    suffix = uuid.uuid4().hex[:6]
    nodes = [f"node-a-{suffix}", f"node-b-{suffix}"]
    for node in nodes:
        admin.nodes.create({"metadata": {"name": node}})
    pod = admin.pods.create({
        "metadata": {"name": "plugin-a"},
        "spec": {"nodeName": nodes[0], "serviceAccountName": release.plugin_account,
                 "automountServiceAccountToken": False,
                 "containers": [{"name": "plugin", "image": "example:test"}]},
    }, release.namespace)  # fmt: skip
    token = release.token(release.plugin_account, pod)
    try:
        yield release.client_for(token), nodes[0], nodes[1]
    finally:
        for node in nodes:
            admin.nodes.delete(node, missing_ok=True)


def slice_of(name: str, driver: str, node: str) -> dict[str, Any]:
    return {"apiVersion": f"{RES}/v1", "kind": "ResourceSlice", "metadata": {"name": name},
            "spec": {"driver": driver, "nodeName": node, "devices": [{"name": "gpu-0"}],
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}}}  # fmt: skip


def test_the_kubelet_plugin_writes_only_its_own_nodes_slices_of_its_driver(
    release: Release, plugin_on_a: tuple[KubeAPI, str, str]
) -> None:
    api, node_a, node_b = plugin_on_a
    slices = api.slices

    def write(body: dict[str, Any]) -> Any:
        return slices.create(body, dry_run=True)

    def policy_refuses(body: dict[str, Any]) -> str:
        def attempt() -> str:
            try:
                write(body)
            except APIError as exc:
                return exc.message if exc.code == 403 else ""
            return ""

        return str(eventually(attempt, what="the policy in force", timeout=60))

    name = f"s-{uuid.uuid4().hex[:6]}"
    assert f"may write only ResourceSlices of its own node, not those of node {node_b}" in (
        policy_refuses(slice_of(name, release.driver, node_b))
    )
    assert "not of driver nic.example.com" in policy_refuses(
        slice_of(name, "nic.example.com", node_a)
    )
    assert write(slice_of(name, release.driver, node_a))
    # Nor may it change or delete another node's slice (the admin's, here).
    admin = release.admin.slices
    theirs = admin.create(slice_of(name, release.driver, node_b))
    try:
        theirs["spec"]["devices"] = []
        refused(lambda: slices.replace(theirs, dry_run=True), 403)
        refused(lambda: slices.delete(name, dry_run=True), 403)
    finally:
        admin.delete(name)
