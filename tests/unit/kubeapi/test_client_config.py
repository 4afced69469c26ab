"""Client construction: clear errors when there is no way to reach an API server."""

from __future__ import annotations

from pathlib import Path

import pytest

from drakit.kubeapi.client import load_client
from drakit.kubeapi.errors import ConfigError, Invalid, error_from_status


def test_a_missing_kubeconfig_file_is_named_in_the_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    with pytest.raises(ConfigError, match=f"kubeconfig {missing}: no such file"):
        load_client(str(missing))


def test_a_broken_kubeconfig_is_reported_as_config_error(tmp_path: Path) -> None:
    broken = tmp_path / "kubeconfig"
    broken.write_text("this is not a kubeconfig\n")
    with pytest.raises(ConfigError, match=str(broken)):
        load_client(str(broken))


def test_without_kubeconfig_or_cluster_the_error_lists_what_was_tried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    with pytest.raises(ConfigError) as info:
        load_client(None)
    assert "KUBERNETES_SERVICE_HOST" in str(info.value)
    assert str(tmp_path / "absent") in str(info.value)


def test_kubeconfig_from_the_environment_is_used_when_no_path_is_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: k, cluster: {server: 'https://10.0.0.1:6443'}}]\n"
        "users: [{name: u, user: {token: secret}}]\n"
        "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
    )
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    api = load_client(None)
    assert api.configuration.host == "https://10.0.0.1:6443"


def test_status_bodies_become_typed_errors_with_causes() -> None:
    body = (
        b'{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Invalid","code":422,'
        b'"message":"ResourceClaim \\"x\\" is invalid",'
        b'"details":{"causes":[{"reason":"FieldValueInvalid","message":"bad name",'
        b'"field":"spec.devices.requests[0].name"}]}}'
    )
    err = error_from_status(422, body)
    assert isinstance(err, Invalid)
    assert err.causes[0].field == "spec.devices.requests[0].name"
    assert str(err) == 'ResourceClaim "x" is invalid (spec.devices.requests[0].name: bad name)'


def test_a_non_json_error_body_still_gives_a_message() -> None:
    err = error_from_status(503, b"upstream connect error")
    assert err.code == 503
    assert "upstream connect error" in str(err)
