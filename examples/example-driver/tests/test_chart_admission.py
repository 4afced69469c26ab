"""The example chart's webhook and admission policies against the real kube-apiserver.

The chart is installed for real (``helm install``) with its webhook on the host network at
a free port and scoped to one namespace by ``webhook.namespaceSelector`` (the control plane
is shared by the whole session). No kubelet runs its pods: the test runs ``drakit webhook``
itself, with the rendered Deployment's arguments and a token of the chart's own webhook
ServiceAccount, so the chart's RBAC and policies are what it works with. Node plugin tokens
are TokenRequests bound to a pod on a node, as the kubelet mounts them.
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from example_paths import CHART, subprocess_env
from helpers.waiting import eventually
from kubernetes import client
from kubernetes.client.rest import ApiException

from drakit.kubeapi.lightclient import load_light_client
from drakit.kubeapi.resources import RESOURCE_CLAIMS, PatchType, Resource

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
    admin: client.ApiClient
    kubeconfig: str
    #: Clients made by client_for, closed with the release.
    clients: list[client.ApiClient] = field(default_factory=list)

    def token(self, account: str, bound_pod: dict[str, Any] | None = None) -> str:
        spec: dict[str, Any] = {"audiences": [], "expirationSeconds": 3600}
        if bound_pod is not None:
            meta = bound_pod["metadata"]
            spec["boundObjectRef"] = {
                "apiVersion": "v1", "kind": "Pod", "name": meta["name"], "uid": meta["uid"]
            }  # fmt: skip
        response = client.CoreV1Api(self.admin).create_namespaced_service_account_token(
            account, self.namespace, {"spec": spec}
        )
        token: str = response.status.token
        return token

    def client_for(self, token: str) -> client.ApiClient:
        base = self.admin.configuration
        cfg = client.Configuration()
        cfg.host, cfg.ssl_ca_cert, cfg.verify_ssl = base.host, base.ssl_ca_cert, base.verify_ssl
        cfg.api_key = {"authorization": f"Bearer {token}"}
        api = client.ApiClient(cfg)
        self.clients.append(api)
        return api

    def kubeconfig_for(self, token: str, dest: Path) -> Path:
        config = yaml.safe_load(Path(self.kubeconfig).read_text())
        config["users"] = [{"name": "sa", "user": {"token": token}}]
        for context in config["contexts"]:
            context["context"]["user"] = "sa"
        dest.write_text(yaml.safe_dump(config))
        dest.chmod(0o600)
        return dest

    def bundles(self) -> set[bytes]:
        hooks = (
            client.AdmissionregistrationV1Api(self.admin)
            .read_validating_webhook_configuration(self.configuration)
            .webhooks
        )
        return {base64.b64decode(h.client_config.ca_bundle or "") for h in hooks}

    def secret_data(self) -> dict[str, str]:
        secret = client.CoreV1Api(self.admin).read_namespaced_secret(self.secret, self.namespace)
        return dict(secret.data or {})


@pytest.fixture(scope="module")
def release(
    helm_binary: Path, cluster: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Release]:
    suffix = uuid.uuid4().hex[:6]
    name, namespace, claims_ns = f"ex-{suffix}", f"exd-{suffix}", f"exc-{suffix}"
    driver = f"gpu-{suffix}.example.com"
    admin = cluster.api_client()
    core = client.CoreV1Api(admin)
    for ns in (namespace, claims_ns):
        core.create_namespace({"metadata": {"name": ns}})
    home = tmp_path_factory.mktemp("helm")
    env = {
        **os.environ,
        **{f"HELM_{n}_HOME": str(home / n.lower()) for n in ("CONFIG", "CACHE", "DATA")},
    }
    helm = [str(helm_binary), "--kubeconfig", cluster.kubeconfig, "--namespace", namespace]
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
    installed: Release | None = None
    try:
        installed = Release(
            helm=helm, name=name, namespace=namespace, claims_namespace=claims_ns, driver=driver,
            port=port, configuration=configuration["metadata"]["name"],
            secret=f"{configuration['metadata']['name']}-ca", webhook_account=account,
            plugin_account=plugin["serviceAccountName"],
            webhook_args=deployment["spec"]["template"]["spec"]["containers"][0]["args"],
            admin=admin, kubeconfig=cluster.kubeconfig,
        )  # fmt: skip
        yield installed
    finally:
        for api in installed.clients if installed else []:
            api.close()
        subprocess.run([*helm, "uninstall", name], env=env, capture_output=True, timeout=120,
                       check=False)  # fmt: skip
        for ns in (namespace, claims_ns):
            core.delete_namespace(ns)


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


def create(release: Release, obj: dict[str, Any], *, dry_run: bool = True,
           api: client.ApiClient | None = None) -> dict[str, Any]:  # fmt: skip
    version = obj["apiVersion"].split("/")[1]
    plural = "resourceclaims" if obj["kind"] == "ResourceClaim" else "resourceclaimtemplates"
    kwargs = {"dry_run": "All"} if dry_run else {}
    created: dict[str, Any] = client.CustomObjectsApi(
        api or release.admin
    ).create_namespaced_custom_object(RES, version, release.claims_namespace, plural, obj, **kwargs)
    return created


def refused(call: Callable[[], Any], status: int | None = None) -> str:
    with pytest.raises(ApiException) as caught:
        call()
    if status is not None:
        assert caught.value.status == status, caught.value.body
    return str(caught.value.body)


def wait_serving(release: Release, webhook: Webhook) -> None:
    """The apiserver refuses this driver's invalid config through the webhook."""

    def judged() -> bool:
        try:
            create(release, claim("probe", INVALID, release.driver))
        except ApiException as exc:
            return "unknown time-slice interval" in str(exc.body)
        return False

    eventually(judged, what=f"the webhook judging claims ({webhook.logs()[-2000:]})", timeout=90)


