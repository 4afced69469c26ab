"""Fixtures for the controller's integration tests: a kubeapi client, builders for test
objects (fake Ready nodes with ResourceSlices, classes, templates, pods) and a controller
running in a background thread."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import pytest
from controller_harness import Objects, RunningController

from drakit.controller.app import Controller
from drakit.controller.config import ClaimGeneration, ControllerConfig

Wait = Callable[..., Any]


@pytest.fixture
def objects(api: Any) -> Iterator[Objects]:
    made = Objects(api)
    yield made
    made.cleanup()


StartController = Callable[..., RunningController]


@pytest.fixture
def start_controller(api: Any) -> Iterator[StartController]:
    """``start_controller(**config_fields)``: run a controller (scoped by default) for the
    test; it is stopped at the end. No kube-controller-manager runs here, so scoped mode
    generates at once (``scoped_generation_grace=0``) unless a test says otherwise."""
    running: list[RunningController] = []

    def start(
        api_client: Any = None, *, pods: Any = None, claims: Any = None, **fields: Any
    ) -> RunningController:
        config = replace(
            ControllerConfig(
                claim_generation=ClaimGeneration.SCOPED, workers=8, scoped_generation_grace=0.0
            ),
            **fields,
        )
        controller = Controller(api_client or api, config, pods=pods, claims=claims)
        instance = RunningController(controller).start()
        running.append(instance)
        return instance

    yield start
    for instance in running:
        with contextlib.suppress(Exception):
            instance.stop()
