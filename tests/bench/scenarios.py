"""Scenario generators shared by the allocator benchmark and the differential tests.

Everything here builds plain resource.k8s.io/v1 dicts in the shape the API returns, in the
scenario and workload formats of ``hack/oracle/README.md``:

* :func:`bench_workload` builds the scheduler_perf-like workloads of the benchmark
  (nodes with eight devices each; claims of one device with a class and a CEL selector;
  the same with a ``matchAttribute`` constraint; partitionable devices);
* :func:`random_scenario` builds one seeded random scenario for the differential suite:
  random pools (node-local, node selector, all nodes, per-device node selection,
  partitionable, incomplete, stale, invalid), devices with attributes, capacities,
  counters, taints and binding conditions, classes with CEL selectors and configs, and
  claims with counts, ``All``, ``firstAvailable``, tolerations, capacity requests,
  constraints and configs, plus some already allocated claims.

Generated objects are meant to pass API validation, so that a difference between the two
allocators is a difference in allocation, not in what input they accept. The same seed
always yields the same scenario (only :mod:`random.Random` with that seed is used).
"""

from __future__ import annotations

import random
import uuid
from typing import Any

Obj = dict[str, Any]

FEATURES_ALL: dict[str, bool] = {
    "adminAccess": True,
    "prioritizedList": True,
    "partitionableDevices": True,
    "deviceTaints": True,
    "deviceBindingConditions": True,
    "consumableCapacity": True,
    "listTypeAttributes": True,
}

NODE_NAME = "node-a"
OTHER_NODE = "node-b"
NAMESPACE = "default"
GPU = "gpu.example.com"
NIC = "nic.example.com"
PCI_ROOT = "resource.kubernetes.io/pciRoot"

# --------------------------------------------------------------------------- objects


def node(name: str, labels: dict[str, str] | None = None) -> Obj:
    """A Node as the allocator sees it: a name and labels."""
    return {"metadata": {"name": name, "labels": dict(labels or {})}}


def device_class(name: str, expressions: list[str], config: list[Obj] | None = None) -> Obj:
    """A DeviceClass with one CEL selector per expression and optional opaque configs."""
    spec: Obj = {"selectors": [{"cel": {"expression": e}} for e in expressions]}
    if config:
        spec["config"] = config
    return {"metadata": {"name": name}, "spec": spec}


def opaque(driver: str, parameters: Obj) -> Obj:
    return {"opaque": {"driver": driver, "parameters": parameters}}


def resource_slice(
    name: str,
    driver: str,
    pool: str,
    *,
    devices: list[Obj] | None = None,
    counter_sets: list[Obj] | None = None,
    generation: int = 1,
    slice_count: int = 1,
    **node_selection: Any,
) -> Obj:
    """A ResourceSlice; ``node_selection`` holds exactly one of the v1 node fields
    (``nodeName``, ``nodeSelector``, ``allNodes``, ``perDeviceNodeSelection``)."""
    spec: Obj = {
        "driver": driver,
        "pool": {"name": pool, "generation": generation, "resourceSliceCount": slice_count},
        **node_selection,
    }
    if devices is not None:
        spec["devices"] = devices
    if counter_sets is not None:
        spec["sharedCounters"] = counter_sets
    return {"metadata": {"name": name}, "spec": spec}


def claim(name: str, requests: list[Obj], **devices: Any) -> Obj:
    """A ResourceClaim in the default namespace; ``devices`` may add constraints/config."""
    return {
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"devices": {"requests": requests, **devices}},
    }


def exact_request(name: str, class_name: str, **fields: Any) -> Obj:
    return {"name": name, "exactly": {"deviceClassName": class_name, **fields}}


def cel_selectors(*expressions: str) -> list[Obj]:
    return [{"cel": {"expression": e}} for e in expressions]


def scenario(
    slices: list[Obj],
    classes: list[Obj],
    claims: list[Obj],
    *,
    allocated: list[Obj] | None = None,
    on_node: Obj | None = None,
    features: dict[str, bool] | None = None,
) -> Obj:
    """One scenario in the oracle's input format."""
    return {
        "slices": slices,
        "classes": classes,
        "claims": claims,
        "allocated": allocated or [],
        "node": on_node or node(NODE_NAME),
        "features": dict(features or FEATURES_ALL),
    }


# --------------------------------------------------------------------------- benchmark

