"""What ``prepare`` returns: container edits, state, device status and device metadata."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from drakit.allocator.model import DeviceAttribute
from drakit.plugin.edits import ContainerEdits


@dataclass(frozen=True)
class NetworkData:
    """A device's network identity: ``status.devices[].networkData`` of the claim.

    ``ips`` are CIDRs (``"10.9.8.0/24"``, ``"2001:db8::1/64"``); ``hardware_address`` is the
    MAC address. The apiserver limits ``interface_name`` to 256 and ``hardware_address`` to
    128 characters and ``ips`` to 16 entries.
    """

    interface_name: str = ""
    ips: tuple[str, ...] = ()
    hardware_address: str = ""


@dataclass(frozen=True)
class DeviceStatus:
    """What the driver reports about one prepared device in the claim's ``status.devices``.

    ``data`` is any JSON object (at most 10 KiB serialized, the apiserver's limit);
    ``conditions`` are ``metav1.Condition`` dicts (``type``, ``status``, ``reason``,
    ``message``; the kit fills ``lastTransitionTime`` and ``observedGeneration`` is left
    out unless given). The kit adds ``driver``, ``pool``, ``device`` and ``shareID``.
    """

    data: Mapping[str, Any] | None = None
    network_data: NetworkData | None = None
    conditions: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True)
class DeviceMetadata:
    """What a backend tells the containers about one prepared device (KEP-5304).

    The plugin writes it into the request's metadata file, which every container using
    the claim reads at
    ``/var/run/kubernetes.io/dra-device-attributes/resourceclaims/<claim>/<request>/<driver>-metadata.json``
    (``resourceclaimtemplates/<pod's claim name>/...`` for claims made from a template).
    ``attributes`` (at most 32; names and values as in a ResourceSlice, e.g.
    ``{"model": DeviceAttribute.of("a100")}``) and ``network_data`` are the device's entry.
    """

    attributes: Mapping[str, DeviceAttribute] = field(default_factory=dict)
    network_data: NetworkData | None = None


@dataclass(frozen=True)
class BackendPrepared:
    """What ``prepare`` returns.

    ``device_edits`` has one entry per ``ClaimToPrepare.devices`` entry, in
    the same order. ``state`` is JSON-serializable data the core keeps in its
    checkpoint and hands back to ``unprepare`` (also after a restart).
    ``device_status`` is empty (report nothing) or, like ``device_edits``, one entry per
    device (None: nothing for that device); the plugin writes the entries into the claim's
    ``status.devices`` after a successful prepare and removes them on unprepare.
    ``device_metadata`` is empty (no metadata files: the default) or one entry per device
    (None: the device is listed with driver, pool and name only); the plugin then mounts
    one metadata file per request into the claim's containers (:class:`DeviceMetadata`).
    ``claim_edits`` are edits of the claim as a whole (a variable listing all its devices,
    say): every container that uses the claim gets them once, however many of the claim's
    devices (or requests) it uses. The plugin writes them as the ``containerEdits`` of the
    claim's CDI spec, which the runtime's CDI library applies once per spec and container.
    Two claims in one container each bring theirs; for an ``env`` name both set, the
    runtime keeps the value of the claim it injects last, so name claim-wide variables
    after the claim when a container may use two (``ClaimToPrepare.name``).
    """

    device_edits: tuple[ContainerEdits, ...]
    state: Mapping[str, Any] = field(default_factory=dict)
    device_status: tuple[DeviceStatus | None, ...] = ()
    device_metadata: tuple[DeviceMetadata | None, ...] = ()
    claim_edits: ContainerEdits = field(default_factory=ContainerEdits)

    def __post_init__(self) -> None:
        # Checked here, inside the backend's prepare, so that the error names the backend.
        if not isinstance(self.claim_edits, ContainerEdits):
            raise TypeError(
                f"claim_edits must be ContainerEdits, not {type(self.claim_edits).__name__}"
            )
