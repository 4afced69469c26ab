"""The guide's webhook manifest (docs/examples/fpga-webhook.yaml) against the real
kube-apiserver: every object of it applied as written, except the configuration's
``clientConfig``, which points at this test's webhook on 127.0.0.1 instead of the Service (no
kubelet runs the Deployment's pods here). The webhook is the Deployment's command with its
arguments, run with a token of the manifest's ServiceAccount, so the manifest's RBAC is all
it has: good config is admitted, bad config refused with the model's reason, claims of other
drivers and writes that leave the config alone go through even while it is down."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from drakit.localcluster.process import free_port
from drakit.testing import APIError, KubeAPI, claim, eventually, opaque_config

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[3] / "docs" / "examples"
MANIFEST = EXAMPLES / "fpga-webhook.yaml"
DRIVER = "fpga.example.com"
GOOD = {"bitstream": "crypto"}
BAD = {"bitstream": 7}
REASON = "bitstream: Input should be a valid string"


@dataclass
class Applied:
    """The manifest's objects as stored, and the webhook run as its Deployment runs it."""

    api: KubeAPI
    namespace: str
    port: int
    folder: Path
    process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        (container,) = self.deployment["spec"]["template"]["spec"]["containers"]
        account = self.deployment["spec"]["template"]["spec"]["serviceAccountName"]
        token = self.api.token(account, self.namespace)
        kubeconfig = self.api.write_kubeconfig(self.folder / "kubeconfig", token=token)
        args = [a for a in container["args"] if not a.startswith("--port=")]
        env = {**os.environ, "BIND_ADDRESS": "127.0.0.1", "PYTHONPATH": str(EXAMPLES)}
        with (self.folder / "webhook.log").open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "drakit", "webhook", *args, f"--port={self.port}",
                 f"--kubeconfig={kubeconfig}", "--log-format=text"],
                env=env, stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=15)
        self.process = None

    def log(self) -> str:
        path = self.folder / "webhook.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""

    @property
    def deployment(self) -> dict[str, Any]:
        return next(d for d in objects() if d["kind"] == "Deployment")


def objects() -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(MANIFEST.read_text()) if d]


KINDS = {
    "ServiceAccount": ("v1", "serviceaccounts", True),
    "ClusterRole": ("rbac.authorization.k8s.io/v1", "clusterroles", False),
    "ClusterRoleBinding": ("rbac.authorization.k8s.io/v1", "clusterrolebindings", False),
    "Role": ("rbac.authorization.k8s.io/v1", "roles", True),
    "RoleBinding": ("rbac.authorization.k8s.io/v1", "rolebindings", True),
    "Service": ("v1", "services", True),
    "Deployment": ("apps/v1", "deployments", True),
    "ValidatingWebhookConfiguration": (
        "admissionregistration.k8s.io/v1", "validatingwebhookconfigurations", False
    ),
}  # fmt: skip


@pytest.fixture
def applied(drakit_api: KubeAPI, tmp_path: Path) -> Iterator[Applied]:
    namespaces = {d["metadata"]["namespace"] for d in objects() if "namespace" in d["metadata"]}
    (namespace,) = namespaces
    drakit_api.namespaces.create({"metadata": {"name": namespace}})
    port = free_port()
    stored: list[tuple[Any, dict[str, Any]]] = []
    run = Applied(drakit_api, namespace, port, tmp_path)
    try:
        for written in objects():
            api_version, plural, namespaced = KINDS[written["kind"]]
            kind = drakit_api.objects(api_version, plural, written["kind"], namespaced=namespaced)
            doc = copy.deepcopy(written)
            if doc["kind"] == "ValidatingWebhookConfiguration":
                url = f"https://127.0.0.1:{port}/validate-resource-claim-parameters"
                for hook in doc["webhooks"]:
                    hook["clientConfig"] = {"url": url}
            kind.create(doc)
            stored.append((kind, doc))
        yield run
    finally:
        run.stop()
        # The cluster's objects (the namespace takes the rest with it), the configuration
        # first: with failurePolicy Fail it would hold up every later claim of the driver.
        for kind, doc in reversed(stored):
            if "namespace" not in doc["metadata"]:
                kind.delete(doc["metadata"]["name"], missing_ok=True)
        drakit_api.namespaces.delete(namespace, missing_ok=True)


