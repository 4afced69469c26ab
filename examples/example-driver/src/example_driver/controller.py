"""The controller plugin BindingConditions: ``drakit driver-controller --driver-name NAME
--binding-check example_driver.controller:BindingConditions``.

Like upstream's dra-example-controller, the simulated devices are ready as soon as they are
allocated: every binding condition of an allocated device is set True (reason Ready). A
real driver would check the device here and answer ``BindingVerdict.pending()`` until it is.
"""

from __future__ import annotations

from drakit.plugin import BindingClaim, BindingDevice, BindingVerdict


class BindingConditions:
    """Marks every binding condition of the driver's allocated devices as met."""

    def check(self, claim: BindingClaim, device: BindingDevice) -> BindingVerdict:
        return BindingVerdict.all_met(device, reason="Ready", message="Device is ready")