# -- availability -----------------------------------------------------------------------------


def test_claims_without_this_drivers_config_are_admitted_while_the_webhook_is_down(
    release: Release, webhook: Webhook, request: pytest.FixtureRequest
) -> None:
    process = webhook.start()
    wait_serving(release, webhook)
    # Written as Go clients write JSON (compact): the apiserver compares opaque parameters
    # byte for byte on update, and the kubernetes client's spaced JSON would not survive
    # the round trip of a patch.
    light = load_light_client(release.kubeconfig)
    request.addfinalizer(light.close)
    claims = Resource(light, RESOURCE_CLAIMS)
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
    patched = claims.patch(name, add, namespace, patch_type=PatchType.JSON)
    assert patched["metadata"]["finalizers"] == ["example.com/keep"]
    remove = [{"op": "remove", "path": "/metadata/finalizers"}]
    claims.patch(name, remove, namespace, patch_type=PatchType.JSON)
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
    admission, core = (
        client.AdmissionregistrationV1Api(release.admin),
        client.CoreV1Api(release.admin),
    )

    def versions() -> tuple[str, str]:
        return (
            admission.read_validating_webhook_configuration(
                release.configuration
            ).metadata.resource_version,
            core.read_namespaced_secret(
                release.secret, release.namespace
            ).metadata.resource_version,
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
    core = client.CoreV1Api(release.admin)
    request = {"metadata": {"annotations": {"webhook.drakit.dev/rotate": "1"}}}
    core.patch_namespaced_secret(release.secret, release.namespace, request)
    seen: set[bytes] = set()

    def rotated() -> bool:
        (bundle,) = release.bundles()
        seen.add(bundle)
        # Every request in between is judged: no moment without a trusted certificate.
        wait_serving(release, webhook)
        return webhook.served_certificate() != served

    eventually(rotated, what="the served certificate rotated", timeout=60)
    assert any(first in b and b != first for b in seen), "the new CA published beside the old"
    annotations = core.read_namespaced_secret(
        release.secret, release.namespace
    ).metadata.annotations
    assert annotations["webhook.drakit.dev/rotated-for"] == "1"

    core.delete_namespaced_secret(release.secret, release.namespace)
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
def as_webhook(release: Release) -> client.AdmissionregistrationV1Api:
    return client.AdmissionregistrationV1Api(
        release.client_for(release.token(release.webhook_account))
    )


@pytest.mark.parametrize("field", sorted(MUTATIONS))
def test_the_webhook_may_not_change_its_configuration_beyond_the_ca_bundle(
    release: Release, as_webhook: client.AdmissionregistrationV1Api, field: str
) -> None:
    """RBAC gave it patch on the whole object: it could have asked to be sent every Secret."""
    message = refused(lambda: as_webhook.patch_validating_webhook_configuration(
        release.configuration, MUTATIONS[field], dry_run="All"), 403)  # fmt: skip
    assert "may change only webhooks[].clientConfig.caBundle" in message, message


def test_the_webhook_may_change_the_ca_bundle(
    release: Release, as_webhook: client.AdmissionregistrationV1Api
) -> None:
    bundle = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n")
    patch = [{"op": "add", "path": "/webhooks/0/clientConfig/caBundle", "value": bundle.decode()}]
    assert as_webhook.patch_validating_webhook_configuration(
        release.configuration, patch, dry_run="All"
    )


def test_the_webhook_may_not_replace_or_delete_its_configuration(
    release: Release, as_webhook: client.AdmissionregistrationV1Api
) -> None:
    current = client.AdmissionregistrationV1Api(
        release.admin
    ).read_validating_webhook_configuration(release.configuration)
    refused(lambda: as_webhook.replace_validating_webhook_configuration(
        release.configuration, current, dry_run="All"), 403)  # fmt: skip
    refused(lambda: as_webhook.delete_validating_webhook_configuration(
        release.configuration, dry_run="All"), 403)  # fmt: skip


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
    api = client.CoreV1Api(release.client_for(release.token(release.webhook_account)))
    annotations = {"kubernetes.io/service-account.name": release.webhook_account}
    body = {"metadata": {"name": name or release.secret, "annotations": annotations},
            "type": secret_type}  # fmt: skip
    message = refused(
        lambda: api.create_namespaced_secret(release.namespace, body, dry_run="All"), 403
    )
    assert expected in message, message


# -- the kubelet plugin's slices --------------------------------------------------------------


@pytest.fixture(scope="module")
def plugin_on_a(release: Release) -> Iterator[tuple[client.ApiClient, str, str]]:
    """The plugin's token bound to a pod on node A (nodes A and B exist)."""
    core = client.CoreV1Api(release.admin)
    suffix = uuid.uuid4().hex[:6]
    nodes = [f"node-a-{suffix}", f"node-b-{suffix}"]
    for node in nodes:
        core.create_node({"metadata": {"name": node}})
    pod = core.create_namespaced_pod(release.namespace, {
        "metadata": {"name": "plugin-a"},
        "spec": {"nodeName": nodes[0], "serviceAccountName": release.plugin_account,
                 "automountServiceAccountToken": False,
                 "containers": [{"name": "plugin", "image": "example:test"}]},
    })  # fmt: skip
    token = release.token(release.plugin_account, release.admin.sanitize_for_serialization(pod))
    try:
        yield release.client_for(token), nodes[0], nodes[1]
    finally:
        for node in nodes:
            core.delete_node(node)


def slice_of(name: str, driver: str, node: str) -> dict[str, Any]:
    return {"apiVersion": f"{RES}/v1", "kind": "ResourceSlice", "metadata": {"name": name},
            "spec": {"driver": driver, "nodeName": node, "devices": [{"name": "gpu-0"}],
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}}}  # fmt: skip


