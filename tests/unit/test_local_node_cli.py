"""``drakit local-node up`` tells the user what ``helm install`` needs: the
node's kubeletDir and cdiRoot (README: "prints the node's kubeletDir and
cdiRoot"), not only that the node is Ready."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from drakit.cli import local_node as cmd_local_node
from drakit.cli import main
from drakit.localcluster.nodeconfig import NodePaths


def test_ready_summary_names_the_folders_helm_install_needs() -> None:
    paths = NodePaths(Path("/tmp/n/node"))
    lines = cmd_local_node.ready_summary("drakit-node-1", paths).splitlines()
    assert lines[:4] == [
        "node drakit-node-1 is Ready",
        "  kubeletDir: /tmp/n/node/kubelet",
        "  cdiRoot:    /tmp/n/node/cdi",
        "  logs:       /tmp/n/node/logs",
    ]
    assert "--set kubeletDir=/tmp/n/node/kubelet --set cdiRoot=/tmp/n/node/cdi" in lines[4]


def test_up_prints_the_kubelet_dir_and_cdi_root_of_the_node_it_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def node_that_gets_ready(
        folder: Path, argv: list[str], what: str, on_ready: Callable[[], None]
    ) -> int:
        # Stands in for the detached `local-node run`, which writes the node's name to
        # DIR/ready once the node is Ready (background.run_until_signalled).
        assert argv[-4:-2] == ["run", str(folder)]
        (folder / "ready").write_text("n1")
        on_ready()
        return 0

    monkeypatch.setattr(cmd_local_node, "start_detached", node_that_gets_ready)
    code = main(["local-node", "up", str(tmp_path), "--cluster-dir", str(tmp_path / "c")])
    assert code == 0
    out = capsys.readouterr().out
    work = (tmp_path / "node").resolve()
    assert "node n1 is Ready" in out
    assert f"  kubeletDir: {work / 'kubelet'}" in out
    assert f"  cdiRoot:    {work / 'cdi'}" in out
