"""Whether this process may serve unary methods straight from grpcio's core layer.

The direct path (:mod:`drakit.node_plugin.service.direct`) is built on grpcio's
private ``cygrpc`` layer, whose behaviour grpcio does not promise to keep. It
is used only on the grpcio versions in :data:`TESTED_GRPCIO`, the range the
project's tests run on; on any other version, or when ``cygrpc`` cannot be
imported, the plugin serves every method with grpcio's public server and logs
one warning (see :func:`direct_refusal`). ``DRAKIT_GRPC_DIRECT=0`` forces that
fallback, which is how CI keeps the fallback tested.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

import grpc

cygrpc: Any
try:
    from grpc._cython import cygrpc  # type: ignore[attr-defined,no-redef]  # grpcio internals
except ImportError:  # a grpcio laid out differently: direct_refusal() says so, grpcio serves
    cygrpc = None

# grpcio versions the direct path is tested on: from the first (inclusive) to the second
# (exclusive). Widen only together with the version CI installs (pyproject pins grpcio).
TESTED_GRPCIO: tuple[tuple[int, ...], tuple[int, ...]] = ((1, 85, 1), (1, 86))

# "0" (or "false", "no", "off") turns the direct path off; anything else leaves it on.
DIRECT_ENV = "DRAKIT_GRPC_DIRECT"
_OFF = frozenset({"0", "false", "no", "off"})

# The numeric release of a version string: "1.85.1" -> 1.85.1, "1.86.0rc1" -> 1.86.0.
_RELEASE = re.compile(r"\d+(?:\.\d+)*")


def release_of(version: str) -> tuple[int, ...]:
    """The numeric release at the start of ``version``; () when it has none."""
    match = _RELEASE.match(version)
    return tuple(int(part) for part in match.group().split(".")) if match else ()


def direct_disabled(environ: Mapping[str, str] | None = None) -> bool:
    """True when ``DRAKIT_GRPC_DIRECT`` asks for grpcio's server instead of the direct path."""
    value = (os.environ if environ is None else environ).get(DIRECT_ENV, "")
    return value.strip().lower() in _OFF


def untested_reason(version: str | None = None) -> str | None:
    """Why the direct path must not run on this grpcio (a version outside
    :data:`TESTED_GRPCIO`, or no ``cygrpc``); None when it may."""
    version = grpc.__version__ if version is None else version
    low, high = TESTED_GRPCIO
    if not low <= release_of(version) < high:
        tested = f">={'.'.join(map(str, low))},<{'.'.join(map(str, high))}"
        return f"grpcio {version} is outside the range the direct path is tested on ({tested})"
    if cygrpc is None:
        return f"grpcio {version} has no grpc._cython.cygrpc"
    return None
