"""``drakit webhook`` against the real kube-apiserver.

A ValidatingWebhookConfiguration (url https://127.0.0.1:PORT/..., failurePolicy Fail,
claims and templates v1/v1beta2/v1beta1, scoped to the test's namespace) and the webhook
as its own process, running as a ServiceAccount that may only get and patch that one
configuration: the apiserver itself must refuse bad config with the model's message, admit
good config and other drivers' config, and keep admitting across certificate rotations;
with ``--ca-secret`` a restart keeps the CA, and replicas rotate together.
(The example driver's chart with these objects: examples/example-driver/tests.)
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import os
import socket
import ssl
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from drakit.kubeapi.errors import ApiError
from drakit.kubeapi.resources import PatchType, Resource, ResourceType
from drakit.webhook.cabundle import VALIDATING_WEBHOOK_CONFIGURATIONS
from drakit.webhook.castore import SECRETS

pytestmark = pytest.mark.integration

HERE = Path(__file__).resolve().parent
DRIVER = "gpu.webhook-test.example.com"


def kinds(version: str) -> tuple[ResourceType, ResourceType]:
    return (
        ResourceType("resource.k8s.io", version, "resourceclaims", "ResourceClaim", True),
        ResourceType(
            "resource.k8s.io", version, "resourceclaimtemplates", "ResourceClaimTemplate", True
        ),
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def restricted_kubeconfig(api: Any, cluster: Any, namespace: str, vwc: str, tmp: Path) -> str:
    """A kubeconfig of a new ServiceAccount allowed get and patch on ``vwc`` only (the
    RBAC a driver's chart grants the webhook)."""
    from kubernetes import client  # noqa: PLC0415

    core, rbac = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api)
    name = f"webhook-{uuid.uuid4().hex[:6]}"
    core.create_namespaced_service_account(namespace, {"metadata": {"name": name}})
    rbac.create_cluster_role({"metadata": {"name": name}, "rules": [{
        "apiGroups": ["admissionregistration.k8s.io"],
        "resources": ["validatingwebhookconfigurations"],
        "resourceNames": [vwc], "verbs": ["get", "patch"],
    }]})  # fmt: skip
    rbac.create_cluster_role_binding({
        "metadata": {"name": name},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
    })  # fmt: skip
    token = core.create_namespaced_service_account_token(
        name, namespace, {"spec": {"expirationSeconds": 3600}}
    ).status.token
    config = yaml.safe_load(Path(cluster.kubeconfig).read_text())
    config["users"] = [{"name": "admin", "user": {"token": token}}]
    path = tmp / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return str(path)


class Webhook:
    """The configuration and the ``drakit webhook`` process serving it."""

    def __init__(self, api: Any, namespace: str, tmp: Path) -> None:
        self.api = api
        self.namespace = namespace
        self.tmp = tmp
        self.port = free_port()
        self.name = f"drakit-test-{uuid.uuid4().hex[:8]}"
        self.configs = Resource(api, VALIDATING_WEBHOOK_CONFIGURATIONS)
        self.process: subprocess.Popen[bytes] | None = None
        #: Further replicas (on other ports) beside ``process``.
        self.others: list[subprocess.Popen[bytes]] = []

    def create_configuration(self) -> None:
        url = f"https://127.0.0.1:{self.port}/validate-resource-claim-parameters"
        hook = {
            "rules": [{
                "apiGroups": ["resource.k8s.io"], "apiVersions": ["v1", "v1beta2", "v1beta1"],
                "operations": ["CREATE", "UPDATE"],
                "resources": ["resourceclaims", "resourceclaimtemplates"], "scope": "Namespaced",
            }],
            "clientConfig": {"url": url},
            # Only this test's namespace: the control plane is shared by the whole session.
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": self.namespace}},
            "failurePolicy": "Fail", "sideEffects": "None", "admissionReviewVersions": ["v1"],
            "timeoutSeconds": 10,
        }  # fmt: skip
        self.configs.create({
            "metadata": {"name": self.name},
            "webhooks": [{**hook, "name": "claims.webhook-test.example.com"},
                         {**hook, "name": "second.webhook-test.example.com"}],
        })  # fmt: skip

    def start(self, kubeconfig: str, *extra: str, port: int | None = None) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), *sys.path])}
        log = (self.tmp / "webhook.log").open("ab")
        process = subprocess.Popen(
            [sys.executable, "-m", "drakit", "webhook", "--kubeconfig", kubeconfig,
             "--backend", "webhook_test_backend:SharingBackend", "--driver-name", DRIVER,
             "--port", str(port or self.port), "--webhook-configuration", self.name,
             "--dns-name", "webhook.drakit.svc", "--log-format", "text", *extra],
            env=env, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        log.close()
        if self.process is not None and self.process.poll() is None:
            self.others.append(process)
        else:
            self.process = process

    def restart(self, kubeconfig: str, *extra: str) -> None:
        self.terminate()
        self.process = None
        self.start(kubeconfig, *extra)

    def terminate(self) -> None:
        for process in [self.process, *self.others]:
            if process is not None and process.poll() is None:
                process.terminate()
                process.wait(timeout=15)

    def get(self, path: str, port: int | None = None) -> int:
        """The status of GET ``path``; 0 while nothing serves TLS there yet."""
        context = ssl.create_default_context(cadata=self.bundle().decode())
        conn = http.client.HTTPSConnection(
            "127.0.0.1", port or self.port, context=context, timeout=5
        )
        try:
            conn.request("GET", path)
            return conn.getresponse().status
        except (ConnectionError, ssl.SSLError):  # starting: not listening, no certificate
            return 0
        finally:
            conn.close()

    def bundles(self) -> set[bytes]:
        """The caBundle values of the configuration's webhooks (one, once published)."""
        hooks = self.configs.get(self.name)["webhooks"]
        return {base64.b64decode(h["clientConfig"].get("caBundle", "")) for h in hooks}

    def bundle(self) -> bytes:
        (bundle,) = self.bundles()  # every webhook of the configuration gets the same bundle
        return bundle

    def log(self) -> str:
        return (self.tmp / "webhook.log").read_text(errors="replace")

    def stop(self) -> None:
        self.terminate()
        with contextlib.suppress(ApiError):  # deleted already
            self.configs.delete(self.name)


@pytest.fixture
def webhook(api: Any, cluster: Any, namespace: str, tmp_path: Path) -> Iterator[Webhook]:
    hook = Webhook(api, namespace, tmp_path)
    hook.create_configuration()
    yield hook
    hook.stop()


def claim_v1(name: str, params: Any, driver: str = DRIVER) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"devices": {
        "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}],
        "config": [{"requests": ["gpu"], "opaque": {"driver": driver, "parameters": params}}],
    }}}  # fmt: skip


