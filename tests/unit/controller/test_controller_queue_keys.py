"""The controller's queues take turns by the namespace of the object a key names."""

from __future__ import annotations

from drakit.controller.app import key_namespace


def test_controller_keys_belong_to_the_namespace_of_the_object_they_name() -> None:
    assert key_namespace("schedule:team-a/pod-1") == "team-a"
    assert key_namespace("claim:team-b/gpu") == "team-b"
    assert key_namespace("pod:team-c/web-0") == "team-c"
