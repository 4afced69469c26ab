"""The Kubernetes versions the local cluster can run, and each one's feature gates.

Every supported version (``SUPPORTED_KUBERNETES_VERSIONS``, the same list as
``hack/versions.env``) has its own binaries in the cache folder
``bin/<version>/``. A component refuses to start when given a gate its minor
does not know, so the gates are chosen per minor: the alpha DRA gates drakit
exercises where that minor has them, nothing else (an older minor is tested
with its own defaults, the way production clusters run it).
"""

from __future__ import annotations

import re

from drakit.kubeapi.clusterversion import facts_for
from drakit.version import KUBERNETES_VERSION, SUPPORTED_KUBERNETES_VERSIONS

__all__ = [
    "check_feature_gates",
    "default_feature_gates",
    "minor_of",
    "resolve_version",
]

#: Alpha gates turned on where the minor knows them (beta and GA ones are on by default).
_EXERCISED_ALPHA_GATES = ("DRAListTypeAttributes",)

_VERSION = re.compile(r"^v1\.(\d{1,3})\.(\d{1,3})$")


def resolve_version(version: str | None) -> str:
    """A supported full version from ``v1.36.3``, ``v1.36``, ``1.36`` or None (the default).

    Raises ValueError naming the supported versions otherwise.
    """
    if version is None or version == "":
        return KUBERNETES_VERSION
    wanted = version if version.startswith("v") else f"v{version}"
    for supported in SUPPORTED_KUBERNETES_VERSIONS:
        if wanted in (supported, supported.rsplit(".", 1)[0]):
            return supported
    raise ValueError(
        f"Kubernetes version {version!r} is not supported "
        f"(supported: {', '.join(SUPPORTED_KUBERNETES_VERSIONS)})"
    )


def minor_of(version: str) -> int:
    """The minor of a full version such as ``v1.36.3``."""
    match = _VERSION.match(version)
    if match is None:
        raise ValueError(f"not a Kubernetes release version: {version!r}")
    return int(match.group(1))


def default_feature_gates(version: str) -> str:
    """The --feature-gates value every component of ``version`` gets by default."""
    known = facts_for(minor_of(version)).known_gates
    return ",".join(f"{gate}=true" for gate in _EXERCISED_ALPHA_GATES if gate in known)


def check_feature_gates(gates: str, version: str) -> None:
    """Refuse DRA gates that ``version`` does not know (its components would not start)."""
    facts = facts_for(minor_of(version))
    for item in filter(None, (part.strip() for part in gates.split(","))):
        name = item.split("=", 1)[0].strip()
        dra_like = name.startswith("DRA") or name in ("ResourceHealthStatus",)
        if dra_like and name not in facts.known_gates:
            raise ValueError(
                f"feature gate {name!r} does not exist in Kubernetes {version}; "
                f"remove it from --feature-gates / DRAKIT_FEATURE_GATES"
            )
