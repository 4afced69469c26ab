"""The health policy: flag parsing (pure logic; the hysteresis is in
test_health_hysteresis_time.py, the NoExecute budget in tests/unit/controller)."""

from __future__ import annotations

import pytest

from drakit.node_plugin.health.policy import HealthPolicy, PolicyError, parse_effects

# -- flags ---------------------------------------------------------------------------------


def test_effects_parse_a_default_and_per_reason_effects() -> None:
    default, effects = parse_effects("NoSchedule,DeviceNodeMissing=NoExecute,Xid=None")
    policy = HealthPolicy(default_effect=default, effects=effects)
    assert policy.effect_for("DeviceNodeMissing") == "NoExecute"
    assert policy.effect_for("Xid") == "None"
    assert policy.effect_for("") == "NoSchedule"


def test_effects_without_a_bare_effect_default_to_noschedule() -> None:
    assert parse_effects("DeviceNodeMissing=NoExecute")[0] == "NoSchedule"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("Evict", r"'Evict' names no taint effect \(one of None, NoSchedule, NoExecute\)"),
        ("NoSchedule,NoExecute", "more than one default effect"),
        ("a=NoSchedule,a=None", "reason 'a' given twice"),
        ("bad reason=None", "'bad reason' is not a health reason"),
    ],
)
def test_bad_effects_name_the_flag_and_the_item(text: str, message: str) -> None:
    with pytest.raises(PolicyError, match=rf"--health-taint-effect '{text}': .*{message}"):
        parse_effects(text)


def test_a_policy_refuses_dwells_outside_a_day() -> None:
    with pytest.raises(PolicyError, match=r"healthy_for must be seconds in \[0, 86400\]"):
        HealthPolicy(healthy_for=-1)
    with pytest.raises(PolicyError, match=r"flap_window must be seconds"):
        HealthPolicy(flap_window=float("nan"))
