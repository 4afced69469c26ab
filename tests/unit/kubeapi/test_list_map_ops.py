"""kubeapi.jsonpatch.list_map_ops: one writer's entries of a shared list, and nothing else.

Pure decision logic (the real apiserver's side is
tests/integration/deploy/test_device_status_granular_authz.py): over random lists of several
drivers' entries, applying the ops gives exactly the wanted entries of the owner, leaves
every other entry where and as it was, and no op names another driver's entry.
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from drakit.kubeapi.jsonpatch import list_map_ops

PATH = "/status/devices"
MINE = "mine.example.com"


def key(entry: dict[str, Any]) -> tuple[str, str]:
    return (str(entry.get("pool")), str(entry.get("device")))


def apply(items: list[dict[str, Any]] | None, ops: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """RFC 6902 for what list_map_ops emits (test, replace, remove, add) on ``PATH``."""
    current = copy.deepcopy(items)
    for op in ops:
        if op["path"] == PATH:
            assert op["op"] == "add" and not current
            current = copy.deepcopy(op["value"])
            continue
        assert current is not None
        index = op["path"][len(PATH) + 1 :]
        if op["op"] == "add":
            assert index == "-"
            current.append(copy.deepcopy(op["value"]))
            continue
        position, _, field = index.partition("/")
        if op["op"] == "test":
            assert current[int(position)][field] == op["value"], "a test op failed"
        elif op["op"] == "replace":
            current[int(position)] = copy.deepcopy(op["value"])
        else:
            assert op["op"] == "remove" and not field
            del current[int(position)]
    return current or []


ENTRIES = st.fixed_dictionaries(
    {
        "driver": st.sampled_from([MINE, "other.example.com", "third.example.com"]),
        "pool": st.sampled_from(["p1", "p2"]),
        "device": st.sampled_from(["d1", "d2", "d3"]),
        "data": st.integers(0, 3),
    }
)


def unique(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The list-map's rule: one entry per (driver, pool, device)."""
    seen, out = set(), []
    for entry in entries:
        if (entry["driver"], *key(entry)) not in seen:
            seen.add((entry["driver"], *key(entry)))
            out.append(entry)
    return out


@settings(max_examples=500, deadline=None)
@given(st.lists(ENTRIES, max_size=8), st.lists(ENTRIES, max_size=5), st.booleans())
def test_the_ops_give_the_wanted_own_entries_and_leave_every_other_entry_alone(
    present: list[dict[str, Any]], wanted: list[dict[str, Any]], absent: bool
) -> None:
    items = None if absent and not present else unique(present)
    mine = unique([e | {"driver": MINE} for e in wanted])
    ops = list_map_ops(items, PATH, owner=("driver", MINE), wanted=mine, key=key)
    result = apply(items, ops)

    others = [e for e in items or () if e["driver"] != MINE]
    assert [e for e in result if e["driver"] != MINE] == others
    assert sorted(map(key, (e for e in result if e["driver"] == MINE))) == sorted(map(key, mine))
    assert all(e in mine for e in result if e["driver"] == MINE)
    for op in ops:  # never an op naming another driver's entry
        if op["path"].startswith(PATH + "/") and op["path"] != PATH + "/-":
            index = int(op["path"].split("/")[3])
            assert (items or [])[index]["driver"] == MINE
    if [e for e in items or () if e["driver"] == MINE] == mine:
        assert ops == []


def test_the_ops_are_tests_replacements_removals_from_the_last_and_appends():
    items = [
        {"driver": MINE, "pool": "p", "device": "a", "data": 1},
        {"driver": "other.example.com", "pool": "p", "device": "x", "data": 1},
        {"driver": MINE, "pool": "p", "device": "b", "data": 1},
        {"driver": MINE, "pool": "p", "device": "c", "data": 1},
    ]
    wanted = [
        {"driver": MINE, "pool": "p", "device": "a", "data": 2},
        {"driver": MINE, "pool": "p", "device": "d", "data": 1},
    ]
    ops = list_map_ops(items, PATH, owner=("driver", MINE), wanted=wanted, key=key)
    assert ops == [
        {"op": "test", "path": f"{PATH}/0/driver", "value": MINE},
        {"op": "test", "path": f"{PATH}/2/driver", "value": MINE},
        {"op": "test", "path": f"{PATH}/3/driver", "value": MINE},
        {"op": "replace", "path": f"{PATH}/0", "value": wanted[0]},
        {"op": "remove", "path": f"{PATH}/3"},
        {"op": "remove", "path": f"{PATH}/2"},
        {"op": "add", "path": f"{PATH}/-", "value": wanted[1]},
    ]