def claim_v1beta1(name: str, params: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"devices": {
        "requests": [{"name": "gpu", "deviceClassName": "gpu.example.com"}],
        "config": [{"requests": ["gpu"], "opaque": {"driver": DRIVER, "parameters": params}}],
    }}}  # fmt: skip


def wait_ready(hook: Webhook, eventually: Callable[..., Any], api: Any) -> None:
    """/readyz 200, then the apiserver admits through the webhook (it has seen the bundle)."""
    claims, _ = kinds("v1")
    eventually(lambda: hook.bundle() and hook.get("/readyz") == 200, what="readyz", timeout=60)

    def admitted() -> bool:
        try:
            Resource(api, claims).create(
                claim_v1("probe", {"interval": "Short"}), hook.namespace, dry_run=True
            )
        except ApiError:
            return False
        return True

    eventually(admitted, what="the apiserver admitting through the webhook", timeout=60)


def refusal(create: Callable[..., Any], *args: Any, **kwargs: Any) -> str:
    """The apiserver's message refusing ``create(*args, **kwargs)``."""
    with pytest.raises(ApiError) as caught:
        create(*args, **kwargs)
    return str(caught.value)


def test_apiserver_refuses_bad_opaque_config_with_the_models_message_and_admits_good(
    *, webhook: Webhook, api: Any, cluster: Any, namespace: str, tmp_path: Path, eventually: Any
) -> None:
    webhook.start(restricted_kubeconfig(api, cluster, namespace, webhook.name, tmp_path))
    wait_ready(webhook, eventually, api)
    claims, templates = (Resource(api, t) for t in kinds("v1"))
    bad = {"interval": "InvalidInterval"}

    text = refusal(claims.create, claim_v1("bad", bad), namespace, dry_run=True)
    assert "denied the request" in text
    assert f"ResourceClaim {namespace}/bad" in text
    assert "spec.devices.config[0].opaque.parameters: unknown time-slice interval: " \
        "InvalidInterval" in text  # fmt: skip
    text = refusal(claims.create, claim_v1("typed", {"replicas": "2"}), namespace)
    assert "replicas: Input should be a valid integer" in text

    assert claims.create(claim_v1("good", {"interval": "Long", "replicas": 2}), namespace)
    assert claims.create(claim_v1("other", {"anything": [1]}, driver="nic.example.com"), namespace)

    template = {"metadata": {"name": "tpl"}, "spec": {"spec": claim_v1("", bad)["spec"]}}
    text = refusal(templates.create, template, namespace, dry_run=True)
    assert f"ResourceClaimTemplate {namespace}/tpl" in text
    assert "spec.spec.devices.config[0].opaque.parameters: unknown time-slice interval" in text
    template["spec"]["spec"] = claim_v1("", {"interval": "Short"})["spec"]
    assert templates.create(template, namespace)

    for version in ("v1beta1", "v1beta2"):
        beta_claims, beta_templates = (Resource(api, t) for t in kinds(version))
        shape = claim_v1beta1 if version == "v1beta1" else claim_v1
        text = refusal(beta_claims.create, shape("beta", bad), namespace, dry_run=True)
        assert "unknown time-slice interval: InvalidInterval" in text, version
        assert beta_claims.create(shape(f"good-{version}", {"interval": "Medium"}), namespace)
        tpl = {"metadata": {"name": f"tpl-{version}"}, "spec": {"spec": shape("", bad)["spec"]}}
        assert "spec.spec.devices.config[0]" in refusal(
            beta_templates.create, tpl, namespace, dry_run=True
        )
    assert "Traceback" not in webhook.log()


