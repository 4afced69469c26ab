"""The guide's webhook manifest (docs/examples/fpga-webhook.yaml, shown in
docs/writing-a-driver.md) is complete and coherent: its configuration is the one ``drakit
dev`` installs, its Deployment's arguments are valid ``drakit webhook`` flags naming the
objects the file creates, and its RBAC grants exactly what the webhook uses. (Against the
real apiserver: tests/integration/webhook/test_guide_webhook_manifest.py.)"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest
import yaml

from drakit.cli.webhook import add_parser, build_config
from drakit.localcluster.webhook import webhook_configuration

ROOT = Path(__file__).resolve().parents[3]
MANIFEST = ROOT / "docs" / "examples" / "fpga-webhook.yaml"
GUIDE = ROOT / "docs" / "writing-a-driver.md"
DRIVER = "fpga.example.com"


@pytest.fixture(scope="module")
def objects() -> dict[str, dict[str, Any]]:
    docs = [d for d in yaml.safe_load_all(MANIFEST.read_text()) if d]
    by_kind = {d["kind"]: d for d in docs}
    assert len(by_kind) == len(docs), "one object of each kind"
    return by_kind


def webhook_args(objects: dict[str, dict[str, Any]]) -> argparse.Namespace:
    (container,) = objects["Deployment"]["spec"]["template"]["spec"]["containers"]
    assert container["command"] == ["drakit", "webhook"]
    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers())  # type: ignore[arg-type]
    return parser.parse_args(["webhook", *container["args"]])


def test_the_guide_shows_the_manifest_file() -> None:
    assert '--8<-- "docs/examples/fpga-webhook.yaml"' in GUIDE.read_text()


def test_the_guides_configuration_is_the_one_drakit_dev_installs(
    objects: dict[str, dict[str, Any]],
) -> None:
    configuration = objects["ValidatingWebhookConfiguration"]
    (hook,) = configuration["webhooks"]
    expected = webhook_configuration("fpga-webhook", DRIVER, hook["clientConfig"])
    assert configuration == expected


def test_the_deployment_runs_drakit_webhook_for_the_objects_of_the_file(
    objects: dict[str, dict[str, Any]],
) -> None:
    config = build_config(webhook_args(objects))
    service = objects["Service"]["metadata"]
    assert config.driver_name == DRIVER
    assert config.backend == "fpga_driver:FpgaBackend"
    assert (
        config.webhook_configuration
        == objects["ValidatingWebhookConfiguration"]["metadata"]["name"]
    )
    assert config.dns_names == (f"{service['name']}.{service['namespace']}.svc",)
    assert config.ca_secret == ("fpga-system", "fpga-webhook-ca")
    (hook,) = objects["ValidatingWebhookConfiguration"]["webhooks"]
    assert hook["clientConfig"]["service"] == {
        "namespace": service["namespace"], "name": service["name"], "port": 443,
        "path": "/validate-resource-claim-parameters",
    }  # fmt: skip
    pod = objects["Deployment"]["spec"]["template"]
    assert pod["spec"]["serviceAccountName"] == objects["ServiceAccount"]["metadata"]["name"]
    assert objects["Service"]["spec"]["selector"] == pod["metadata"]["labels"]


def test_the_rbac_grants_the_configuration_and_the_ca_secret_by_name(
    objects: dict[str, dict[str, Any]],
) -> None:
    (configuration_rule,) = objects["ClusterRole"]["rules"]
    assert configuration_rule["resourceNames"] == ["fpga-webhook"]
    assert configuration_rule["verbs"] == ["get", "patch"]
    named, create = objects["Role"]["rules"]
    assert (named["resourceNames"], named["verbs"]) == (["fpga-webhook-ca"], ["get", "update"])
    assert create["verbs"] == ["create"]
    account = objects["ServiceAccount"]["metadata"]
    for binding in ("ClusterRoleBinding", "RoleBinding"):
        (subject,) = objects[binding]["subjects"]
        assert (subject["name"], subject["namespace"]) == (account["name"], account["namespace"])