def test_the_kubelet_plugin_writes_only_its_own_nodes_slices_of_its_driver(
    release: Release, plugin_on_a: tuple[client.ApiClient, str, str]
) -> None:
    api, node_a, node_b = plugin_on_a
    slices = client.CustomObjectsApi(api)

    def write(body: dict[str, Any]) -> Any:
        return slices.create_cluster_custom_object(RES, "v1", "resourceslices", body, dry_run="All")

    def policy_refuses(body: dict[str, Any]) -> str:
        def attempt() -> str:
            try:
                write(body)
            except ApiException as exc:
                return str(exc.body) if exc.status == 403 else ""
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
    admin = client.CustomObjectsApi(release.admin)
    theirs = admin.create_cluster_custom_object(RES, "v1", "resourceslices",
                                                slice_of(name, release.driver, node_b))  # fmt: skip
    try:
        theirs["spec"]["devices"] = []
        plural = "resourceslices"
        refused(lambda: slices.replace_cluster_custom_object(RES, "v1", plural, name, theirs,
                                                             dry_run="All"), 403)  # fmt: skip
        refused(lambda: slices.delete_cluster_custom_object(RES, "v1", plural, name,
                                                            dry_run="All"), 403)  # fmt: skip
    finally:
        admin.delete_cluster_custom_object(RES, "v1", "resourceslices", name)