def test_certificates_rotate_with_an_overlapping_bundle_and_no_refused_request(
    webhook: Webhook, api: Any, cluster: Any, eventually: Any
) -> None:
    # 9 s certificates: renewed every 6 s, each new CA published 0.9 s before it is served.
    webhook.start(cluster.kubeconfig, "--cert-lifetime", "9", "--resync", "1")
    wait_ready(webhook, eventually, api)
    claims, _ = (Resource(api, t) for t in kinds("v1"))
    first = webhook.bundle()
    seen = {first}
    deadline = time.monotonic() + 20
    refused = []
    # Not a poll: requests go on for a fixed window of several rotations, each must be admitted.
    while time.monotonic() < deadline:
        try:
            claims.create(claim_v1("during", {"interval": "Short"}), webhook.namespace,
                          dry_run=True)  # fmt: skip
        except ApiError as err:
            refused.append(str(err))
        seen.add(webhook.bundle())
        time.sleep(0.2)
    assert not refused, refused[:3]
    rotated = [b for b in seen if b.count(b"BEGIN CERTIFICATE") == 2]
    assert len(seen) >= 3 and rotated, "at least two rotations, each publishing old + new CA"
    assert "Rotated serving certificate" in webhook.log()


def test_a_bundle_overwritten_by_someone_else_is_restored(
    webhook: Webhook, api: Any, cluster: Any, eventually: Any
) -> None:
    webhook.start(cluster.kubeconfig, "--resync", "1")
    wait_ready(webhook, eventually, api)
    published = webhook.bundle()
    webhook.configs.patch(
        webhook.name,
        [{"op": "remove", "path": "/webhooks/0/clientConfig/caBundle"}],
        patch_type=PatchType.JSON,
    )
    assert webhook.bundles() == {b"", published}
    eventually(lambda: webhook.bundles() == {published}, what="the bundle restored", timeout=30)


def test_a_backend_without_a_config_model_is_refused_at_start(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "drakit", "webhook", "--backend", "json:JSONDecoder",
         "--driver-name", DRIVER, "--webhook-configuration", "x"],
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert "drakit webhook: --backend 'json:JSONDecoder'" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_restarted_webhook_keeps_the_ca_in_its_secret_and_serves_at_once(
    webhook: Webhook, api: Any, cluster: Any, namespace: str, eventually: Any
) -> None:
    """In memory, every restart made a new CA: reviews failed until the apiserver saw it."""
    secret = f"{namespace}/webhook-ca"
    webhook.start(cluster.kubeconfig, "--ca-secret", secret)
    wait_ready(webhook, eventually, api)
    first = webhook.bundle()
    webhook.restart(cluster.kubeconfig, "--ca-secret", secret)
    wait_ready(webhook, eventually, api)
    assert webhook.bundle() == first
    stored = Resource(api, SECRETS).get("webhook-ca", namespace)
    assert base64.b64decode(stored["data"]["ca.crt"]) in first
    assert stored["metadata"]["ownerReferences"][0]["name"] == webhook.name


def test_replicas_sharing_a_secret_rotate_together_with_no_refused_request(
    webhook: Webhook, api: Any, cluster: Any, namespace: str, eventually: Any
) -> None:
    # 9 s certificates: each replica may stage or promote; both must end on the same one.
    flags = ("--ca-secret", f"{namespace}/webhook-ca", "--cert-lifetime", "9", "--resync", "1")
    webhook.start(cluster.kubeconfig, *flags)
    wait_ready(webhook, eventually, api)
    second = free_port()
    webhook.start(cluster.kubeconfig, *flags, port=second)
    claims, _ = (Resource(api, t) for t in kinds("v1"))
    seen, refused = set(), []
    deadline = time.monotonic() + 20
    # Not a poll: requests go on for a fixed window of several rotations, each must be admitted.
    while time.monotonic() < deadline:
        try:
            claims.create(claim_v1("during", {"interval": "Short"}), namespace, dry_run=True)
        except ApiError as err:
            refused.append(str(err))
        seen.add(webhook.bundle())
        time.sleep(0.2)
    assert not refused, refused[:3]
    assert len(seen) >= 3, "at least two rotations"
    # The second replica serves what the first serves (its /readyz with the shared bundle).
    eventually(lambda: webhook.get("/readyz", second) == 200, what="second replica", timeout=30)
    assert webhook.log().count("Staged a new CA") >= 2
