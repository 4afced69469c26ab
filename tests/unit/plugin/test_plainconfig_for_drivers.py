"""drakit.plugin.plainconfig as a driver uses it: its own settings model, checked without
pydantic when the settings are plainly valid, by the model otherwise."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

MODELS = """
import pydantic

class NpuSettings(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid", populate_by_name=True)
    slots: int = pydantic.Field(8, ge=1, le=64)
    mode: str = "safe"
    pool_name: str | None = pydantic.Field(None, alias="poolName")
"""

DRIVER = """
import json, sys
from drakit.plugin import BackendConfigError, BackendContext, plainconfig as plain

SETTINGS = plain.obj(
    plain.Field("slots", plain.integer(1, 64), 8),
    plain.Field("mode", plain.one_of("fast", "safe"), "safe"),
    plain.Field("pool_name", plain.optional(plain.text), None, alias="poolName"),
)
config = json.loads(sys.argv[1])
context = BackendContext("npu.example.com", "node-a", config)
try:
    result = plain.settings(SETTINGS, "npu_models:NpuSettings", context, "npu")
except BackendConfigError as exc:
    result = {"error": str(exc)}
print(json.dumps({"result": result, "pydantic": "pydantic" in sys.modules}))
"""


@pytest.fixture
def run_driver(tmp_path: Path):  # type: ignore[no-untyped-def]
    (tmp_path / "npu_models.py").write_text(MODELS)
    (tmp_path / "npu_driver.py").write_text(DRIVER)

    def run(config: object) -> dict[str, object]:
        out = subprocess.run(
            [sys.executable, str(tmp_path / "npu_driver.py"), json.dumps(config)],
            capture_output=True,
            text=True,
            check=True,
            cwd=tmp_path,
            env={"PYTHONPATH": str(tmp_path)},
        ).stdout
        loaded: dict[str, object] = json.loads(out)
        return loaded

    return run


def test_plainly_valid_settings_come_back_in_the_models_shape_without_loading_pydantic(
    run_driver,  # type: ignore[no-untyped-def]
) -> None:
    got = run_driver({"slots": 4, "poolName": "p1"})
    assert got == {
        "result": {"slots": 4, "mode": "safe", "pool_name": "p1"},
        "pydantic": False,
    }


def test_settings_the_model_would_coerce_go_to_the_model(run_driver) -> None:  # type: ignore[no-untyped-def]
    got = run_driver({"slots": "4"})
    assert got == {"result": {"slots": 4, "mode": "safe", "pool_name": None}, "pydantic": True}


def test_bad_settings_are_the_models_error_naming_the_source_the_backend_and_the_field(
    run_driver,  # type: ignore[no-untyped-def]
) -> None:
    got = run_driver({"slots": 65})
    error = str(got["result"]["error"])  # type: ignore[index]
    assert error.startswith("--backend-config (not given) for backend 'npu': slots: ")
    assert "less than or equal to 64" in error
