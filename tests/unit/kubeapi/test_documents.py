"""JSON or YAML configuration files (kubeapi.documents): the same data either way, PyYAML only
for YAML, errors that name the file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.childpython import python_output

from drakit.kubeapi.documents import DocumentError, parse_document
from drakit.kubeapi.errors import ConfigError
from drakit.kubeapi.lightclient import from_kubeconfig

KUBECONFIG = {
    "apiVersion": "v1",
    "kind": "Config",
    "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:6443"}}],
    "users": [{"name": "u", "user": {"token": "secret"}}],
    "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
    "current-context": "ctx",
}

KUBECONFIG_YAML = """\
apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: http://127.0.0.1:6443
users:
- name: u
  user: {token: secret}
contexts:
- name: ctx
  context: {cluster: c, user: u}
current-context: ctx
"""


@pytest.mark.parametrize("text", [json.dumps(KUBECONFIG, indent=2), KUBECONFIG_YAML])
def test_json_and_yaml_kubeconfigs_load_the_same_client(tmp_path: Path, text: str) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(text)
    assert parse_document(text) == KUBECONFIG
    client = from_kubeconfig(path)
    assert client.host == "http://127.0.0.1:6443"


def test_a_broken_yaml_kubeconfig_is_refused_naming_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text("clusters:\n- name: c\n  cluster: [unclosed\n")
    with pytest.raises(ConfigError, match=rf"(?s)kubeconfig {path}: .*line 3, column 12"):
        from_kubeconfig(path)


def test_yaml_flow_style_and_yaml_only_values_still_go_to_the_yaml_reader() -> None:
    assert parse_document("{gpus: 8, model: A100}") == {"gpus": 8, "model": "A100"}
    assert parse_document('{"gpus": NaN}') == {"gpus": "NaN"}  # not JSON: YAML's meaning
    assert parse_document("") is None
    with pytest.raises(DocumentError, match="line 1"):
        parse_document("{gpus: [1, 2}")


def test_json_documents_are_read_without_importing_pyyaml(tmp_path: Path) -> None:
    (tmp_path / "kubeconfig").write_text(json.dumps(KUBECONFIG))
    probe = (
        "import sys\n"
        "from pathlib import Path\n"
        "from drakit.kubeapi.lightclient import from_kubeconfig\n"
        "from drakit.node_plugin.backend_loader import read_backend_config\n"
        f"folder = Path({str(tmp_path)!r})\n"
        "from_kubeconfig(folder / 'kubeconfig')\n"
        "(folder / 'example.yaml').write_text('{\"gpus\": 32}')\n"
        "print(read_backend_config(folder / 'example.yaml'), 'yaml' in sys.modules)\n"
        "(folder / 'example.yaml').write_text('gpus: 32')\n"
        "print(read_backend_config(folder / 'example.yaml'), 'yaml' in sys.modules)\n"
    )
    assert python_output(probe).splitlines() == ["{'gpus': 32} False", "{'gpus': 32} True"]
