"""Which pods each --claim-generation mode covers."""

from __future__ import annotations

import pytest

from drakit.controller.config import ClaimGeneration, ControllerConfig


@pytest.mark.parametrize(
    ("mode", "mine", "theirs"),
    [(ClaimGeneration.ALL, True, True), (ClaimGeneration.SCOPED, True, False),
     (ClaimGeneration.OFF, False, False)],
)  # fmt: skip
def test_claim_generation_scope(mode, mine, theirs):
    config = ControllerConfig(claim_generation=mode)
    assert config.generates_for("drakit") is mine
    assert config.generates_for("default-scheduler") is theirs


def test_lifecycle_covers_own_pods_in_every_mode_and_all_pods_only_with_all():
    for mode in ClaimGeneration:
        config = ControllerConfig(claim_generation=mode)
        assert config.manages_claims_of("drakit")
        assert config.manages_claims_of("default-scheduler") is (mode is ClaimGeneration.ALL)


def test_invalid_settings_are_refused():
    with pytest.raises(ValueError, match="workers"):
        ControllerConfig(workers=0)
    with pytest.raises(ValueError, match="scheduler name"):
        ControllerConfig(scheduler_name="")
