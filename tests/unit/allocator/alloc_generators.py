"""Random allocation scenarios (oracle input shape) from a seed, for property tests and
differential runs. Small on purpose: few devices, many features mixed."""

from __future__ import annotations

import random
from typing import Any

from alloc_builders import (
    DRIVER,
    allocated,
    claim,
    consumes,
    counter_slice,
    dclass,
    device,
    distinct,
    first,
    match,
    node,
    req,
    result,
    rslice,
    sub,
)

MODELS = ("a", "b", "c")


def _device(rng: random.Random, name: str, counters: bool, shared: bool) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "numa": {"int": rng.randrange(3)},
        "model": {"string": rng.choice(MODELS)},
    }
    if rng.random() < 0.3:
        attributes["links"] = {"ints": sorted(rng.sample(range(4), rng.randrange(1, 3)))}
    d = device(name, attributes)
    if rng.random() < 0.15:
        d["taints"] = [
            {
                "key": rng.choice(("bad", "slow")),
                "effect": rng.choice(("NoSchedule", "NoExecute", "None")),
            }
        ]
    if counters:
        d["consumesCounters"] = consumes("mem", memory=f"{rng.choice((1, 2, 4))}Gi")
    if shared:
        d["allowMultipleAllocations"] = True
        d["capacity"] = {"bw": {"value": "8Gi"}}
    elif rng.random() < 0.2:
        d["capacity"] = {"bw": {"value": f"{rng.choice((2, 4))}Gi"}}
    return d


def _request(rng: random.Random, name: str) -> dict[str, Any]:
    selectors = []
    if rng.random() < 0.4:
        selectors.append(f'device.attributes["{DRIVER}"].model == "{rng.choice(MODELS)}"')
    kw: dict[str, Any] = {}
    roll = rng.random()
    if roll < 0.1:
        kw["mode"] = "All"
    else:
        kw["count"] = rng.choice((1, 1, 1, 2, 3))
    if rng.random() < 0.15:
        kw["tolerations"] = [{"key": "bad", "operator": "Exists"}]
    if rng.random() < 0.2:
        kw["capacity"] = {"requests": {"bw": f"{rng.choice((1, 2, 3))}Gi"}}
    if rng.random() < 0.2:
        subs = [sub(f"s{i}", "gpu", *selectors, **kw) for i in range(rng.randrange(1, 3))]
        subs.append(sub("any", "gpu", count=1))
        return first(name, *subs)
    if rng.random() < 0.05:
        kw["adminAccess"] = True
    return req(name, "gpu", *selectors, **kw)


def random_scenario(seed: int) -> dict[str, Any]:
    """A deterministic random scenario for ``seed``."""
    rng = random.Random(seed)
    slices: list[dict[str, Any]] = []
    all_devices: list[tuple[str, str]] = []
    for p in range(rng.randrange(1, 3)):
        pool = f"pool-{p}"
        partitioned = rng.random() < 0.3
        devs = [
            _device(rng, f"d{p}-{i}", partitioned, rng.random() < 0.15)
            for i in range(rng.randrange(1, 6))
        ]
        all_devices += [(pool, d["name"]) for d in devs]
        if partitioned:
            slices.append(
                counter_slice(f"{pool}-counters", {"mem": {"memory": "4Gi"}}, pool=pool, count=2)
            )
            slices.append(rslice(f"{pool}-devices", devs, pool=pool, count=2))
        else:
            slices.append(rslice(f"{pool}-devices", devs, pool=pool))
    claims = []
    for c in range(rng.randrange(1, 4)):
        requests = [_request(rng, f"r{i}") for i in range(rng.randrange(1, 3))]
        constraints = []
        if rng.random() < 0.3:
            constraints.append(match(f"{DRIVER}/{rng.choice(('numa', 'links'))}"))
        if rng.random() < 0.2:
            constraints.append(distinct(f"{DRIVER}/numa"))
        claims.append(claim(f"c{c}", *requests, constraints=constraints or None))
    taken = []
    if all_devices and rng.random() < 0.4:
        for pool, name in rng.sample(all_devices, rng.randrange(1, min(3, len(all_devices)) + 1)):
            taken.append(allocated(f"old-{name}", result(name, pool=pool)))
    return {
        "name": f"random-{seed}",
        "slices": slices,
        "classes": [dclass("gpu")],
        "claims": claims,
        "allocated": taken,
        "node": node(),
        "features": {},
    }
