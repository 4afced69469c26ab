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
        "--health-unhealthy-after", "3", "--health-healthy-after", "4",
        "--health-noexecute-per-node", "0", "--health-noexecute-cluster-percent", "2.5",
    )  # fmt: skip
    assert policy == HealthPolicy(
        default_effect="None",
        effects=(("DeviceNodeMissing", "NoExecute"),),
        unhealthy_after=3,
        healthy_after=4,
        noexecute_per_node=0,
        noexecute_cluster_percent=2.5,
    )


def test_without_flags_the_policy_is_the_earlier_behaviour() -> None:
    assert _policy() == HealthPolicy()


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (("--health-unhealthy-after", "0"), "--health-unhealthy-after '0' must be a whole number"),
        (("--health-healthy-after", "x"), "--health-healthy-after 'x' must be a whole number"),
        (("--health-noexecute-cluster-percent", "150"), "must be a percentage in"),
        (("--health-taint-effect", "Evict"), "--health-taint-effect 'Evict': 'Evict' names no"),
    ],
)
def test_bad_values_are_refused_naming_the_flag(flags: tuple[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        _policy(*flags)
    assert message in str(err.value)
