"""Pod spec features kube-scheduler's default filters check and drakit's scheduler does not.

Placing such a pod while ignoring the feature could bind it where kube-scheduler never would,
so the pod is refused instead, with the feature named in its ``PodScheduled=False`` message:

* ``spec.schedulingGates``: the pod must not be scheduled until its gates are removed;
* volumes other than emptyDir, configMap, secret, downwardAPI, projected, hostPath, image,
  nfs and gitRepo: persistentVolumeClaim, ephemeral, csi and the in-tree disk types are
  checked by VolumeBinding, VolumeZone, NodeVolumeLimits and VolumeRestrictions;
* pod (anti-)affinity terms with a non-empty ``namespaceSelector``: resolving it needs the
  Namespaces' labels, which drakit does not watch.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["unsupported_features"]

#: Volume sources no default filter plugin looks at.
_PLAIN_VOLUMES = frozenset(
    {"emptyDir", "configMap", "secret", "downwardAPI", "projected", "hostPath", "image",
     "nfs", "gitRepo"}
)  # fmt: skip


def unsupported_features(pod: Mapping[str, Any]) -> list[str]:
    """One phrase per unsupported feature ``pod`` uses (empty when it uses none)."""
    spec = pod.get("spec") or {}
    found: list[str] = []
    if spec.get("schedulingGates"):
        gates = ", ".join(str(g.get("name")) for g in spec["schedulingGates"])
        found.append(f"spec.schedulingGates ({gates}): the pod is gated")
    for volume in spec.get("volumes") or ():
        kinds = sorted(k for k in volume if k != "name" and k not in _PLAIN_VOLUMES)
        if kinds:
            found.append(
                f"volume {volume.get('name')!r} of type {kinds[0]} (volume binding, zones and "
                "limits are not implemented)"
            )
    affinity = spec.get("affinity") or {}
    for kind in ("podAffinity", "podAntiAffinity"):
        terms = (affinity.get(kind) or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
        for index, term in enumerate(terms or ()):
            selector = term.get("namespaceSelector") or {}
            if selector.get("matchLabels") or selector.get("matchExpressions"):
                found.append(
                    f"spec.affinity.{kind}.requiredDuringSchedulingIgnoredDuringExecution"
                    f"[{index}].namespaceSelector (namespace labels are not watched)"
                )
    return found
