"""The built-in backends' settings without pydantic: the plain checks accept only what
their pydantic models accept unchanged, produce exactly the models' result, and leave
everything else (coercion, every error) to the models."""

from __future__ import annotations

from typing import Any

import pytest

from drakit.backends import example, hostdev
from drakit.backends.example_models import ExampleSettings
from drakit.backends.hostdev_models import HostDevSettings
from drakit.node_plugin.backend_loader import load_backend
from drakit.plugin import BackendConfigError
from drakit.plugin.plainconfig import Check, NotPlainError

EXAMPLE_PLAIN = [
    {},
    {"gpus": 32},
    {"gpus": 0, "model": "H9000", "memory": "16Gi", "pool": "p1"},
    {"gpus": 128, "pool": None, "partitionable": None, "consumable": None},
    {"partitionable": {"gpus": 2, "memory": "80Gi", "partitions": 16}},
    {"partitionable": {}},
    {"consumable": {"devices": 3, "memory": "40Gi", "default": "1Gi", "step": "512Mi"}},
    {"consumable": {}},
    {"taints": [{"device": "gpu-1", "key": "k"}]},
    {"taints": [{"device": "gpu-1", "key": "k", "value": "v", "effect": "NoExecute"}]},
    {"bindingConditions": [{"device": "gpu-0", "conditions": ["A"], "failureConditions": ["F"]}]},
    {"binding_conditions": [{"device": "gpu-0", "conditions": ["A", "B"]}]},
    {"perDeviceNodeSelection": True, "unhealthy": ["gpu-3"]},
    {"per_device_node_selection": False, "unhealthy": []},
]

# What the model coerces (so the plain check must not decide) or refuses.
EXAMPLE_NOT_PLAIN = [
    {"gpus": "8"},
    {"gpus": 8.0},
    {"gpus": True},
    {"gpus": -1},
    {"gpus": 129},
    {"gpus": "many"},
    {"memory": 80},
    {"memory": "lots"},
    {"model": 5},
    {"pool": 7},
    {"gpu": 8},
    {"partitionable": {"partitions": 0}},
    {"partitionable": {"partitions": 17}},
    {"partitionable": []},
    {"consumable": {"devices": 33}},
    {"consumable": {"size": "1Gi"}},
    {"taints": [{"device": "gpu-1"}]},
    {"taints": [{"device": "gpu-1", "key": "k", "effect": "Sometimes"}]},
    {"taints": ({"device": "gpu-1", "key": "k"},)},
    {"taints": {"device": "gpu-1", "key": "k"}},
    {"bindingConditions": [{"device": "gpu-0", "conditions": []}]},
    {"bindingConditions": [{"device": "gpu-0"}]},
    {"bindingConditions": [], "binding_conditions": []},
    {"perDeviceNodeSelection": "yes"},
    {"perDeviceNodeSelection": 1},
    {"unhealthy": "gpu-3"},
    {"unhealthy": [3]},
]

HOSTDEV_PLAIN = [
    {"devices": [{"glob": "/dev/fuse"}]},
    {"devices": [{"glob": "/dev/fuse", "shareable": True}, {"glob": "/dev/kvm"}], "pool": "p"},
    {"devices": [{"glob": "/dev/null"}], "pollSeconds": 2, "hostRoot": "/host/"},
    {"devices": [{"glob": "/dev/null"}], "poll_seconds": 0.5, "host_root": "/"},
    {"devices": [{"glob": "/dev/null"}], "sysfsRoot": "/host/sys"},
]

HOSTDEV_NOT_PLAIN = [
    {},
    {"devices": [{"glob": "/dev/null"}], "sysfsRoot": "sys"},
    {"devices": []},
    {"devices": [{"glob": ""}]},
    {"devices": [{"glob": "dev/fuse"}]},
    {"devices": [{"glob": "/dev/fuse", "shareable": "true"}]},
    {"devices": [{"glob": "/dev/fuse", "mode": "rw"}]},
    {"devices": [{"glob": "/dev/null"}], "pollSeconds": 0},
    {"devices": [{"glob": "/dev/null"}], "pollSeconds": -1},
    {"devices": [{"glob": "/dev/null"}], "pollSeconds": "10"},
    {"devices": [{"glob": "/dev/null"}], "pollSeconds": float("nan")},
    {"devices": [{"glob": "/dev/null"}], "pollSeconds": float("inf")},
    {"devices": [{"glob": "/dev/null"}], "pollSeconds": True},
    {"devices": [{"glob": "/dev/null"}], "hostRoot": "host"},
    {"devices": [{"glob": "/dev/null"}], "hostRoot": "/a", "host_root": "/b"},
]


