"""Seeded AdmissionReviews for the admission differential: the same bytes go to upstream's
webhook and to drakit's, so the generator writes JSON text itself.

A case is one ``admission.k8s.io/v1`` AdmissionReview of a ResourceClaim or
ResourceClaimTemplate of ``resource.k8s.io`` v1, v1beta2 or v1beta1, CREATE or UPDATE,
whose ``spec.devices.config`` mixes this driver's entries, other drivers' entries and
entries of odd shapes. This driver's ``opaque.parameters`` are drawn from every field of
the profile's config kind (valid and invalid values, every sharing strategy with and
without its settings), the other profile's kind, and raw JSON edge cases that only text
can carry: duplicate keys, integers beyond 64 bits, floats and exponents for integers,
``null`` for scalars and objects, unknown fields, keys in the wrong case, deep nesting,
empty objects and parameters that are no object at all.

What is *not* generated, and why: the object outside ``spec.devices.config`` is always
well-typed and free of duplicate keys, because the apiserver encodes the object it
decoded (only ``opaque.parameters`` is a RawExtension whose text it passes on as the
client wrote it); subresources, DELETE and CONNECT, and other group-versions, because the
webhook's rules never select them.
"""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

GPU_API = "gpu.resource.example.com/v1alpha1"
NET_API = "net.resource.example.com/v1alpha1"
OTHER_DRIVER = "other.example.com"
VERSIONS = ("v1", "v1beta2", "v1beta1")
KINDS = {"resourceclaims": "ResourceClaim", "resourceclaimtemplates": "ResourceClaimTemplate"}
STRATEGIES = ("TimeSlicing", "SpacePartitioning")
INTERVALS = ("Default", "Short", "Medium", "Long")


class Raw(str):
    """JSON text written as it is (a number Python would normalise, an exponent)."""


class Pairs(list[tuple[str, Any]]):
    """A JSON object as (key, value) pairs, in order; a key may repeat."""


def emit(value: Any) -> str:
    """``value`` as compact JSON text; Raw and Pairs are written as they are."""
    if isinstance(value, Raw):
        return str(value)
    if isinstance(value, Pairs | dict):
        items = value if isinstance(value, Pairs) else value.items()
        return "{" + ",".join(f"{json.dumps(k)}:{emit(v)}" for k, v in items) + "}"
    if isinstance(value, list):
        return "[" + ",".join(emit(v) for v in value) + "]"
    return json.dumps(value)


@dataclass(frozen=True)
class Case:
    """One AdmissionReview and what the generator put in it (for classifying mismatches)."""

    name: str
    profile: str
    driver: str
    operation: str
    #: The request body, sent as it is to both webhooks.
    body: bytes
    #: The emitted text of the object's and the old object's config list (None: absent).
    config_text: str | None
    old_config_text: str | None
    #: The emitted text of each of this driver's ``opaque.parameters`` in the object.
    our_parameters: tuple[str, ...]


