"""The DeviceTaintRules of the NoExecute budget: names, content, and reading them back (pure).

One rule per granted device. Its name is a hash of driver, pool and device name, so every
controller (any leader, after any restart) names a device's rule the same way: a create that
is repeated finds the rule already there (409), and two decisions can never make two rules
for one device. The rule carries:

* the label ``resource.drakit.dev/noexecute-budget: <driver>``: the controller watches only
  rules with this label, and counts every one of them (an earlier leader's too) against the
  budget; rules of others (an administrator's) are neither counted nor touched;
* annotations with the device's node and the request's time, so that a rule counts for its
  node even while the device is not published;
* an owner reference to that Node, when known: the garbage collector deletes the rule with
  the Node;
* the selector ``driver``/``pool``/``device`` and the taint ``<driver>/unhealthy`` (the
  key a claim tolerates, as for the node plugin's own NoSchedule taint) with the health reason
  as its value and effect NoExecute. The apiserver stamps ``timeAdded`` when the rule is
  created: ``tolerationSeconds`` count from the moment NoExecute took effect.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
from collections.abc import Mapping
from typing import Any

from drakit.allocator.model import TAINT_EFFECT_NO_EXECUTE
from drakit.allocator.usage import UNHEALTHY_TAINT_SUFFIX
from drakit.controller.noexecute.census import DeviceRef, Request, parse_time
from drakit.controller.noexecute.decision import Grant

__all__ = [
    "BUDGET_LABEL",
    "NODE_ANNOTATION",
    "SINCE_ANNOTATION",
    "build_rule",
    "grant_of",
    "rule_name",
]

BUDGET_LABEL = "resource.drakit.dev/noexecute-budget"
NODE_ANNOTATION = "resource.drakit.dev/node"
SINCE_ANNOTATION = "resource.drakit.dev/requested-at"
_PREFIX = "drakit-noexecute-"
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?)?$")


def rule_name(driver: str, device: DeviceRef) -> str:
    """The rule's name: the same for one device on every controller (see the docstring)."""
    pool, name = device
    digest = hashlib.sha256(f"{driver}\n{pool}\n{name}".encode()).hexdigest()
    return f"{_PREFIX}{digest[:32]}"


def build_rule(
    driver: str, request: Request, api_version: str, node: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The DeviceTaintRule that grants ``request`` NoExecute; ``node`` (the Node object, when
    known) becomes its owner."""
    pool, device = request.device
    annotations = {NODE_ANNOTATION: request.node}
    if request.since is not None:
        annotations[SINCE_ANNOTATION] = dt.datetime.fromtimestamp(request.since, dt.UTC).strftime(
            "%Y-%m-%dT%H:%M:%SZ"
        )
    metadata: dict[str, Any] = {
        "name": rule_name(driver, request.device),
        "labels": {BUDGET_LABEL: driver},
        "annotations": annotations,
    }
    node_meta = (node or {}).get("metadata") or {}
    if node_meta.get("uid") and node_meta.get("name") == request.node:
        metadata["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Node", "name": request.node, "uid": node_meta["uid"]}
        ]
    taint: dict[str, Any] = {
        "key": f"{driver}{UNHEALTHY_TAINT_SUFFIX}",
        "effect": TAINT_EFFECT_NO_EXECUTE,
    }
    if request.reason and _LABEL_VALUE.match(request.reason):
        taint["value"] = request.reason
    return {
        "apiVersion": api_version,
        "kind": "DeviceTaintRule",
        "metadata": metadata,
        "spec": {
            "deviceSelector": {"driver": driver, "pool": pool, "device": device},
            "taint": taint,
        },
    }


def grant_of(rule: Mapping[str, Any], driver: str) -> Grant | None:
    """The grant a rule of the budget stands for; None when it is not one of ``driver``'s
    (another driver's, or a rule without a complete device selector, which selects more than
    one device and is therefore not the budget's)."""
    meta = rule.get("metadata") or {}
    if (meta.get("labels") or {}).get(BUDGET_LABEL) != driver:
        return None
    selector = (rule.get("spec") or {}).get("deviceSelector") or {}
    pool, device = selector.get("pool"), selector.get("device")
    if selector.get("driver") != driver or not pool or not device:
        return None
    annotations = meta.get("annotations") or {}
    return Grant(
        (str(pool), str(device)),
        str(annotations.get(NODE_ANNOTATION, "")),
        parse_time(annotations.get(SINCE_ANNOTATION)),
    )
