"""Small builders for allocation scenarios (plain dicts in the oracle's input shape)."""

from __future__ import annotations

from typing import Any

DRIVER = "gpu.example.com"
NODE = "node-1"


def attrs(**values: Any) -> dict[str, Any]:
    """Attribute map from Python values: int/bool/str, lists, or ("version", "1.2.3")."""
    out: dict[str, Any] = {}
    for key, v in values.items():
        name = key.replace("__", "/").replace("_dot_", ".")
        if isinstance(v, tuple) and v and v[0] in ("version", "versions"):
            out[name] = {v[0]: v[1]}
        elif isinstance(v, bool):
            out[name] = {"bool": v}
        elif isinstance(v, int):
            out[name] = {"int": v}
        elif isinstance(v, str):
            out[name] = {"string": v}
        elif isinstance(v, list):
            kind = (
                "bools"
                if isinstance(v[0], bool)
                else "ints"
                if isinstance(v[0], int)
                else "strings"
            )
            out[name] = {kind: v}
        else:
            raise TypeError(v)
    return out


def device(name: str, attributes: dict[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
    d: dict[str, Any] = {"name": name}
    if attributes:
        d["attributes"] = attributes
    d.update(fields)
    return d


def gpus(n: int, prefix: str = "gpu", **fields: Any) -> list[dict[str, Any]]:
    return [device(f"{prefix}-{i}", attrs(index=i), **fields) for i in range(n)]


def rslice(
    name: str,
    devices: list[dict[str, Any]] | None = None,
    *,
    node: str | None = NODE,
    pool: str | None = None,
    driver: str = DRIVER,
    generation: int = 1,
    count: int = 1,
    **spec: Any,
) -> dict[str, Any]:
    s: dict[str, Any] = {
        "driver": driver,
        "pool": {
            "name": pool or node or "pool",
            "generation": generation,
            "resourceSliceCount": count,
        },
    }
    if node is not None and not any(
        k in spec for k in ("nodeSelector", "allNodes", "perDeviceNodeSelection")
    ):
        s["nodeName"] = node
    if devices is not None:
        s["devices"] = devices
    s.update(spec)
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": s,
    }


def dclass(
    name: str = "gpu",
    *exprs: str,
    config: list[dict[str, Any]] | None = None,
    driver_selector: bool = True,
) -> dict[str, Any]:
    selectors = []
    if driver_selector:
        selectors.append({"cel": {"expression": f'device.driver == "{DRIVER}"'}})
    selectors += [{"cel": {"expression": e}} for e in exprs]
    spec: dict[str, Any] = {"selectors": selectors} if selectors else {}
    if config:
        spec["config"] = [{"opaque": c} for c in config]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": spec,
    }


def opaque(value: str, driver: str = DRIVER) -> dict[str, Any]:
    return {"driver": driver, "parameters": {"value": value}}


def exact(
    cls: str = "gpu",
    *selectors: str,
    count: int | None = None,
    mode: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    e: dict[str, Any] = {"deviceClassName": cls}
    if selectors:
        e["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    if mode is not None:
        e["allocationMode"] = mode
    if count is not None:
        e["count"] = count
    e.update(extra)
    return e


def req(name: str = "r", cls: str = "gpu", *selectors: str, **kw: Any) -> dict[str, Any]:
    return {"name": name, "exactly": exact(cls, *selectors, **kw)}


def sub(name: str, cls: str = "gpu", *selectors: str, **kw: Any) -> dict[str, Any]:
    return {"name": name, **exact(cls, *selectors, **kw)}


def first(name: str, *subs: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "firstAvailable": list(subs)}


def claim(
    name: str,
    *requests: dict[str, Any],
    constraints: list[dict[str, Any]] | None = None,
    config: list[dict[str, Any]] | None = None,
    ns: str = "default",
    allocation: dict[str, Any] | None = None,
    uid: str | None = None,
) -> dict[str, Any]:
    devices: dict[str, Any] = {"requests": list(requests)}
    if constraints:
        devices["constraints"] = constraints
    if config:
        devices["config"] = config
    c: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": ns, "uid": uid or f"uid-{ns}-{name}"},
        "spec": {"devices": devices},
    }
    if allocation is not None:
        c["status"] = {"allocation": allocation}
    return c


def allocated(name: str, *results: dict[str, Any]) -> dict[str, Any]:
    """An already allocated claim holding the given results."""
    return claim(name, req("r"), allocation={"devices": {"results": list(results)}})


def result(
    device: str, request: str = "r", pool: str = NODE, driver: str = DRIVER, **extra: Any
) -> dict[str, Any]:
    return {"request": request, "driver": driver, "pool": pool, "device": device, **extra}


def node(name: str = NODE, **labels: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if labels:
        meta["labels"] = {k.replace("__", "/").replace("_", "."): v for k, v in labels.items()}
    return {"apiVersion": "v1", "kind": "Node", "metadata": meta}


def match(attr: str, *requests: str) -> dict[str, Any]:
    c: dict[str, Any] = {"matchAttribute": attr}
    if requests:
        c["requests"] = list(requests)
    return c


def distinct(attr: str, *requests: str) -> dict[str, Any]:
    c: dict[str, Any] = {"distinctAttribute": attr}
    if requests:
        c["requests"] = list(requests)
    return c


def counter_slice(
    name: str,
    sets: dict[str, dict[str, str]],
    *,
    node: str | None = NODE,
    pool: str | None = None,
    count: int = 1,
    **spec: Any,
) -> dict[str, Any]:
    shared = [
        {"name": n, "counters": {k: {"value": v} for k, v in cs.items()}} for n, cs in sets.items()
    ]
    return rslice(name, None, node=node, pool=pool, count=count, sharedCounters=shared, **spec)


def consumes(counter_set: str, **counters: str) -> list[dict[str, Any]]:
    return [{"counterSet": counter_set, "counters": {k: {"value": v} for k, v in counters.items()}}]


def scenario(
    name: str,
    *,
    slices: list[dict[str, Any]],
    claims: list[dict[str, Any]],
    classes: list[dict[str, Any]] | None = None,
    allocated_claims: list[dict[str, Any]] | None = None,
    node_obj: dict[str, Any] | None = None,
    features: dict[str, bool] | None = None,
    expect: str = "allocated",
    devices: list[list[str]] | None = None,
    check: dict[str, Any] | None = None,
    covers: str = "",
) -> dict[str, Any]:
    """A named contract case.

    ``devices``: per claim, the expected results as ``request=pool/device`` (driver
    omitted when it is the default driver). ``check``: extra expectations on claim 0's
    allocation (``config``, ``nodeSelector``, ``consumedCapacity``, ``shareID``,
    ``adminAccess``, ``tolerations``, ``bindingConditions``).
    """
    return {
        "name": name,
        "covers": covers,
        "slices": slices,
        "classes": classes if classes is not None else [dclass()],
        "claims": claims,
        "allocated": allocated_claims or [],
        "node": node_obj or node(),
        "features": features or {},
        "expect": {"outcome": expect, "devices": devices, "check": check or {}},
    }
