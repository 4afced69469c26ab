"""Leader election settings that could never work are refused up front."""

from __future__ import annotations

import pytest

from drakit.kubeapi.leaderelection import LeaderElectionConfig, default_identity


def test_the_defaults_are_the_client_go_timings() -> None:
    config = LeaderElectionConfig("drakit-controller", "kube-system", "me")
    assert (config.lease_duration, config.renew_deadline, config.retry_period) == (15.0, 10.0, 2.0)


def test_a_renew_deadline_not_below_the_lease_duration_is_refused() -> None:
    with pytest.raises(ValueError, match="renew deadline"):
        LeaderElectionConfig("l", "ns", "me", lease_duration=10, renew_deadline=10)


def test_a_retry_period_too_close_to_the_renew_deadline_is_refused() -> None:
    with pytest.raises(ValueError, match="retry period"):
        LeaderElectionConfig("l", "ns", "me", renew_deadline=2, retry_period=2)


def test_an_empty_identity_is_refused() -> None:
    with pytest.raises(ValueError, match="identity"):
        LeaderElectionConfig("l", "ns", "")


def test_default_identities_differ_between_processes_on_one_host() -> None:
    assert default_identity() != default_identity()
