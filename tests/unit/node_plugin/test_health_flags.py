"""``drakit node-plugin``'s health-policy flags: parsed into the policy, bad values named."""

from __future__ import annotations

import pytest

from drakit.cli import build_parser
from drakit.cli.flags import ConfigError
from drakit.cli.node_plugin import health_policy
from drakit.node_plugin.health.policy import HealthPolicy


def _policy(*flags: str) -> HealthPolicy:
    args = build_parser().parse_args(
        ["node-plugin", "--driver-name", "d.x", "--node-name", "n", *flags]
    )
    return health_policy(args)


def test_the_flags_build_the_policy() -> None:
    policy = _policy(
        "--health-taint-effect", "None,DeviceNodeMissing=NoExecute",
        "--health-unhealthy-for", "20", "--health-healthy-for", "45.5",
        "--health-flap-window", "900",
    )  # fmt: skip
    assert policy == HealthPolicy(
        default_effect="None",
        effects=(("DeviceNodeMissing", "NoExecute"),),
        unhealthy_for=20,
        healthy_for=45.5,
        flap_window=900,
    )


def test_without_flags_the_policy_is_the_earlier_behaviour() -> None:
    assert _policy() == HealthPolicy()


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (("--health-unhealthy-for", "-1"), "--health-unhealthy-for '-1' must be seconds in [0,"),
        (("--health-healthy-for", "x"), "--health-healthy-for 'x' must be seconds in [0, 86400]"),
        (("--health-flap-window", "nan"), "--health-flap-window 'nan' must be seconds in"),
        (("--health-flap-window", "1e9"), "--health-flap-window '1e9' must be seconds in"),
        (("--health-taint-effect", "Evict"), "--health-taint-effect 'Evict': 'Evict' names no"),
    ],
)
def test_bad_values_are_refused_naming_the_flag(flags: tuple[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        _policy(*flags)
    assert message in str(err.value)


def test_the_deprecated_report_counts_become_check_intervals_with_a_warning(
    capsys: pytest.CaptureFixture[str],
) -> None:
    policy = _policy(
        "--health-unhealthy-after", "3", "--health-healthy-after", "2",
        "--health-check-interval", "5",
    )  # fmt: skip
    assert (policy.unhealthy_for, policy.healthy_for) == (10, 5)
    err = capsys.readouterr().err
    assert "--health-unhealthy-after is deprecated" in err and "--health-unhealthy-for" in err
    assert "--health-healthy-after is deprecated" in err


def test_a_deprecated_count_and_its_replacement_together_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"--health-healthy-after .*--health-healthy-for"):
        _policy("--health-healthy-after", "2", "--health-healthy-for", "60")


def test_the_moved_budget_flags_of_0_1_still_start_the_plugin_with_one_warning(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """0.1's ``--health-noexecute-*`` flags are accepted and ignored (the controller holds the
    budget now), with one line naming the controller's flags and the chart value."""
    policy = _policy(
        "--health-noexecute-per-node", "2", "--health-noexecute-cluster-percent", "25",
    )  # fmt: skip
    assert policy == HealthPolicy()
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1
    both = "--health-noexecute-per-node and --health-noexecute-cluster-percent are deprecated"
    assert both in lines[0] and "no longer used by the node plugin" in lines[0]
    for replacement in (
        "--noexecute-per-node",
        "--noexecute-cluster-percent",
        "controller.noExecuteBudget",
    ):
        assert replacement in lines[0]


@pytest.mark.parametrize(
    ("variable", "flag"),
    [
        ("HEALTH_NOEXECUTE_PER_NODE", "--health-noexecute-per-node"),
        ("HEALTH_NOEXECUTE_CLUSTER_PERCENT", "--health-noexecute-cluster-percent"),
    ],
)
def test_the_moved_budget_flags_environment_twins_warn_too(
    variable: str, flag: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The 0.1 chart set the budget through these variables: an old DaemonSet still starts."""
    monkeypatch.setenv(variable, "3")
    assert _policy() == HealthPolicy()
    err = capsys.readouterr().err
    assert f"{flag} is deprecated" in err and "controller.noExecuteBudget" in err


def test_without_the_moved_budget_flags_nothing_is_said(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _policy()
    assert capsys.readouterr().err == ""
