"""The parts of ``drakit dev`` and ``drakit.testing`` that need no cluster: the example it
prints, the event lines, its flag checks, and where a backend class is imported from."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from drakit.cli import main
from drakit.cli.dev import describe_event, example_yaml
from drakit.localcluster.devstack import plugin_environment
from drakit.testing.node import backend_spec


def test_the_printed_example_is_a_template_and_a_pod_using_it_for_the_drivers_class() -> None:
    template, pod = yaml.safe_load_all(example_yaml("fpga.example.com", "fpga.example.com"))
    assert template["kind"] == "ResourceClaimTemplate"
    (request,) = template["spec"]["spec"]["devices"]["requests"]
    assert request["exactly"]["deviceClassName"] == "fpga.example.com"
    (claim,) = pod["spec"]["resourceClaims"]
    assert claim["resourceClaimTemplateName"] == template["metadata"]["name"]
    assert pod["spec"]["containers"][0]["resources"]["claims"] == [{"name": claim["name"]}]


def test_prepare_events_become_one_line_each_and_other_events_none() -> None:
    prepared = {"event": "prepared", "pod": "ns/p", "containers": {"main": ["a/b=c", "a/b=d"]}}
    assert describe_event(prepared) == "prepared: pod ns/p: main: a/b=c, a/b=d"
    failed = {"event": "prepare-failed", "pod": "ns/p", "error": "fpga-9: no such FPGA"}
    assert describe_event(failed) == "prepare failed: pod ns/p: fpga-9: no such FPGA"
    assert describe_event({"event": "registered", "driver": "d"}) == ""


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--driver-name", "Not_A_Name"], "drakit dev: --driver-name 'Not_A_Name': "),
        (["--driver-name", "d.example.com", "--backend-config", "/nonexistent.yaml"],
         "drakit dev: --backend-config '/nonexistent.yaml': no such file"),
    ],
)  # fmt: skip
def test_bad_flags_are_one_line_naming_the_flag_and_exit_2(
    flags: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["dev", "--backend", "example", *flags]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(message), err


def test_a_backend_class_from_a_file_is_imported_from_that_files_folder(tmp_path: Path) -> None:
    (tmp_path / "my_fpga.py").write_text("class Backend:\n    pass\n")
    sys.path.insert(0, str(tmp_path))
    try:
        import my_fpga  # noqa: PLC0415

        assert backend_spec(my_fpga.Backend) == ("my_fpga:Backend", (tmp_path,))
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("my_fpga", None)
    assert backend_spec("pkg.mod:Cls") == ("pkg.mod:Cls", ())


def test_the_plugins_python_path_comes_before_the_callers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PYTHONPATH", "/theirs")
    assert plugin_environment((Path("/mine"),))["PYTHONPATH"] == "/mine:/theirs"


def test_the_webhook_runs_for_a_backend_with_a_config_model_of_its_own() -> None:
    from drakit.cli.dev import has_config_model  # noqa: PLC0415
    from drakit.node_plugin.backend_loader import resolve_backend_class  # noqa: PLC0415
    from drakit.plugin import BackendBase  # noqa: PLC0415

    class Plain(BackendBase):  # type: ignore[type-arg]
        name = "plain"

    assert has_config_model(resolve_backend_class("example"))
    assert not has_config_model(Plain)  # EmptyConfig: nothing to admit
    assert not has_config_model(type("NoModel", (), {}))


def test_a_backend_class_whose_module_was_unloaded_is_still_found_in_its_file(
    tmp_path: Path,
) -> None:
    (tmp_path / "my_npu.py").write_text("class Backend:\n    def discover(self):\n        pass\n")
    sys.path.insert(0, str(tmp_path))
    try:
        import my_npu  # noqa: PLC0415
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("my_npu", None)
    assert backend_spec(my_npu.Backend) == ("my_npu:Backend", (tmp_path,))