def plain_result(check: Check, doc: dict[str, Any]) -> dict[str, Any] | None:
    try:
        result: dict[str, Any] = check(doc)
    except NotPlainError:
        return None
    return result


@pytest.mark.parametrize("doc", EXAMPLE_PLAIN)
def test_plainly_valid_example_settings_are_exactly_what_the_model_makes_of_them(
    doc: dict[str, Any],
) -> None:
    assert plain_result(example.SETTINGS, doc) == ExampleSettings.model_validate(doc).model_dump()


@pytest.mark.parametrize("doc", HOSTDEV_PLAIN)
def test_plainly_valid_hostdev_settings_are_exactly_what_the_model_makes_of_them(
    doc: dict[str, Any],
) -> None:
    assert plain_result(hostdev.SETTINGS, doc) == HostDevSettings.model_validate(doc).model_dump()


@pytest.mark.parametrize("doc", EXAMPLE_NOT_PLAIN)
def test_example_settings_the_model_would_coerce_or_refuse_are_left_to_the_model(
    doc: dict[str, Any],
) -> None:
    assert plain_result(example.SETTINGS, doc) is None


@pytest.mark.parametrize("doc", HOSTDEV_NOT_PLAIN)
def test_hostdev_settings_the_model_would_coerce_or_refuse_are_left_to_the_model(
    doc: dict[str, Any],
) -> None:
    assert plain_result(hostdev.SETTINGS, doc) is None


def test_example_settings_the_model_coerces_still_work() -> None:
    backend = load_backend("example", driver_name="d", node_name="n", config={"gpus": "3"})
    assert [d.name for d in backend.discover()[0].devices] == ["gpu-0", "gpu-1", "gpu-2"]


def test_hostdev_poll_interval_given_as_an_integer_is_a_float_of_seconds() -> None:
    backend = load_backend(
        "hostdev",
        driver_name="d",
        node_name="n",
        config={"devices": [{"glob": "/dev/null"}], "pollSeconds": 3},
    )
    assert isinstance(backend, hostdev.HostDevBackend)
    assert backend.settings.poll_seconds == 3.0
    assert backend.settings.host_root == ""


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"gpus": 129}, "gpus: Input should be less than or equal to 128"),
        ({"gpus": True, "colour": "red"}, "colour: Extra inputs are not permitted"),
        (
            {"taints": [{"device": "gpu-1", "key": "k", "effect": "Sometimes"}]},
            "taints.0.effect: Input should be 'NoSchedule', 'NoExecute' or 'None'",
        ),
        (
            {"bindingConditions": [{"device": "gpu-0", "conditions": []}]},
            "bindingConditions.0.conditions: List should have at least 1 item",
        ),
    ],
)
def test_example_settings_errors_name_the_source_backend_and_field(
    config: dict[str, Any], message: str
) -> None:
    with pytest.raises(BackendConfigError) as caught:
        load_backend("example", driver_name="d", node_name="n", config=config)
    assert str(caught.value).startswith("--backend-config (not given) for backend 'example': ")
    assert message in str(caught.value)


def test_hostdev_settings_errors_name_each_bad_field() -> None:
    with pytest.raises(BackendConfigError) as caught:
        load_backend(
            "hostdev",
            driver_name="d",
            node_name="n",
            config={"devices": [{"glob": "/dev/null"}], "pollSeconds": 0, "hostRoot": "x"},
        )
    message = str(caught.value)
    assert "pollSeconds: Input should be greater than 0" in message
    assert "hostRoot: Value error, 'x' must be an absolute path" in message
