"""A BindingCheck for the command test: every binding condition is met at once."""

from __future__ import annotations

from drakit.plugin import BindingClaim, BindingDevice, BindingVerdict


class AlwaysReady:
    def check(self, claim: BindingClaim, device: BindingDevice) -> BindingVerdict:
        return BindingVerdict.all_met(device, reason="Ready", message=f"{claim.name} is ready")


class NoCheckMethod:
    pass
