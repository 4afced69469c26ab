"""The health policy an operator configures: taint effect per health reason and hysteresis.

A backend reports each unhealthy device with a ``reason`` (hostdev: ``DeviceNodeMissing``; a
backend that gives none: the empty reason). The policy maps reasons to a taint effect:

* ``None``: report only (Event, metric, kubelet health), no taint;
* ``NoSchedule``: new claims avoid the device, running pods stay;
* ``NoExecute``: as NoSchedule, and the device requests NoExecute: drakit's controller grants
  the request within its eviction budget with a DeviceTaintRule, and kube-controller-manager's
  device-taint eviction controller evicts the pods using the device (unless their claim
  tolerates the taint). The budget's limits are the controller's flags (docs/health.md).

Flag syntax (``--health-taint-effect``): a comma-separated list of ``REASON=EFFECT`` items and at
most one bare ``EFFECT`` (the default for every other reason), e.g.
``NoSchedule,DeviceNodeMissing=NoExecute``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "EFFECTS",
    "MAX_DWELL_SECONDS",
    "HealthPolicy",
    "PolicyError",
    "parse_effects",
]

#: Taint effects a policy may choose, mildest first.
EFFECTS = ("None", "NoSchedule", "NoExecute")
#: Longest dwell time or flap window (a day): longer is a typo, not a policy.
MAX_DWELL_SECONDS = 86400
_REASON = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")


class PolicyError(ValueError):
    """A policy setting is invalid; the message names the flag, the value and the reason."""


@dataclass(frozen=True)
class HealthPolicy:
    """Validated health policy of one driver on one node.

    ``effects`` pairs a health reason with its taint effect (pairs, so that the policy is
    hashable like the plugin's other settings); ``default_effect`` covers every reason not
    listed. The dwell times are seconds (:mod:`.hysteresis` has the exact rules):
    ``unhealthy_for``: how long a device must be reported Unhealthy before it is tainted
    (0: at once); ``healthy_for``: how long it must be reported Healthy before the taint is
    lifted, doubled for every flap; ``flap_window``: a failure this soon after a recovery is a
    flap, the doubling stops at this many seconds, and a taint put back this soon keeps its
    ``timeAdded``.
    """

    default_effect: str = "NoSchedule"
    effects: tuple[tuple[str, str], ...] = ()
    unhealthy_for: float = 0.0
    healthy_for: float = 30.0
    flap_window: float = 600.0

    def __post_init__(self) -> None:
        for effect in (self.default_effect, *(e for _, e in self.effects)):
            if effect not in EFFECTS:
                raise PolicyError(f"taint effect {effect!r} is not one of {', '.join(EFFECTS)}")
        for name, seconds in (
            ("unhealthy_for", self.unhealthy_for),
            ("healthy_for", self.healthy_for),
            ("flap_window", self.flap_window),
        ):
            if not 0 <= seconds <= MAX_DWELL_SECONDS:
                raise PolicyError(f"{name} must be seconds in [0, {MAX_DWELL_SECONDS}]")

    def effect_for(self, reason: str) -> str:
        """The taint effect for an unhealthy device reported with ``reason``."""
        return dict(self.effects).get(reason, self.default_effect)

    def describe(self) -> str:
        """The effects in flag syntax, default first (for logs)."""
        items = [self.default_effect, *(f"{r}={e}" for r, e in sorted(self.effects))]
        return ",".join(items)


def parse_effects(
    text: str, flag: str = "--health-taint-effect"
) -> tuple[str, tuple[tuple[str, str], ...]]:
    """Parse ``[EFFECT,]REASON=EFFECT,...`` into (default effect, (reason, effect) pairs).

    The default is NoSchedule when no bare effect is given. Raises :class:`PolicyError`
    naming ``flag``, the item and the reason.
    """
    default: str | None = None
    effects: dict[str, str] = {}
    for raw in text.split(","):
        item = raw.strip()
        if not item:
            continue
        reason, sep, effect = item.rpartition("=")
        if effect not in EFFECTS:
            raise PolicyError(
                f"{flag} {text!r}: {item!r} names no taint effect (one of {', '.join(EFFECTS)})"
            )
        if not sep:
            if default is not None:
                raise PolicyError(f"{flag} {text!r}: more than one default effect")
            default = effect
            continue
        if not _REASON.match(reason):
            raise PolicyError(
                f"{flag} {text!r}: {reason!r} is not a health reason (letters, digits, "
                "'_', '.', '-'; at most 63)"
            )
        if reason in effects:
            raise PolicyError(f"{flag} {text!r}: reason {reason!r} given twice")
        effects[reason] = effect
    return (default or "NoSchedule"), tuple(sorted(effects.items()))
