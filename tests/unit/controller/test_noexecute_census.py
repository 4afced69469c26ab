"""The NoExecute budget's census kept from listing to listing (pure): after any sequence of
listings (slices added, replaced, relisted as new objects, removed; new pool generations;
pools published by two nodes; one name twice) it says what counting the listing from
scratch says (tests/unit/controller/test_noexecute_decisions.py has the decisions)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from drakit.controller.noexecute.census import (
    Census,
    DeviceRef,
    DriverView,
    Request,
    request_key,
    summarize,
    view_of,
)

DRIVER = "gpu.example.com"
TIMES = ("2026-12-07T10:00:00Z", "2026-12-07T10:00:01Z", "", "not a time")


def _slice(rng: random.Random, name: str, version: int) -> dict[str, Any]:
    node = rng.choice(("node-a", "node-b", "node-c"))
    pool = rng.choice(("pool-a", "pool-b", node))
    devices = []
    for i in range(rng.randint(0, 4)):
        entry: dict[str, Any] = {"name": f"gpu-{rng.randint(0, 3) if i else i}"}
        if rng.random() < 0.4:
            entry["taints"] = [{"key": request_key(DRIVER), "effect": "None",
                                "value": rng.choice(("Xid", "ECC")),
                                "timeAdded": rng.choice(TIMES)}]  # fmt: skip
        if rng.random() < 0.2:
            entry["nodeName"] = rng.choice(("node-a", "node-d"))
        devices.append(entry)
    spec: dict[str, Any] = {
        "driver": rng.choice((DRIVER, DRIVER, DRIVER, "other.example.com")),
        "pool": {"name": pool, "generation": rng.randint(1, 3)},
        "devices": devices,
        "nodeName": node,
    }
    meta = {"name": name, "resourceVersion": str(version) if rng.random() < 0.9 else ""}
    return {"metadata": meta, "spec": spec}


def _from_scratch(listing: list[dict[str, Any]]) -> DriverView:
    """The census's contract, counted the plain way (the module docstring of census)."""
    summaries = [s for s in (summarize(obj, DRIVER) for obj in listing) if s is not None]
    current: dict[tuple[str, str], int] = {}
    for s in summaries:
        current[(s.owner, s.pool)] = max(current.get((s.owner, s.pool), 0), s.generation)
    counts: dict[str, int] = {}
    owners: dict[str, set[str]] = {}
    present: set[DeviceRef] = set()
    requests: dict[DeviceRef, list[Request]] = {}
    for s in summaries:
        if s.generation != current[(s.owner, s.pool)]:
            continue
        for node, count in s.devices_per_node.items():
            counts[node] = counts.get(node, 0) + count
            owners.setdefault(s.pool, set()).add(node)
        present |= s.present
        for r in s.requests:
            requests.setdefault(r.device, []).append(r)
    conflicted = frozenset(pool for pool, nodes in owners.items() if len(nodes) > 1)
    return DriverView(
        devices_per_node=counts,
        present=frozenset(present),
        requests={
            ref: min(same, key=lambda r: (r.rank(), r.node, r.reason))
            for ref, same in requests.items()
            if ref[0] not in conflicted
        },
        conflicted_pools=conflicted,
    )


@pytest.mark.parametrize("seed", range(40))
def test_the_census_kept_across_listings_says_what_counting_from_scratch_says(seed: int) -> None:
    rng = random.Random(seed)
    census = Census(DRIVER)
    listing: list[dict[str, Any]] = []
    for version in range(1, 61):
        op = rng.random()
        if op < 0.35 or not listing:
            listing.append(_slice(rng, f"slice-{rng.randint(0, 6)}", version))  # maybe a name twice
        elif op < 0.65:
            listing[rng.randrange(len(listing))] = _slice(rng, f"slice-{version}", version)
        elif op < 0.8:
            listing.pop(rng.randrange(len(listing)))
        elif op < 0.9:
            listing = [dict(obj) for obj in listing]  # a relist: new objects, same versions
        view = census.view(list(listing))
        expected = _from_scratch(listing)
        assert dict(view.devices_per_node) == dict(expected.devices_per_node)
        assert view.present == expected.present
        assert dict(view.requests) == dict(expected.requests)
        assert view.conflicted_pools == expected.conflicted_pools
        assert view_of(listing, DRIVER) == view  # a fresh census agrees


def test_a_census_counts_only_its_own_driver() -> None:
    with pytest.raises(ValueError, match=r"other\.example\.com"):
        view_of([], "other.example.com", Census(DRIVER))
