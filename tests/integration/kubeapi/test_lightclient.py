"""kubeapi's light client: which kubeconfigs it serves itself, and the fall-back for the rest."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers.rawclaims import raw_claim_text

from drakit.kubeapi.client import RateLimitedApiClient
from drakit.kubeapi.errors import ConfigError
from drakit.kubeapi.jsonpatch import guarded_patch
from drakit.kubeapi.lightclient import LightApiClient, TokenSource, load_light_client
from drakit.kubeapi.resources import NAMESPACES, RESOURCE_CLAIMS, Resource
from drakit.localcluster import LocalCluster

pytestmark = pytest.mark.integration


def kubeconfig_of(cluster: LocalCluster) -> dict[str, Any]:
    config: dict[str, Any] = yaml.safe_load(Path(cluster.kubeconfig).read_text())
    return config


def write(tmp_path: Path, config: dict[str, Any]) -> str:
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return str(path)


def test_tls_material_in_files_relative_to_the_kubeconfig_reaches_the_apiserver(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    config = kubeconfig_of(cluster)
    cluster_entry, user = config["clusters"][0]["cluster"], config["users"][0]["user"]
    for key, file_name in (
        ("certificate-authority", "ca.crt"),
        ("client-certificate", "admin.crt"),
        ("client-key", "admin.key"),
    ):
        holder = cluster_entry if key == "certificate-authority" else user
        (tmp_path / file_name).write_bytes(base64.b64decode(holder.pop(f"{key}-data")))
        holder[key] = file_name
    api = load_light_client(write(tmp_path, config))
    assert isinstance(api, LightApiClient)
    try:
        assert Resource(api, NAMESPACES).get("default")["metadata"]["name"] == "default"
    finally:
        api.close()


def test_kubeconfig_certificate_authority_is_the_only_authority_trusted(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    # As client-go: a cluster entry with a CA trusts that CA, not the system's trust store.
    api = load_light_client(cluster.kubeconfig)
    assert isinstance(api, LightApiClient)
    context = api.pool.ssl_context
    assert len(context.get_ca_certs()) == 1
    try:
        assert Resource(api, NAMESPACES).get("default")["metadata"]["name"] == "default"
    finally:
        api.close()


def test_kubeconfig_with_an_exec_plugin_falls_back_to_the_kubernetes_client(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    config = kubeconfig_of(cluster)
    config["users"][0]["user"]["exec"] = {"apiVersion": "client.authentication.k8s.io/v1",
                                          "command": "true"}  # fmt: skip
    api = load_light_client(write(tmp_path, config))
    assert isinstance(api, RateLimitedApiClient)


def test_kubeconfig_naming_a_missing_user_is_an_error_naming_it(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    config = kubeconfig_of(cluster)
    config["contexts"][0]["context"]["user"] = "nobody"
    with pytest.raises(ConfigError, match="no user named 'nobody'"):
        load_light_client(write(tmp_path, config))


def test_token_file_is_read_again_after_a_minute(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("first\n")
    now = [0.0]
    token = TokenSource(path=token_file, clock=lambda: now[0])
    assert token() == "first"
    token_file.write_text("second\n")
    now[0] = 30.0
    assert token() == "first"
    now[0] = 61.0
    assert token() == "second"
    token_file.unlink()
    now[0] = 200.0
    assert token() == "second"  # a vanished file keeps the last good token


def test_bearer_token_from_the_kubeconfig_is_sent(tmp_path: Path) -> None:
    config = {
        "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:1"}}],
        "users": [{"name": "u", "user": {"token": "s3cret"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    api = load_light_client(write(tmp_path, config), user_agent="probe")
    _, url, headers, body, _ = api.param_serialize(
        "GET", "/api/v1/nodes", query_params=[("limit", "5")], header_params={}
    )
    assert url == "http://127.0.0.1:1/api/v1/nodes?limit=5"
    assert headers["Authorization"] == "Bearer s3cret"
    assert headers["User-Agent"] == "probe"
    assert body is None


@pytest.mark.parametrize("fast_json", [False, True], ids=["json", "orjson"])
def test_opaque_parameters_written_by_the_light_client_survive_the_apiservers_patches(
    cluster: LocalCluster, namespace: str, fast_json: bool
) -> None:
    # The apiserver keeps RawExtension bytes as received and re-encodes the stored claim as Go
    # does (compact, < > & escaped) to apply a patch; bytes sent in another form (", "
    # separators, a raw "<") then differ from the patched ones and every later patch of the
    # claim is refused as a change of the immutable spec.
    api = load_light_client(cluster.kubeconfig, fast_json=fast_json)
    try:
        claims = Resource(api, RESOURCE_CLAIMS)
        parameters = {"z": "<b> & caf\u00e9 \u2028", "n": [1, 2.5, None], "a": {"b": True}}
        config = [{"opaque": {"driver": "gpu.example.com", "parameters": parameters}}]
        request = {"name": "r", "exactly": {"deviceClassName": "gpu.example.com"}}
        claim = claims.create({
            "metadata": {"name": "c", "namespace": namespace},
            "spec": {"devices": {"requests": [request], "config": config}},
        })  # fmt: skip
        ops = [{"op": "add", "path": "/metadata/finalizers", "value": ["example.com/x"]}]
        patched = guarded_patch(claims, claim, ops)
        assert patched["metadata"]["finalizers"] == ["example.com/x"]
        stored = raw_claim_text(api, namespace, "c")
        assert (
            '"parameters":{"z":"\\u003cb\\u003e \\u0026 caf\u00e9 \\u2028",'
            '"n":[1,2.5,null],"a":{"b":true}}' in stored
        )
    finally:
        api.close()
