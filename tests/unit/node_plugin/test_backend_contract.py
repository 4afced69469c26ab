"""What the plugin checks of a backend at start-up, and the per-call context it hands it."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from drakit.node_plugin.backend_loader import load_backend
from drakit.node_plugin.device_health import HealthMonitor
from drakit.plugin import (
    BackendBase,
    BackendConfigError,
    BackendContext,
    ClaimToPrepare,
    DeviceHealth,
    EmptyConfig,
    HealthReporter,
    HealthStatus,
    PoolDescription,
    RequestContext,
)
from drakit.plugin.health import health_report

OLD_STYLE = """
from drakit.plugin import BackendBase, BackendPrepared
class OldStyle(BackendBase):
    name = 'old'
    def discover(self):
        return ()
    def prepare(self, claim):
        return BackendPrepared(())
    def unprepare(self, claim, state, context):
        pass
"""

OLD_UNPREPARE = OLD_STYLE.replace("def prepare(self, claim)", "def prepare(self, claim, ctx)")
OLD_UNPREPARE = OLD_UNPREPARE.replace("unprepare(self, claim, state, context)",
                                      "unprepare(self, claim_uid, state)")  # fmt: skip


@pytest.fixture
def module_dir(tmp_path: Path) -> Iterator[Path]:
    sys.path.insert(0, str(tmp_path))
    yield tmp_path
    sys.path.remove(str(tmp_path))
    sys.modules.pop("old_driver", None)
    sys.modules.pop("lazy_driver", None)
    sys.modules.pop("lazy_driver_config", None)


LAZY_DRIVER = """
from drakit.plugin import BackendBase, BackendPrepared, LazyConfigModel
class Lazy(BackendBase):
    name = 'lazy'
    config_model = LazyConfigModel('lazy_driver_config:Settings')
    def discover(self):
        return ()
    def prepare(self, claim, context):
        return BackendPrepared(())
    def unprepare(self, claim, state, context):
        pass
"""

LAZY_DRIVER_CONFIG = """
import pydantic
class Settings(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")
    speed: int = 1
"""


def test_a_lazily_named_config_model_is_imported_when_first_read(module_dir: Path) -> None:
    (module_dir / "lazy_driver.py").write_text(LAZY_DRIVER)
    (module_dir / "lazy_driver_config.py").write_text(LAZY_DRIVER_CONFIG)
    backend = load_backend("lazy_driver:Lazy", driver_name="d.example.com", node_name="n1")
    assert "lazy_driver_config" not in sys.modules
    model = backend.config_model
    assert model is sys.modules["lazy_driver_config"].Settings
    assert model.model_validate({"speed": 3}).model_dump() == {"speed": 3}


def test_a_backend_whose_prepare_takes_no_context_is_refused_at_start(module_dir: Path) -> None:
    (module_dir / "old_driver.py").write_text(OLD_STYLE)
    with pytest.raises(BackendConfigError) as err:
        load_backend("old_driver:OldStyle", driver_name="d.example.com", node_name="n1")
    assert str(err.value) == (
        "--backend 'old_driver:OldStyle': OldStyle.prepare must accept (claim, context); "
        "see drakit.plugin.Backend"
    )


def test_a_backend_whose_unprepare_takes_a_bare_uid_is_refused_at_start(module_dir: Path) -> None:
    (module_dir / "old_driver.py").write_text(OLD_UNPREPARE)
    with pytest.raises(
        BackendConfigError, match=r"OldStyle.unprepare must accept \(claim, state, "
    ):
        load_backend("old_driver:OldStyle", driver_name="d.example.com", node_name="n1")


def test_a_context_without_a_deadline_never_expires() -> None:
    context = RequestContext("r1")
    assert (context.time_left(), context.expired()) == (None, False)


def test_a_context_past_its_deadline_has_no_time_left() -> None:
    context = RequestContext("r1", deadline=time.monotonic() - 1)
    assert (context.time_left(), context.expired()) == (0.0, True)


def test_a_claim_to_prepare_names_the_reference_unprepare_gets_later() -> None:
    claim = ClaimToPrepare("uid-1", "team-a", "claim-a", ())
    assert (claim.ref.namespace, claim.ref.name, claim.ref.uid) == ("team-a", "claim-a", "uid-1")


class Quiet(BackendBase[EmptyConfig]):
    """Implements no ``health``: no HealthReporter."""

    name = "quiet"

    def discover(self) -> tuple[PoolDescription, ...]:
        return ()


class Reporting(Quiet):
    def health(self) -> list[DeviceHealth]:
        return [DeviceHealth("p", "d", HealthStatus.HEALTHY, 0)]


def test_a_backend_without_health_reports_none_and_no_health_service_is_offered() -> None:
    backend = Quiet(BackendContext("d.example.com", "n1"))
    assert not isinstance(backend, HealthReporter)
    assert health_report(backend) is None
    assert not HealthMonitor(health_report(backend)).supported


def test_a_backend_with_health_is_a_health_reporter() -> None:
    backend = Reporting(BackendContext("d.example.com", "n1"))
    report = health_report(backend)
    assert report is not None and [h.device_name for h in report()] == ["d"]
    assert HealthMonitor(report).supported
