"""The node plugin's liveness (and readiness) check: ``python -m drakit.node_plugin.probe``.

Run in the plugin container with the plugin's own environment (``DRIVER_NAME``,
``POD_UID``, ``KUBELET_REGISTRAR_DIRECTORY_PATH``,
``KUBELET_PLUGINS_DIRECTORY_PATH``); it finds this instance's sockets with the
plugin's own naming rule and passes only when, each within :data:`TIMEOUT_SECONDS`:

* ``grpc.health.v1.Health/Check`` on the DRA socket answers SERVING;
* ``NodePrepareResources`` with no claims on the DRA socket answers. This goes
  the way the kubelet's prepare calls go (the direct path, or grpcio's pool on
  the fallback), so a plugin whose prepare path hangs or stays saturated fails
  the probe, while gRPC health (served elsewhere) would still say SERVING. A
  call without claims touches no claim, writes nothing, logs and counts
  nothing; the kubelet itself never sends one;
* ``Registration/GetInfo`` on the registration socket names the driver.

Otherwise it exits 1 after printing one line, which shows up in the pod's
events (``drakit node plugin probe: UNAVAILABLE: ...``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from drakit.kubeletapi.gen.dra.v1 import api_pb2 as dra
from drakit.kubeletapi.gen.dra.v1 import api_pb2_grpc as dra_grpc
from drakit.kubeletapi.gen.pluginregistration.v1 import api_pb2 as registration
from drakit.kubeletapi.gen.pluginregistration.v1 import api_pb2_grpc as registration_grpc
from drakit.node_plugin.sockets import SocketPaths, socket_paths

# Per call; the chart gives the whole probe 5 s (timeoutSeconds).
TIMEOUT_SECONDS = 3.0

_PREFIX = "drakit node plugin probe"


def problem(paths: SocketPaths, driver: str, timeout: float = TIMEOUT_SECONDS) -> str | None:
    """What is wrong with the plugin instance serving ``paths``; None when it is healthy."""
    where = f"({paths.dra}, {paths.registration})"
    try:
        with grpc.insecure_channel(f"unix:{paths.dra}") as channel:
            health = health_pb2_grpc.HealthStub(channel)
            status = health.Check(health_pb2.HealthCheckRequest(), timeout=timeout).status
            if status != health_pb2.HealthCheckResponse.SERVING:
                name = health_pb2.HealthCheckResponse.ServingStatus.Name(status)
                return f"DRA socket health {name} {where}"
            prepare = dra_grpc.DRAPluginStub(channel).NodePrepareResources
            prepare(dra.NodePrepareResourcesRequest(), timeout=timeout)
        with grpc.insecure_channel(f"unix:{paths.registration}") as channel:
            info = registration_grpc.RegistrationStub(channel).GetInfo
            name = info(registration.InfoRequest(), timeout=timeout).name
    except grpc.RpcError as err:
        return f"{err.code().name}: {err.details()} {where}"
    if name != driver:
        return f"registration names {name!r}, want {driver!r} {where}"
    return None


def paths_from_environment(environ: Mapping[str, str]) -> tuple[SocketPaths, str]:
    """This instance's socket paths and driver name, from the container's environment."""
    driver = environ["DRIVER_NAME"]
    paths = socket_paths(
        Path(environ["KUBELET_REGISTRAR_DIRECTORY_PATH"]),
        Path(environ["KUBELET_PLUGINS_DIRECTORY_PATH"]) / driver,
        driver,
        environ.get("POD_UID") or None,
    )
    return paths, driver


def main() -> None:
    found = problem(*paths_from_environment(os.environ))
    if found is not None:
        sys.exit(f"{_PREFIX}: {found}")


if __name__ == "__main__":
    main()