BENCH_DRIVER = "test-driver.cdi.k8s.io"
BENCH_CLASS = "test-class"
BENCH_SELECTOR = (
    f'device.attributes["{BENCH_DRIVER}"].driverVersion.major() >= 1 && '
    f'device.capacity["{BENCH_DRIVER}"].memory.isGreaterThan(quantity("1Mi"))'
)
BENCH_SHAPES = ("class-selector", "match-attribute", "partitionable")


def bench_node_name(index: int) -> str:
    return f"scheduler-perf-dra-{index}"


def _basic_device(index: int, pci_roots: int = 2) -> Obj:
    """A device like scheduler_perf's resourceslice-basic-devices template (a GPU with a
    realistic set of attributes; PCI roots alternate between neighbours)."""
    root = index % pci_roots
    return {
        "name": f"basic-device-{index}",
        "attributes": {
            "driver": {"string": "xe"},
            "driverVersion": {"version": "1.2.3"},
            PCI_ROOT: {"string": f"pci0000:0{root}"},
            "family": {"string": "Arc Pro B-Series"},
            "health": {"string": "Healthy"},
            "model": {"string": "B60"},
            "pciAddress": {"string": f"0000:0{index}:00.0"},
            "pciId": {"string": "0xe211"},
            "pciRoot": {"string": f"0{root}"},
            "sriov": {"bool": True},
            "type": {"string": "gpu"},
        },
        "capacity": {"memory": {"value": "24480Mi"}, "millicores": {"value": "1k"}},
    }


def _basic_slices(index: int, devices: int) -> list[Obj]:
    return [
        resource_slice(
            f"resourceslice-{index}",
            BENCH_DRIVER,
            f"resourceslice-{index}",
            devices=[_basic_device(d) for d in range(devices)],
            nodeName=bench_node_name(index),
        )
    ]


def _partitionable_slices(index: int, devices: int) -> list[Obj]:
    """One GPU with a shared memory counter, split MIG-style: ``devices - 1`` slices of
    one unit each, then the whole GPU (which no longer fits once a slice is taken)."""
    units = devices - 1
    counter_set = {"name": "gpu-0", "counters": {"memory": {"value": f"{10 * units}Gi"}}}
    parts = []
    for d in range(units):
        part = _basic_device(d)
        part["name"] = f"gpu-0-part-{d}"
        part["consumesCounters"] = [
            {"counterSet": "gpu-0", "counters": {"memory": {"value": "10Gi"}}}
        ]
        parts.append(part)
    whole = _basic_device(units)
    whole["name"] = "gpu-0-whole"
    whole["consumesCounters"] = [
        {"counterSet": "gpu-0", "counters": {"memory": {"value": f"{10 * units}Gi"}}}
    ]
    pool = f"resourceslice-{index}"
    on_node: Obj = {"nodeName": bench_node_name(index)}
    return [
        resource_slice(
            f"resourceslice-countersets-{index}",
            BENCH_DRIVER,
            pool,
            counter_sets=[counter_set],
            slice_count=2,
            **on_node,
        ),
        resource_slice(
            f"resourceslice-devices-{index}",
            BENCH_DRIVER,
            pool,
            devices=[*parts, whole],
            slice_count=2,
            **on_node,
        ),
    ]


def _bench_claims(shape: str) -> list[Obj]:
    selectors = cel_selectors(BENCH_SELECTOR)
    if shape == "class-selector":
        return [claim("test-claim", [exact_request("req-0", BENCH_CLASS, selectors=selectors)])]
    if shape == "match-attribute":
        # Four devices that share a PCI root: half of a node; roots alternate between
        # neighbouring devices, so every other candidate has to be skipped.
        requests = [exact_request(f"req-{i}", BENCH_CLASS, selectors=selectors) for i in range(4)]
        return [claim("test-claim", requests, constraints=[{"matchAttribute": PCI_ROOT}])]
    if shape == "partitionable":
        return [claim("test-claim", [exact_request("req-0", BENCH_CLASS)])]
    raise ValueError(f"unknown benchmark shape {shape!r}; known: {', '.join(BENCH_SHAPES)}")