class Generator:
    """Random but reproducible: the same seed gives the same cases, byte for byte."""

    def __init__(self, seed: int) -> None:
        self.r = random.Random(seed)

    # -- scalars -------------------------------------------------------------------------

    def pick(self, *weighted: tuple[float, Callable[[], Any]]) -> Any:
        """One of the thunks, by weight."""
        total = sum(w for w, _ in weighted)
        x = self.r.random() * total
        for weight, thunk in weighted:
            x -= weight
            if x < 0:
                return thunk()
        return weighted[-1][1]()

    def non_object(self) -> Any:
        return self.r.choice([[], [1, 2], "GpuConfig", 5, Raw("1e2"), True, None, Raw("-0")])

    def integer(self) -> Any:
        """partitionCount values: ordinary, negative, 32/64-bit edges, beyond 64 bits, and
        numbers or types that are no Go int."""
        r = self.r
        return r.choice([
            0, 1, 2, 3, 4, 7, 8, 16, 100, -1, -2, 2**31 - 1, 2**31, 2**32, 2**63 - 1, 2**63,
            -(2**63), -(2**63) - 1, 2**64, 10**30, -(10**30),
            Raw("2.0"), Raw("1e2"), Raw("1E1"), Raw("2.5"), Raw("-0"), Raw("-0.0"),
            Raw("1e400"), "2", None, None, None, True, [2], {"value": 2},
        ])  # fmt: skip

    def word(self, good: tuple[str, ...]) -> Any:
        """A string field: a valid value, the wrong case, another string, or no string."""
        r = self.r
        return self.pick(
            (6, lambda: r.choice(good)),
            (1, lambda: r.choice(good).lower()),
            (1, lambda: r.choice(["", "Magic", "Default ", "InvalidInterval", "\u00e9", "\ud800"])),
            (1, lambda: None),
            (1, lambda: r.choice([5, True, [], {}, [r.choice(good)]])),
        )

    # -- objects -------------------------------------------------------------------------

    def finish(self, fields: Pairs, known: tuple[str, ...]) -> Pairs:
        """Sometimes an unknown field, a known one in the wrong case, a repeated key, or a
        different order."""
        r = self.r
        if r.random() < 0.06:
            fields.append(
                (r.choice(["extra", "metadata", "status", "sharingStrategy"]), self.junk())
            )
        if known and r.random() < 0.05:
            key = r.choice(known)
            fields.append((r.choice([key.upper(), key.capitalize(), key.lower()]), self.junk()))
        if fields and r.random() < 0.07:
            key, value = r.choice(fields)
            fields.append((key, value if r.random() < 0.5 else self.junk()))
        if r.random() < 0.2:
            r.shuffle(fields)
        return fields

    def junk(self) -> Any:
        r = self.r
        return self.pick(
            (3, lambda: r.choice([None, 1, "x", True, [], {}, Raw("1e999"), 2**70])),
            (1, lambda: self.nested(r.choice([3, 50, 250]))),
        )

    def nested(self, depth: int) -> Any:
        text = "".join(self.r.choice(['{"a":', "["]) for _ in range(depth))
        closing = "".join("}" if c == "{" else "]" for c in reversed(text.replace('"a":', "")))
        return Raw(text + "1" + closing)

    def time_slicing(self) -> Any:
        r = self.r
        if r.random() < 0.08:
            return self.pick((1, lambda: None), (1, dict), (1, self.non_object))
        fields = Pairs()
        if r.random() < 0.9:
            fields.append(("interval", self.word(INTERVALS)))
        return self.finish(fields, ("interval",))

    def space_partitioning(self) -> Any:
        r = self.r
        if r.random() < 0.08:
            return self.pick((1, lambda: None), (1, dict), (1, self.non_object))
        fields = Pairs()
        if r.random() < 0.9:
            fields.append(("partitionCount", self.integer()))
        return self.finish(fields, ("partitionCount",))

    def sharing(self) -> Any:
        r = self.r
        if r.random() < 0.08:
            return self.pick((2, lambda: None), (2, dict), (1, self.non_object))
        fields = Pairs()
        strategy = self.word(STRATEGIES) if r.random() < 0.93 else None
        if strategy is not None or r.random() < 0.5:
            fields.append(("strategy", strategy))
        # Mostly the strategy's own settings; sometimes none, the other's, or both.
        own_ts = strategy == "TimeSlicing"
        own_sp = strategy == "SpacePartitioning"
        if (own_ts and r.random() < 0.8) or (not own_ts and r.random() < 0.2):
            fields.append(("timeSlicingConfig", self.time_slicing()))
        if (own_sp and r.random() < 0.8) or (not own_sp and r.random() < 0.2):
            fields.append(("spacePartitioningConfig", self.space_partitioning()))
        return self.finish(fields, ("strategy", "timeSlicingConfig", "spacePartitioningConfig"))

    def burst(self) -> Any:
        r = self.r
        fields = Pairs()
        for name in ("ingressBurst", "egressBurst"):
            if r.random() < 0.7:
                fields.append((name, r.choice([0, 1, 8, 2**35 - 1, 2**35, 2**64 - 1, 2**64, -1])))
        return self.finish(fields, ("ingressBurst", "egressBurst"))

    def parameters(self) -> Any:
        """One entry's opaque.parameters for this driver (the gpu profile's kind mostly)."""
        r = self.r
        x = r.random()
        if x < 0.04:
            return self.non_object()
        if x < 0.06:
            return {}
        net = x < 0.14
        fields = Pairs()
        api = NET_API if net else GPU_API
        if r.random() < 0.95:
            fields.append(("apiVersion", self.pick(
                (14, lambda: api), (1, lambda: NET_API if api == GPU_API else GPU_API),
                (1, lambda: r.choice([None, "", "v1alpha1", api.upper(), 5, f"{api}/x"])),
            )))  # fmt: skip
        kind, other = ("NetConfig", "GpuConfig") if net else ("GpuConfig", "NetConfig")
        if r.random() < 0.95:
            fields.append(("kind", self.pick(
                (14, lambda: kind), (1, lambda: other),
                (1, lambda: r.choice([None, "", kind.lower(), "ResourceClaim", 1])),
            )))  # fmt: skip
        if net:
            if r.random() < 0.8:
                fields.append(("bwBurst", self.burst()))
        elif r.random() < 0.9:
            fields.append(("sharing", self.sharing()))
        return self.finish(fields, ("apiVersion", "kind", "sharing"))

    # -- the claim -----------------------------------------------------------------------

    def entry(self, driver: str) -> tuple[Any, str | None]:
        """(config entry, text of its parameters when it is this driver's)."""
        r = self.r
        requests = self.pick(
            (8, lambda: None), (3, lambda: ["gpu"]), (1, lambda: ["gpu", "other/sub"]),
            (0.3, lambda: r.choice(["gpu", [1], {}, [None]])),
        )  # fmt: skip
        x = r.random()
        if x < 0.06:  # an entry of odd shape
            odd = r.choice([
                None, {}, {"opaque": None}, {"opaque": {}}, {"opaque": {"driver": driver}},
                {"opaque": {"driver": driver, "parameters": None}},
                {"opaque": {"driver": None, "parameters": {"apiVersion": GPU_API}}},
                {"Opaque": {"driver": driver, "parameters": {}}},
                {"opaque": {"Driver": driver, "parameters": {}}},
                {"opaque": {"driver": driver, "Parameters": {}}},
                {"opaque": {"driver": 5, "parameters": {}}}, {"opaque": 5}, 5, "opaque",
                {"opaque": {"driver": [driver], "parameters": {}}},
            ])  # fmt: skip
            return odd, None
        ours = x < 0.75
        params = self.parameters()
        opaque = Pairs([("driver", driver if ours else OTHER_DRIVER), ("parameters", params)])
        if r.random() < 0.2:
            r.shuffle(opaque)
        entry = Pairs([("opaque", opaque)])
        if requests is not None:
            entry.insert(0, ("requests", requests))
        return entry, emit(params) if ours else None

    def config(self, driver: str) -> tuple[Any, list[str]]:
        """(config list or what stands in its place, texts of this driver's parameters)."""
        r = self.r
        x = r.random()
        if x < 0.04:
            return r.choice([None, [], {}, "config", [[]]]), []
        entries, ours = [], []
        for _ in range(r.choice([1, 1, 1, 2, 2, 3, 4])):
            entry, params = self.entry(driver)
            entries.append(entry)
            if params is not None:
                ours.append(params)
        return entries, ours

    @staticmethod
    def request(version: str) -> dict[str, Any]:
        if version == "v1beta1":
            return {"name": "gpu", "deviceClassName": "gpu.example.com"}
        return {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}

    def obj(self, kind: str, version: str, name: str, config: Any, *, old: bool) -> Pairs:
        """The object: its config list where the kind keeps it."""
        devices = Pairs([("requests", [self.request(version)])])
        if config is not ABSENT:
            devices.append(("config", config))
        spec = Pairs([("devices", devices)])
        meta: dict[str, Any] = {"name": name, "namespace": "differential", "uid": str(self.uuid())}
        if not old:
            meta["finalizers"] = ["resource.kubernetes.io/delete-protection"]
        if kind == "ResourceClaimTemplate":
            spec = Pairs([("spec", spec)])
        return Pairs([
            ("apiVersion", f"resource.k8s.io/{version}"), ("kind", kind), ("metadata", meta),
            ("spec", spec),
        ])  # fmt: skip

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(int=self.r.getrandbits(128), version=4)

    def case(self, index: int, profile: str, driver: str) -> Case:
        r = self.r
        operation = "CREATE" if r.random() < 0.7 else "UPDATE"
        config = self.config(driver)[0] if r.random() < 0.97 else ABSENT
        old_config: Any = None
        if operation == "UPDATE":
            # The apiserver refuses spec changes of claims and templates, so a real UPDATE
            # carries the stored config unchanged; the other is synthetic.
            same = r.random() < 0.5
            old_config = config if same else self.config(driver)[0]
        return self.review(
            f"{profile}/{index}", profile, driver, operation, config=config, old_config=old_config
        )

    def review(
        self, name: str, profile: str, driver: str, operation: str, *, config: Any, old_config: Any
    ) -> Case:
        """The AdmissionReview of ``operation`` on a claim or template whose config list is
        ``config`` (``old_config`` for the old object of an UPDATE)."""
        r = self.r
        plural = r.choice(list(KINDS))
        kind, version = KINDS[plural], r.choice(VERSIONS)
        index = name.rpartition("/")[2]
        name = f"c{index}"
        config_text = None if config is ABSENT else emit(config)
        old_text = None
        if operation == "UPDATE":
            old_text = None if old_config is ABSENT else emit(old_config)
        ours = _parameters_of(config, driver)
        gvr = {"group": "resource.k8s.io", "version": version, "resource": plural}
        gvk = {"group": "resource.k8s.io", "version": version, "kind": kind}
        request = Pairs([
            ("uid", str(self.uuid())), ("kind", gvk), ("resource", gvr),
            ("requestKind", gvk), ("requestResource", gvr), ("name", name),
            ("namespace", "differential"), ("operation", operation),
            ("userInfo", {"username": "differential", "groups": ["system:authenticated"]}),
            ("object", self.obj(kind, version, name, config, old=False)),
            ("oldObject", None if operation == "CREATE"
             else self.obj(kind, version, name, old_config, old=True)),
            ("dryRun", False),
            ("options", {"apiVersion": "meta.k8s.io/v1",
                         "kind": "CreateOptions" if operation == "CREATE" else "UpdateOptions"}),
        ])  # fmt: skip
        review = Pairs(
            [
                ("apiVersion", "admission.k8s.io/v1"),
                ("kind", "AdmissionReview"),
                ("request", request),
            ]
        )
        return Case(
            name=f"{profile}/{index}",
            profile=profile,
            driver=driver,
            operation=operation,
            body=emit(review).encode(),
            config_text=config_text,
            old_config_text=old_text,
            our_parameters=tuple(ours),
        )