def create(api: KubeAPI, namespace: str, body: dict[str, Any], *, dry_run: bool = True) -> Any:
    version = body["apiVersion"]
    plural = {"ResourceClaim": "resourceclaims", "ResourceClaimTemplate": "resourceclaimtemplates"}
    kind = api.objects(version, plural[body["kind"]], body["kind"])
    return kind.create(body, namespace, dry_run=dry_run)


def refusal(api: KubeAPI, namespace: str, body: dict[str, Any]) -> str:
    with pytest.raises(APIError) as refused:
        create(api, namespace, body)
    return refused.value.message


def template(name: str, params: dict[str, Any], version: str) -> dict[str, Any]:
    spec = claim(name, DRIVER, config=[opaque_config(DRIVER, params)])["spec"]
    if version == "v1beta1":
        (request,) = spec["devices"]["requests"]
        request.update(request.pop("exactly"))
    return {"apiVersion": f"resource.k8s.io/{version}", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name}, "spec": {"spec": spec}}  # fmt: skip


def test_the_guides_manifest_admits_good_config_and_refuses_bad_config_with_the_reason(
    applied: Applied, drakit_api: KubeAPI, drakit_namespace: str
) -> None:
    applied.start()
    ns = drakit_namespace
    bad_claim = claim("bad", DRIVER, config=[opaque_config(DRIVER, BAD)])

    def judged() -> bool:
        try:
            create(drakit_api, ns, bad_claim)
        except APIError as err:
            return REASON in err.message
        return False

    eventually(judged, lambda: f"the webhook refusing bad config; its log:\n{applied.log()}", 90)
    message = refusal(drakit_api, ns, bad_claim)
    assert message == (
        f'admission webhook "opaque-config.{DRIVER}" denied the request: ResourceClaim '
        f"{ns}/bad: 1 opaque config(s) of driver {DRIVER} are invalid: "
        f"spec.devices.config[0].opaque.parameters: {REASON}"
    )
    for version in ("v1", "v1beta2", "v1beta1"):
        assert "spec.spec.devices.config[0].opaque.parameters" in refusal(
            drakit_api, ns, template(f"t-{version}", BAD, version)
        )
        assert create(drakit_api, ns, template(f"t-{version}", GOOD, version))
    good = create(drakit_api, ns, claim("good", DRIVER, config=[opaque_config(DRIVER, GOOD)]),
                  dry_run=False)  # fmt: skip
    assert good["spec"]["devices"]["config"][0]["opaque"]["parameters"] == GOOD
    # The CA the apiserver trusts is kept in the manifest's Secret, which its Role let it create.
    assert drakit_api.secrets.get("fpga-webhook-ca", applied.namespace)["data"]

    applied.stop()  # nothing answers from here on
    other = claim("other", "nic.example.com", config=[opaque_config("nic.example.com", BAD)])
    assert create(drakit_api, ns, other)
    assert create(drakit_api, ns, claim("plain", DRIVER))
    keep = [{"op": "add", "path": "/metadata/finalizers", "value": ["example.com/keep"]}]
    assert drakit_api.claims.patch("good", keep, ns, kind="json")["metadata"]["finalizers"]
    drakit_api.claims.patch("good", [{"op": "remove", "path": "/metadata/finalizers"}], ns,
                            kind="json")  # fmt: skip
    assert "failed calling webhook" in refusal(
        drakit_api, ns, claim("more", DRIVER, config=[opaque_config(DRIVER, GOOD)])
    )
