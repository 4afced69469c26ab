"""What a pod requests of a node: k8s.io/component-helpers ``resource.PodRequests``.

The pod's requests are, per resource, the larger of

* the sum over its regular containers and its restartable (sidecar) init containers, and
* for each ordinary init container, its own request plus the sidecars started before it;

then pod-level requests (``spec.resources.requests``; cpu, memory and hugepages-*) replace the
container sum for the resources they name, and ``spec.overhead`` is added. The result is
converted as kube-scheduler's ``framework.Resource`` does: cpu in millicores, everything else
in units, both rounded up; resources that are neither cpu, memory, ephemeral-storage nor
scalar (extended, ``*kubernetes.io/*``, hugepages-*, attachable-volumes-*) are ignored.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from drakit.allocator.quantity import QuantityError, parse_quantity

__all__ = ["CPU", "EPHEMERAL_STORAGE", "MEMORY", "RequestError", "Requests", "pod_requests"]

CPU = "cpu"
MEMORY = "memory"
EPHEMERAL_STORAGE = "ephemeral-storage"
_POD_LEVEL = (CPU, MEMORY)
_HUGEPAGES = "hugepages-"


class RequestError(ValueError):
    """A request quantity of the pod cannot be parsed (the apiserver validates them, so
    only a corrupt object gets here)."""


@dataclass(frozen=True)
class Requests:
    """A pod's requests in kube-scheduler's units. ``scalar`` maps each scalar resource
    (extended resources, hugepages-*, ...) to its request; zero entries are kept out."""

    milli_cpu: int = 0
    memory: int = 0
    ephemeral_storage: int = 0
    scalar: Mapping[str, int] = field(default_factory=dict)

    @property
    def is_zero(self) -> bool:
        return not (self.milli_cpu or self.memory or self.ephemeral_storage or self.scalar)


def is_scalar_resource(name: str) -> bool:
    """kube-scheduler's IsScalarResourceName: extended or prefixed-native names (with a
    slash), hugepages-* and attachable-volumes-*."""
    return "/" in name or name.startswith((_HUGEPAGES, "attachable-volumes-"))


def pod_requests(pod: Mapping[str, Any]) -> Requests:
    """The requests of ``pod`` (see the module docstring). Raises RequestError."""
    spec = pod.get("spec") or {}
    where = _pod_name(pod)
    total: dict[str, Fraction] = {}
    for container in spec.get("containers") or ():
        _add(total, _container_requests(container, where))
    sidecars: dict[str, Fraction] = {}
    init_peak: dict[str, Fraction] = {}
    for container in spec.get("initContainers") or ():
        own = _container_requests(container, where)
        if container.get("restartPolicy") == "Always":
            _add(total, own)
            _add(sidecars, own)
            _max(init_peak, sidecars)
        else:
            running = dict(own)
            _add(running, sidecars)
            _max(init_peak, running)
    _max(total, init_peak)
    pod_level = (spec.get("resources") or {}).get("requests") or {}
    for name, quantity in pod_level.items():
        if name in _POD_LEVEL or name.startswith(_HUGEPAGES):
            total[name] = _parse(quantity, f"{where} spec.resources.requests[{name}]")
    _add(total, _parsed(spec.get("overhead") or {}, f"{where} spec.overhead"))
    return _to_requests(total)


def _container_requests(container: Mapping[str, Any], where: str) -> dict[str, Fraction]:
    requests = (container.get("resources") or {}).get("requests") or {}
    return _parsed(requests, f"{where} container {container.get('name')!r} requests")


def _parsed(resources: Mapping[str, Any], where: str) -> dict[str, Fraction]:
    return {name: _parse(q, f"{where}[{name}]") for name, q in resources.items()}


def _parse(quantity: Any, where: str) -> Fraction:
    try:
        return parse_quantity(quantity).value
    except QuantityError as err:
        raise RequestError(f"{where}: {err}") from None


def _add(into: dict[str, Fraction], other: Mapping[str, Fraction]) -> None:
    for name, value in other.items():
        into[name] = into.get(name, Fraction(0)) + value


def _max(into: dict[str, Fraction], other: Mapping[str, Fraction]) -> None:
    for name, value in other.items():
        if name not in into or value > into[name]:
            into[name] = value


def _ceil(value: Fraction) -> int:
    return -(-value.numerator // value.denominator)


def _to_requests(total: Mapping[str, Fraction]) -> Requests:
    scalar = {
        name: amount
        for name, value in total.items()
        if is_scalar_resource(name) and (amount := _ceil(value))
    }
    return Requests(
        milli_cpu=_ceil(total.get(CPU, Fraction(0)) * 1000),
        memory=_ceil(total.get(MEMORY, Fraction(0))),
        ephemeral_storage=_ceil(total.get(EPHEMERAL_STORAGE, Fraction(0))),
        scalar=scalar,
    )


def _pod_name(pod: Mapping[str, Any]) -> str:
    metadata = pod.get("metadata") or {}
    return f"pod {metadata.get('namespace')}/{metadata.get('name')}"


def sum_requests(all_requests: Iterable[Requests]) -> Requests:
    """The element-wise sum (a node's requested total)."""
    milli_cpu = memory = ephemeral = 0
    scalar: dict[str, int] = {}
    for r in all_requests:
        milli_cpu += r.milli_cpu
        memory += r.memory
        ephemeral += r.ephemeral_storage
        for name, amount in r.scalar.items():
            scalar[name] = scalar.get(name, 0) + amount
    return Requests(milli_cpu, memory, ephemeral, scalar)