def bench_workload(
    shape: str,
    *,
    nodes: int = 500,
    devices_per_node: int = 8,
    pods: int = 500,
    feasible_nodes: int = 20,
) -> Obj:
    """A workload for ``dra-oracle -bench`` and the Python benchmark loop (see
    ``hack/oracle/README.md``): ``nodes`` nodes with ``devices_per_node`` devices each of
    the scheduler_perf test driver, one class selecting that driver, and one pod's
    claims per ``shape`` (one of :data:`BENCH_SHAPES`)."""
    make_slices = _partitionable_slices if shape == "partitionable" else _basic_slices
    slices = [s for i in range(nodes) for s in make_slices(i, devices_per_node)]
    return {
        "slices": slices,
        "classes": [device_class(BENCH_CLASS, [f'device.driver == "{BENCH_DRIVER}"'])],
        "allocated": [],
        "nodes": [node(bench_node_name(i), {"node-with-dra": "true"}) for i in range(nodes)],
        "claimTemplates": _bench_claims(shape),
        "pods": pods,
        "feasibleNodes": feasible_nodes,
        "features": dict(FEATURES_ALL),
    }


# --------------------------------------------------------------------------- random

_MODELS = ("a100", "h100", "l4")
_VERSIONS = ("1.0.0", "1.2.3", "2.0.0-rc.1", "2.1.0")
_MEMORY = ("8Gi", "16Gi", "40Gi")

# Selectors that are safe on every device (optional access, error-absorbing &&).
_SAFE_SELECTORS = (
    f'device.attributes["{GPU}"].?model.orValue("") == "a100"',
    f'device.attributes["{GPU}"].?model.orValue("") != "l4"',
    f'"model" in device.attributes["{GPU}"] && device.attributes["{GPU}"].model == "h100"',
    f'device.capacity["{GPU}"].?memory.orValue(quantity("0")).isGreaterThan(quantity("10Gi"))',
    f'device.attributes["{GPU}"].?index.orValue(0) % 2 == 0',
    f'device.attributes["{GPU}"].?healthy.orValue(false)',
    f'device.attributes["{GPU}"].?version.hasValue() && '
    f'device.attributes["{GPU}"].version.isGreaterThan(semver("1.1.0"))',
    f'device.attributes["{NIC}"].?speed.orValue(0) >= 100',
    "device.allowMultipleAllocations",
    f'device.driver == "{GPU}" && device.attributes["{GPU}"].?numa.orValue(-1) == 0',
    f'device.attributes["{PCI_ROOT}"].?pciRoot.orValue("") == "pci0"',
    f'device.attributes["{GPU}"].?model.orValue("").startsWith("a")',
)
# Selectors that fail at run time on some devices, or never compile (the API server
# rejects the latter in new objects; stored ones still reach the allocator).
BAD_SELECTORS = (
    f'device.attributes["{GPU}"].model == "h100"',
    "device.attributes[",
    'device.capacity["x"].memory.isGreaterThan(1)',
)