def _parameters_of(config: Any, driver: str) -> list[str]:
    """The text of each ``opaque.parameters`` of ``driver`` in a generated config list."""
    found = []
    for entry in config if isinstance(config, list) else []:
        fields = dict(entry) if isinstance(entry, dict | Pairs) else {}
        opaque = fields.get("opaque")
        opaque = dict(opaque) if isinstance(opaque, dict | Pairs) else {}
        if opaque.get("driver") == driver and "parameters" in opaque:
            found.append(emit(opaque["parameters"]))
    return found


class _Absent:
    def __repr__(self) -> str:
        return "ABSENT"


#: The config list left out of the object altogether.
ABSENT: Any = _Absent()


#: Hand-written parameters, one or more per class of difference the first run found, so
#: that each is tried whatever the seed (text, written as it is).
_G = f'"apiVersion":"{GPU_API}","kind":"GpuConfig"'
SEED_PARAMETERS = (
    f"{{{_G}}}",  # no sharing: upstream's webhook refuses, its kubelet plugin defaults it
    f'{{{_G},"sharing":null}}',
    f'{{{_G},"sharing":{{"strategy":"TimeSlicing","timeSlicingConfig":{{"interval":"Short"}},'
    '"spacePartitioningConfig":{"partitionCount":2}}}',  # the other strategy's settings
    f'{{{_G},"sharing":{{"strategy":"SpacePartitioning","timeSlicingConfig":{{}},'
    '"spacePartitioningConfig":{"partitionCount":2}}}',
    f'{{{_G},"sharing":{{"strategy":"TimeSlicing"}}}}',  # upstream crashes
    f'{{{_G},"sharing":{{"strategy":"SpacePartitioning","spacePartitioningConfig":null}}}}',
    f'{{{_G},"sharing":{{"strategy":"TimeSlicing","timeSlicingConfig":{{"interval":"Short"}}}},'
    '"sharing":{"strategy":"TimeSlicing","timeSlicingConfig":{"interval":"Short"}}}',  # repeated
    f'{{{_G},"sharing":{{"strategy":"TimeSlicing","timeSlicingConfig":{{"interval":"Short",'
    '"interval":"Long"}}}',
    f'{{{_G},"kind":"GpuConfig","sharing":{{"strategy":"TimeSlicing"}}}}',
    f'{{{_G},"sharing":{{"strategy":"SpacePartitioning","spacePartitioningConfig":'
    '{"partitionCount":9223372036854775808}}}',  # beyond Go's int
    f'{{{_G},"sharing":{{"strategy":"SpacePartitioning","spacePartitioningConfig":'
    '{"partitionCount":9223372036854775807}}}',
    f'{{{_G},"sharing":{{"strategy":"SpacePartitioning","spacePartitioningConfig":'
    '{"partitionCount":-9223372036854775809}}}',
    f'{{{_G},"sharing":{{"strategy":"SpacePartitioning","spacePartitioningConfig":'
    '{"partitionCount":null}}}',  # null: the zero value
    f'{{{_G},"sharing":{{"strategy":"TimeSlicing","timeSlicingConfig":{{"interval":null}}}}}}',
    f'{{{_G},"sharing":{{"strategy":null}}}}',
    f'{{"apiVersion":"{NET_API}","kind":"NetConfig","bwBurst":{{"ingressBurst":8}}}}',
    f'{{{_G},"Sharing":{{"strategy":"TimeSlicing"}}}}',  # wrong case
    f'{{"apiversion":"{GPU_API}","kind":"GpuConfig","sharing":{{"strategy":"TimeSlicing"}}}}',
    f'{{{_G},"sharing":{{"strategy":"TimeSlicing","timeSlicingConfig":{{"interval":"Long"}}}},'
    '"metadata":{}}',  # unknown field
    "{}",
    "[]",
    "null",
    '"GpuConfig"',
)


def seed_cases(profile: str, driver: str) -> list[Case]:
    """Each of :data:`SEED_PARAMETERS` as the only config of a CREATE and of an UPDATE that
    keeps it."""
    gen = Generator(0)
    cases = []
    for index, text in enumerate(SEED_PARAMETERS):
        json.loads(text, object_pairs_hook=list)  # a typo here must not pass as a "case"
        config = [{"opaque": {"driver": driver, "parameters": Raw(text)}}]
        for operation in ("CREATE", "UPDATE"):
            name = f"{profile}/seed-{index}-{operation.lower()}"
            cases.append(
                gen.review(name, profile, driver, operation, config=config, old_config=config)
            )
    return cases


def generate(seed: int, count: int, profile: str, driver: str) -> list[Case]:
    """The seed cases, then ``count`` random ones, for ``profile``'s webhook serving ``driver``."""
    gen = Generator(seed)
    return [*seed_cases(profile, driver), *(gen.case(i, profile, driver) for i in range(count))]
