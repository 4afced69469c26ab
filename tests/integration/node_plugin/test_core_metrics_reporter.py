"""A backend that keeps metrics of its own (drakit.plugin.MetricsReporter) hears of every
claim's outcome, whether it failed before the backend ran (a bad config), was prepared by
it, or was answered from the checkpoint; a backend whose hook raises changes nothing."""

from __future__ import annotations

from typing import Any

import pytest
from claims import DRIVER, call, create_claim, opaque, result
from conftest import EXAMPLE_CONFIG, CoreFactory

from drakit.kubeapi.resources import Resource
from drakit.node_plugin.backends.base import BackendContext
from drakit.node_plugin.backends.example import ExampleBackend
from drakit.telemetry.metrics import Registry

pytestmark = pytest.mark.integration


class Reporting(ExampleBackend):
    """The example backend, recording what the plugin tells it."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.metrics = Registry()
        self.outcomes: list[tuple[str, str, float]] = []

    def claim_finished(self, operation: str, error: str, seconds: float) -> None:
        self.outcomes.append((operation, error, seconds))


class Raising(Reporting):
    def claim_finished(self, operation: str, error: str, seconds: float) -> None:
        raise RuntimeError("a bug in the driver's metrics")


def test_every_claim_outcome_reaches_the_backend_once(
    make_core: CoreFactory, claims: Resource, namespace: str
) -> None:
    backend = Reporting(BackendContext(DRIVER, "node-a", EXAMPLE_CONFIG))
    core = make_core(backend=backend)
    good = create_claim(claims, namespace, [result("gpu", "gpu-0")], name="good")
    bad_config = opaque(
        {"sharing": {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Eon"}}}
    )
    bad = create_claim(claims, namespace, [result("gpu", "gpu-1")], config=[bad_config], name="bad")
    answers = core.prepare([good, bad], call(core.config))
    assert sorted((o, e) for o, e, _ in backend.outcomes) == [
        ("prepare", ""),
        ("prepare", answers[bad.uid].error),
    ]
    assert answers[bad.uid].error
    assert all(seconds > 0 for _, _, seconds in backend.outcomes)

    core.prepare([good], call(core.config))  # answered from the checkpoint: a success
    core.unprepare([good], call(core.config))
    assert [(o, e) for o, e, _ in backend.outcomes[2:]] == [("prepare", ""), ("unprepare", "")]


def test_a_hook_that_raises_does_not_change_the_answer(
    make_core: CoreFactory, claims: Resource, namespace: str
) -> None:
    core = make_core(backend=Raising(BackendContext(DRIVER, "node-a", EXAMPLE_CONFIG)))
    ref = create_claim(claims, namespace, [result("gpu", "gpu-0")])
    assert core.prepare([ref], call(core.config))[ref.uid].error == ""
    assert core.unprepare([ref], call(core.config)) == {ref.uid: ""}