class _Gen:
    """One random scenario under construction."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.features = dict(FEATURES_ALL)
        self.slices: list[Obj] = []
        # (driver, pool, device dict) of every device a claim might get on node-a.
        self.devices: list[tuple[str, str, Obj]] = []
        # Big pools only with a single small claim: a search without a solution is
        # exponential in both allocators (kubernetes#131730), which would test time-outs.
        self.big = self.chance(0.15)
        self.device_counts = (0, 1, 2, 3, 3, 4, 5) + ((8, 12) if self.big else ())

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    # ------------------------------------------------------------------ devices

    def gpu_device(self, name: str, index: int, *, partitionable: bool = False) -> Obj:
        rng = self.rng
        attributes: Obj = {}
        if self.chance(0.85):
            attributes["model"] = {"string": rng.choice(_MODELS)}
        if self.chance(0.8):
            attributes["index"] = {"int": index}
        if self.chance(0.6):
            attributes["healthy"] = {"bool": self.chance(0.8)}
        if self.chance(0.6):
            attributes["version"] = {"version": rng.choice(_VERSIONS)}
        if self.chance(0.6):
            attributes["numa"] = {"int": rng.randint(0, 1)}
        if self.chance(0.5):
            attributes[PCI_ROOT] = {"string": rng.choice(("pci0", "pci1"))}
        if self.features["listTypeAttributes"] and self.chance(0.1):
            attributes["numas"] = {"ints": sorted(rng.sample([0, 1, 2], rng.randint(1, 2)))}
        device: Obj = {"name": name, "attributes": attributes}
        self.add_capacity(device, partitionable)
        if self.chance(0.12):
            device["taints"] = [
                {
                    "key": rng.choice(("maintenance", "degraded")),
                    "value": "true",
                    "effect": rng.choice(("NoSchedule", "NoExecute", "None")),
                }
            ]
        if self.chance(0.06):
            device["bindingConditions"] = ["dra.example.com/attached"]
            device["bindingFailureConditions"] = ["dra.example.com/failed"]
            if self.chance(0.5):
                device["bindsToNode"] = True
        return device

    def add_capacity(self, device: Obj, partitionable: bool) -> None:
        rng = self.rng
        if not partitionable and self.features["consumableCapacity"] and self.chance(0.15):
            device["allowMultipleAllocations"] = True
            policy: Obj = {"default": "4Gi"}
            if self.chance(0.5):
                policy["validRange"] = {"min": "1Gi", "step": "1Gi"}
                if self.chance(0.5):
                    policy["validRange"]["max"] = "16Gi"
            else:
                policy["validValues"] = ["4Gi", "8Gi", "16Gi"]
            device["capacity"] = {"memory": {"value": "16Gi", "requestPolicy": policy}}
        elif self.chance(0.6):
            device["capacity"] = {"memory": {"value": rng.choice(_MEMORY)}}

    def nic_device(self, name: str) -> Obj:
        attributes: Obj = {"speed": {"int": self.rng.choice((25, 100, 400))}}
        if self.chance(0.5):
            attributes[PCI_ROOT] = {"string": self.rng.choice(("pci0", "pci1"))}
        return {"name": name, "attributes": attributes}

    def make_device(self, driver: str, name: str, index: int) -> Obj:
        return self.gpu_device(name, index) if driver == GPU else self.nic_device(name)

    # ------------------------------------------------------------------ pools

    def node_selection(self) -> tuple[Obj, bool]:
        """One of the four node fields, and whether the pool is visible from node-a."""
        kind = self.rng.choices(
            ("local", "other", "selector", "all", "per-device"), weights=(6, 1, 3, 2, 1)
        )[0]
        if kind == "local":
            return {"nodeName": NODE_NAME}, True
        if kind == "other":
            return {"nodeName": OTHER_NODE}, False
        if kind == "selector":
            selector, visible = self.node_selector()
            return {"nodeSelector": selector}, visible
        if kind == "all":
            return {"allNodes": True}, True
        return {"perDeviceNodeSelection": True}, True

    def node_selector(self) -> tuple[Obj, bool]:
        """A node selector and whether it selects node-a (labels zone=z1 and hostname)."""
        zone = self.rng.choice(("z1", "z2"))
        terms: list[Obj] = [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": [zone]}]}
        ]
        visible = zone == "z1"
        variant = self.rng.choice(("plain", "plain", "fields", "hostname", "exists"))
        if variant == "fields":
            operator = self.rng.choice(("In", "NotIn"))
            terms[0]["matchFields"] = [
                {"key": "metadata.name", "operator": operator, "values": [NODE_NAME]}
            ]
            visible = visible and operator == "In"
        elif variant == "hostname":
            # The API allows exactly one term per slice; requirements within it are ANDed.
            terms[0]["matchExpressions"].append(
                {"key": "kubernetes.io/hostname", "operator": "NotIn", "values": [OTHER_NODE]}
            )
        elif variant == "exists":
            operator = self.rng.choice(("Exists", "DoesNotExist"))
            terms[0]["matchExpressions"].append({"key": "gpu", "operator": operator})
            visible = visible and operator == "DoesNotExist"
        return {"nodeSelectorTerms": terms}, visible

    def per_device_node(self, device: Obj) -> None:
        choice = self.rng.choice(("local", "other", "all", "selector"))
        if choice == "local":
            device["nodeName"] = NODE_NAME
        elif choice == "other":
            device["nodeName"] = OTHER_NODE
        elif choice == "all":
            device["allNodes"] = True
        else:
            device["nodeSelector"] = self.node_selector()[0]

    def add_pool(self, driver: str, pool: str) -> None:
        rng = self.rng
        if driver == GPU and self.features["partitionableDevices"] and self.chance(0.2):
            self.add_partitionable_pool(pool)
            return
        selection, visible = self.node_selection()
        slice_count = rng.choice((1, 1, 1, 2))
        generation = rng.choice((1, 1, 2))
        declared = slice_count + (1 if self.chance(0.05) else 0)  # incomplete pool
        next_index = 0
        for s in range(slice_count):
            devices = []
            for k in range(rng.choice(self.device_counts)):
                name = f"dev-{next_index}"
                if s and not k and next_index and self.chance(0.05):
                    # The previous slice's last name again: the pool is invalid (the API
                    # only rejects duplicates within one slice).
                    name = f"dev-{next_index - 1}"
                device = self.make_device(driver, name, next_index)
                if "perDeviceNodeSelection" in selection:
                    self.per_device_node(device)
                devices.append(device)
                next_index += 1
            self.slices.append(
                resource_slice(
                    f"{pool}-{s}",
                    driver,
                    pool,
                    devices=devices,
                    generation=generation,
                    slice_count=declared,
                    **selection,
                )
            )
            if visible:
                self.devices.extend((driver, pool, d) for d in devices)
        if "nodeName" in selection and self.chance(0.1):
            # The pool also has a slice on another node (network-attached pools are split
            # per node like this); it may even be of a newer generation (obsolete pool).
            newer = generation + (1 if self.chance(0.3) else 0)
            for existing in self.slices[-slice_count:]:
                existing["spec"]["pool"]["resourceSliceCount"] = declared + 1
            other = [self.make_device(driver, f"far-{i}", i) for i in range(rng.randint(1, 2))]
            self.slices.append(
                resource_slice(
                    f"{pool}-far",
                    driver,
                    pool,
                    devices=other,
                    generation=newer,
                    slice_count=declared + 1,
                    nodeName=OTHER_NODE,
                )
            )
        if generation == 2 and self.chance(0.5):
            # A leftover slice of the previous generation: must be ignored.
            stale = [self.make_device(driver, f"old-{i}", i) for i in range(rng.randint(1, 2))]
            if "perDeviceNodeSelection" in selection:
                for device in stale:
                    self.per_device_node(device)
            self.slices.append(
                resource_slice(
                    f"{pool}-old",
                    driver,
                    pool,
                    devices=stale,
                    generation=1,
                    slice_count=1,
                    **selection,
                )
            )

    def add_partitionable_pool(self, pool: str) -> None:
        rng = self.rng
        total = rng.choice((20, 40))
        counter_sets = [{"name": "gpu-0", "counters": {"memory": {"value": f"{total}Gi"}}}]
        devices = []
        for i in range(rng.randint(2, 5)):
            size = rng.choice((10, 20, 40))
            device = self.gpu_device(f"part-{i}", i, partitionable=True)
            counter_set = "gpu-0" if not self.chance(0.015) else "gpu-9"  # unknown: invalid
            device["consumesCounters"] = [
                {"counterSet": counter_set, "counters": {"memory": {"value": f"{size}Gi"}}}
            ]
            devices.append(device)
        on_node: Obj = {"nodeName": NODE_NAME}
        self.slices.append(
            resource_slice(
                f"{pool}-counters", GPU, pool, counter_sets=counter_sets, slice_count=2, **on_node
            )
        )
        self.slices.append(
            resource_slice(f"{pool}-devices", GPU, pool, devices=devices, slice_count=2, **on_node)
        )
        self.devices.extend((GPU, pool, d) for d in devices)

    # ------------------------------------------------------------------ classes

    def classes(self) -> list[Obj]:
        gpu_config = [opaque(GPU, {"sharing": "none"})] if self.chance(0.3) else None
        return [
            device_class("gpu", [f'device.driver == "{GPU}"'], gpu_config),
            device_class("nic", [f'device.driver == "{NIC}"']),
            device_class("any", []),
            device_class(
                "big-gpu",
                [
                    f'device.driver == "{GPU}"',
                    f'device.capacity["{GPU}"].?memory.orValue(quantity("0"))'
                    '.compareTo(quantity("16Gi")) >= 0',
                ],
            ),
        ]

    def class_name(self) -> str:
        if self.chance(0.01):
            return "missing"
        return self.rng.choices(("gpu", "nic", "any", "big-gpu"), weights=(8, 2, 2, 1))[0]

    # ------------------------------------------------------------------ claims

    def selector(self) -> list[Obj]:
        if self.chance(0.6):
            return []
        pool = BAD_SELECTORS if self.chance(0.04) else _SAFE_SELECTORS
        return cel_selectors(self.rng.choice(pool))

    def request_body(self, *, sub: bool) -> Obj:
        rng = self.rng
        body: Obj = {"deviceClassName": self.class_name()}
        if self.chance(0.1):
            body["allocationMode"] = "All"
        elif self.chance(0.4):
            body["count"] = rng.choice((1, 2, 2, 3))
        elif self.chance(0.01):
            body["count"] = 33  # above the 32-results limit: fatal
        if selectors := self.selector():
            body["selectors"] = selectors
        if self.chance(0.15):
            toleration: Obj = {"key": rng.choice(("maintenance", "degraded"))}
            if self.chance(0.5):
                toleration["operator"] = "Exists"
            else:
                toleration["value"] = "true"
            if self.chance(0.5):
                toleration["effect"] = rng.choice(("NoSchedule", "NoExecute"))
            body["tolerations"] = [toleration]
        if self.chance(0.1):
            name = "bandwidth" if self.chance(0.1) else "memory"  # a name no device has
            body["capacity"] = {"requests": {name: rng.choice(("2Gi", "4Gi", "5Gi", "20Gi"))}}
        if not sub and self.chance(0.05):
            body["adminAccess"] = True
        return body

    def request(self, name: str) -> Obj:
        if self.chance(0.25):
            subs = [
                {"name": f"s{i}", **self.request_body(sub=True)}
                for i in range(self.rng.randint(2, 3))
            ]
            return {"name": name, "firstAvailable": subs}
        return {"name": name, "exactly": self.request_body(sub=False)}

    def claim(self, name: str) -> Obj:
        rng = self.rng
        sizes, weights = ((1, 2), (2, 1)) if self.big else ((1, 2, 3), (5, 3, 1))
        names = [f"r{i}" for i in range(rng.choices(sizes, weights)[0])]
        requests = [self.request(n) for n in names]
        # Names a constraint or config may refer to: requests and their subrequests.
        references = names + [
            f"{r['name']}/{sub['name']}" for r in requests for sub in r.get("firstAvailable", [])
        ]
        devices: Obj = {}
        if self.chance(0.3):
            attribute = rng.choice(
                (f"{GPU}/model", PCI_ROOT, f"{GPU}/numa", f"{GPU}/version", f"{GPU}/numas")
            )
            kind = "matchAttribute" if self.chance(0.7) else "distinctAttribute"
            constraint: Obj = {kind: attribute}
            if self.chance(0.5):
                count = rng.randint(1, min(2, len(references)))
                constraint["requests"] = sorted(rng.sample(references, count))
            devices["constraints"] = [constraint]
        if self.chance(0.15):
            config: Obj = opaque(rng.choice((GPU, NIC)), {"claim": name})
            if self.chance(0.5):
                config["requests"] = [rng.choice(references)]
            devices["config"] = [config]
        return claim(name, requests, **devices)

    # ------------------------------------------------------------------ allocated

    def allocated(self) -> list[Obj]:
        """One claim that already holds some of node-a's devices."""
        if not self.devices or not self.chance(0.35):
            return []
        picks = self.rng.sample(self.devices, min(len(self.devices), self.rng.randint(1, 3)))
        results = []
        for driver, pool, device in picks:
            result: Obj = {
                "request": "r0",
                "driver": driver,
                "pool": pool,
                "device": device["name"],
            }
            if device.get("allowMultipleAllocations"):
                result["shareID"] = str(uuid.UUID(int=self.rng.getrandbits(128), version=4))
                result["consumedCapacity"] = {"memory": self.rng.choice(("4Gi", "8Gi"))}
            elif self.chance(0.1):
                result["adminAccess"] = True
            results.append(result)
        previous = claim("previous", [exact_request("r0", "any", count=len(results))])
        previous["status"] = {"allocation": {"devices": {"results": results}}}
        return [previous]

    # ------------------------------------------------------------------ scenario

    def build(self) -> Obj:
        if self.chance(0.08):
            self.features[self.rng.choice(sorted(self.features))] = False
        for driver in (GPU, NIC) if self.chance(0.6) else (GPU,):
            for p in range(self.rng.randint(1, 3)):
                self.add_pool(driver, f"{driver.split('.')[0]}-pool-{p}")
        count = 1 if self.big else self.rng.choices((1, 2, 3), (6, 3, 1))[0]
        claims = [self.claim(f"claim-{i}") for i in range(count)]
        return scenario(
            self.slices,
            self.classes(),
            claims,
            allocated=self.allocated(),
            on_node=node(NODE_NAME, {"zone": "z1", "kubernetes.io/hostname": NODE_NAME}),
            features=self.features,
        )


def random_scenario(seed: int) -> Obj:
    """The random scenario for ``seed`` (same seed, same scenario)."""
    return _Gen(random.Random(seed)).build()
