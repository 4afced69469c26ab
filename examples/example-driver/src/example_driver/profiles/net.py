"""The net profile: NICs with consumable ingress and egress bandwidth and one virtual
function per allocation, as upstream's internal/profiles/net; bursts come from NetConfig."""

from __future__ import annotations

import math
from typing import Any

from drakit.plugin import Device, DeviceStatus, DeviceToPrepare, PoolDescription
from example_driver.profiles import DRIVER_VERSION, stable_uuid

MODEL = "LATEST-NET-MODEL"
# 100G each way; a share takes 1G unless it asks, at least 100M, in 1M steps.
_BANDWIDTH = {
    "value": "100G",
    "requestPolicy": {
        "default": "1G",
        "validRange": {"min": "100M", "max": "100G", "step": "1M"},
    },
}
# Every allocation consumes exactly one of 100 virtual functions.
_VFS = {"value": "100", "requestPolicy": {"default": "1", "validValues": ["1"]}}


class NetProfile:
    """``num_nics`` shareable NICs named nic-<i>."""

    cdi_class = "net"
    config_kind: str | None = "NetConfig"

    def __init__(self, node_name: str, num_nics: int) -> None:
        self.node_name = node_name
        devices = [self._device(i, stable_uuid(node_name, "net", i)) for i in range(num_nics)]
        self._description = PoolDescription(
            name=node_name, devices=tuple(Device.from_dict(d) for d in devices)
        )

    @staticmethod
    def _device(index: int, nic_uuid: str) -> dict[str, Any]:
        return {
            "name": f"nic-{index}",
            "allowMultipleAllocations": True,
            "attributes": {
                "index": {"int": index},
                "uuid": {"string": nic_uuid},
                "model": {"string": MODEL},
                "driverVersion": {"version": DRIVER_VERSION},
            },
            "capacity": {
                "vfs": _VFS,
                "ingressBandwidth": _BANDWIDTH,
                "egressBandwidth": _BANDWIDTH,
            },
        }

    def describe(self) -> PoolDescription:
        return self._description

    def device_env(self, device: DeviceToPrepare, config: Any) -> list[str]:
        """NET_DEVICE_<i>_{INGRESS,EGRESS}_BURST (bits, when limited) and
        NET_DEVICE_<i>_{INGRESS,EGRESS}_RATE (the consumed bandwidth, bits per second)."""
        key = device.device.removeprefix("nic-")
        env: list[str] = []
        if config is not None:
            config.validate_config()
            burst = config.normalized()
            if burst.ingress_burst > 0:
                env.append(f"NET_DEVICE_{key}_INGRESS_BURST={burst.ingress_burst}")
            if burst.egress_burst > 0:
                env.append(f"NET_DEVICE_{key}_EGRESS_BURST={burst.egress_burst}")
        for capacity, direction in (("ingressBandwidth", "INGRESS"), ("egressBandwidth", "EGRESS")):
            rate = device.consumed_capacity.get(capacity)
            if rate is not None:
                env.append(f"NET_DEVICE_{key}_{direction}_RATE={math.ceil(rate.value)}")
        return env

    def device_status(self, device: DeviceToPrepare) -> DeviceStatus | None:
        return None
