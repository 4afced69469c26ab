"""Model round trips, immutability, quantities, validation limits and version conversion."""

from __future__ import annotations

import copy
import dataclasses
from fractions import Fraction
from typing import Any

import pytest

from drakit.allocator import (
    Device,
    DeviceAttribute,
    ModelError,
    Quantity,
    QuantityError,
    ResourceClaim,
    ResourceSlice,
    ValidationError,
    check_resource_slice,
    to_v1,
    validate_device_class,
    validate_resource_claim,
    validate_resource_slice,
    with_api_defaults,
)
from drakit.allocator.holdings import decode_claim
from drakit.allocator.model import AllocationResult, DeviceClass

SLICE: dict[str, Any] = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceSlice",
    "metadata": {"name": "node-1-gpu", "uid": "u1", "labels": {"a": "b"}},
    "spec": {
        "driver": "gpu.example.com",
        "pool": {"name": "node-1", "generation": 3, "resourceSliceCount": 1},
        "nodeName": "node-1",
        "devices": [
            {
                "name": "gpu-0",
                "attributes": {
                    "model": {"string": "a100"},
                    "gpu.example.com/index": {"int": 0},
                    "fw": {"version": "1.2.3"},
                    "links": {"ints": [1, 2]},
                    "ok": {"bool": True},
                },
                "capacity": {
                    "memory": {"value": "80Gi"},
                    "bw": {
                        "value": "10G",
                        "requestPolicy": {"default": "1G", "validRange": {"min": "1G"}},
                    },
                },
                "allowMultipleAllocations": True,
                "taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}],
                "consumesCounters": [{"counterSet": "mem", "counters": {"m": {"value": "1"}}}],
                "futureField": {"x": [1, 2]},
            }
        ],
    },
}

CLAIM: dict[str, Any] = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaim",
    "metadata": {"name": "c", "namespace": "ns", "uid": "u"},
    "spec": {
        "devices": {
            "requests": [
                {
                    "name": "a",
                    "exactly": {
                        "deviceClassName": "gpu",
                        "count": 2,
                        "selectors": [{"cel": {"expression": "true"}}],
                        "tolerations": [{"key": "k", "operator": "Exists"}],
                    },
                },
                {"name": "b", "firstAvailable": [{"name": "x", "deviceClassName": "gpu"}]},
            ],
            "constraints": [{"requests": ["a"], "matchAttribute": "gpu.example.com/numa"}],
            "config": [
                {
                    "requests": ["a"],
                    "opaque": {"driver": "gpu.example.com", "parameters": {"k": [1, {"z": None}]}},
                }
            ],
        }
    },
    "status": {
        "allocation": {
            "devices": {
                "results": [
                    {
                        "request": "a",
                        "driver": "gpu.example.com",
                        "pool": "p",
                        "device": "d",
                        "shareID": "s",
                        "consumedCapacity": {"bw": "1G"},
                    }
                ]
            },
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n"]}]}
                ]
            },
        },
        "reservedFor": [{"resource": "pods", "name": "p", "uid": "pu"}],
    },
}


def test_slice_round_trips_without_loss_including_unknown_fields() -> None:
    assert ResourceSlice.from_dict(SLICE).to_dict() == SLICE


def test_claim_round_trips_without_loss() -> None:
    assert ResourceClaim.from_dict(CLAIM).to_dict() == CLAIM


def test_from_dict_does_not_modify_its_input() -> None:
    before = copy.deepcopy(SLICE)
    ResourceSlice.from_dict(SLICE)
    assert before == SLICE


def test_model_objects_are_immutable_and_hashable() -> None:
    s = ResourceSlice.from_dict(SLICE)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.spec.driver = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        s.spec.devices[0].attributes["x"] = DeviceAttribute.of(1)  # type: ignore[index]
    assert isinstance(s.spec.devices, tuple)
    assert hash(s) == hash(ResourceSlice.from_dict(SLICE))


def test_typed_attributes_are_parsed() -> None:
    d = ResourceSlice.from_dict(SLICE).spec.devices[0]
    assert d.attributes["model"] == DeviceAttribute("string", "a100")
    assert d.attributes["fw"].kind == "version"
    assert d.attributes["links"].value == (1, 2)
    assert d.attributes["links"].is_list
    assert d.capacity["memory"].value == Quantity.parse("80Gi")


@pytest.mark.parametrize(
    ("patch", "field"),
    [
        ({"driver": 5}, "spec.driver"),
        (
            {"pool": {"name": "p", "generation": "x", "resourceSliceCount": 1}},
            "spec.pool.generation",
        ),
        (
            {"devices": [{"name": "d", "attributes": {"a": {"int": 1, "bool": True}}}]},
            "spec.devices[0].attributes.a",
        ),
        (
            {"devices": [{"name": "d", "capacity": {"m": {"value": "12Q"}}}]},
            "spec.devices[0].capacity.m.value",
        ),
        ({"devices": "nope"}, "spec.devices"),
    ],
)
def test_malformed_input_names_the_field(patch: dict[str, Any], field: str) -> None:
    data = copy.deepcopy(SLICE)
    data["spec"].update(patch)
    with pytest.raises(ModelError) as info:
        ResourceSlice.from_dict(data)
    assert info.value.field == field


def test_missing_required_field_is_named() -> None:
    with pytest.raises(ModelError) as info:
        ResourceSlice.from_dict({"metadata": {"name": "x"}})
    assert info.value.field == "spec"


def test_api_defaults_are_applied_idempotently() -> None:
    raw = copy.deepcopy(CLAIM)
    raw["spec"]["devices"]["requests"][0]["exactly"].pop("count")
    claim = with_api_defaults(ResourceClaim.from_dict(raw))
    exact = claim.spec.devices.requests[0].exactly
    assert exact is not None
    assert (exact.allocation_mode, exact.count) == ("ExactCount", 1)
    assert exact.tolerations[0].operator == "Exists"
    sub = claim.spec.devices.requests[1].first_available[0]
    assert (sub.allocation_mode, sub.count) == ("ExactCount", 1)
    assert with_api_defaults(claim) == claim


def test_with_allocation_replaces_status_allocation() -> None:
    claim = ResourceClaim.from_dict(CLAIM)
    cleared = claim.with_allocation(None)
    assert cleared.status.allocation is None
    assert cleared.with_allocation(claim.status.allocation) == claim


# --------------------------------------------------------------------------- quantities


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1", 1),
        ("1Ki", 1024),
        ("1Mi", 1024**2),
        ("1.5Gi", 3 * 2**29),
        ("500m", Fraction(1, 2)),
        ("1k", 1000),
        ("1e3", 1000),
        ("1E3", 1000),
        ("-2", -2),
        ("+3", 3),
        (".5", Fraction(1, 2)),
        ("1n", Fraction(1, 10**9)),
        ("2u", Fraction(2, 10**6)),
        ("1.5", Fraction(3, 2)),
    ],
)
def test_quantity_parses_exactly(text: str, value: Fraction | int) -> None:
    assert Quantity.parse(text).value == value


@pytest.mark.parametrize("text", ["", "1Gb", "abc", "1.2.3", " 1", "1 Gi", "--1"])
def test_quantity_rejects_malformed_text(text: str) -> None:
    with pytest.raises(QuantityError):
        Quantity.parse(text)


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("1024", "1024"),
        ("1Gi", "1Gi"),
        ("1024Mi", "1Gi"),
        ("1536Mi", "1536Mi"),
        ("1000", "1k"),
        ("1500m", "1500m"),
        ("0.5", "500m"),
        ("1e3", "1e3"),
        ("0", "0"),
        ("1.5Gi", "1536Mi"),
        ("0.5Ki", "512"),
        ("-1Ki", "-1Ki"),
    ],
)
def test_quantity_canonical_form(text: str, canonical: str) -> None:
    assert Quantity.parse(text).canonical() == canonical


def test_quantity_rounds_up_to_nano_precision() -> None:
    assert Quantity.parse("0.0000000001").value == Fraction(1, 10**9)


def test_quantity_equality_is_numeric() -> None:
    assert Quantity.parse("1Ki") == Quantity.parse("1024")
    assert Quantity.parse("1Gi") > Quantity.parse("1G")
    assert Quantity.parse("1Gi").text == "1Gi"


# --------------------------------------------------------------------------- validation


def _slice(**spec: Any) -> ResourceSlice:
    data = copy.deepcopy(SLICE)
    data["spec"].update(spec)
    return ResourceSlice.from_dict(data)


def test_valid_slice_has_no_errors() -> None:
    assert validate_resource_slice(_slice(devices=[{"name": "d"}])) == []


def test_slice_limit_is_128_devices() -> None:
    many = [{"name": f"d{i}"} for i in range(129)]
    errors = validate_resource_slice(_slice(devices=many))
    assert [e.field for e in errors] == ["spec.devices"]
    assert validate_resource_slice(_slice(devices=many[:128])) == []


def test_slice_limit_is_64_devices_with_taints() -> None:
    many = [{"name": f"d{i}", "taints": [{"key": "k", "effect": "NoSchedule"}]} for i in range(65)]
    errors = validate_resource_slice(_slice(devices=many))
    assert errors[0].field == "spec.devices"
    assert "64" in errors[0].reason


def test_validation_error_names_object_field_and_reason() -> None:
    s = _slice(devices=[{"name": "Bad_Name", "attributes": {"9bad": {"int": 1}}}])
    with pytest.raises(ValidationError) as info:
        check_resource_slice(s)
    fields = info.value.fields
    assert "spec.devices[0].name" in fields
    assert "spec.devices[0].attributes['9bad']" in fields
    assert info.value.errors[0].object == "ResourceSlice node-1-gpu"
    assert str(info.value).startswith("ResourceSlice node-1-gpu: spec.devices[0]")


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"nodeName": None, "allNodes": None}, "spec"),
        ({"allNodes": True}, "spec"),
        ({"pool": {"name": "", "generation": 0, "resourceSliceCount": 1}}, "spec.pool.name"),
        (
            {"pool": {"name": "p", "generation": -1, "resourceSliceCount": 1}},
            "spec.pool.generation",
        ),
        (
            {"pool": {"name": "p", "generation": 0, "resourceSliceCount": 0}},
            "spec.pool.resourceSliceCount",
        ),
        ({"driver": "Not_A_Domain"}, "spec.driver"),
        (
            {"devices": [{"name": "d", "attributes": {"v": {"version": "1.2"}}}]},
            "spec.devices[0].attributes['v'].version",
        ),
        (
            {"devices": [{"name": "d", "attributes": {"s": {"string": "x" * 65}}}]},
            "spec.devices[0].attributes['s'].string",
        ),
        ({"devices": [{"name": "d"}, {"name": "d"}]}, "spec.devices[1].name"),
        ({"devices": [{"name": "d", "nodeName": "n"}]}, "spec.devices[0]"),
        (
            {
                "devices": [
                    {
                        "name": "d",
                        "capacity": {"c": {"value": "1", "requestPolicy": {"default": "1"}}},
                    }
                ]
            },
            "spec.devices[0].capacity['c'].requestPolicy",
        ),
        (
            {"devices": [{"name": "d", "bindingConditions": ["a", "b", "c", "d", "e"]}]},
            "spec.devices[0].bindingConditions",
        ),
        ({"sharedCounters": [{"name": "s", "counters": {"c": {"value": "1"}}}]}, "spec"),
    ],
)
def test_slice_rule_violations_are_reported(spec: dict[str, Any], field: str) -> None:
    errors = validate_resource_slice(_slice(**spec))
    assert field in [e.field for e in errors], errors


def test_attribute_and_capacity_total_limit() -> None:
    attrs = {f"a{i}": {"int": i} for i in range(33)}
    errors = validate_resource_slice(_slice(devices=[{"name": "d", "attributes": attrs}]))
    assert any("32" in e.reason for e in errors)


def test_claim_validation() -> None:
    raw = copy.deepcopy(CLAIM)
    raw["spec"]["devices"]["requests"][0]["exactly"]["count"] = 0
    raw["spec"]["devices"]["constraints"] = [{"requests": ["zzz"], "matchAttribute": "numa"}]
    errors = validate_resource_claim(ResourceClaim.from_dict(raw))
    fields = [e.field for e in errors]
    assert "spec.devices.requests[0].exactly.count" in fields
    assert "spec.devices.constraints[0].requests[0]" in fields
    assert "spec.devices.constraints[0].matchAttribute" in fields


def test_claim_request_needs_exactly_or_first_available() -> None:
    raw = copy.deepcopy(CLAIM)
    raw["spec"]["devices"]["requests"][0].pop("exactly")
    errors = validate_resource_claim(ResourceClaim.from_dict(raw))
    assert "spec.devices.requests[0]" in [e.field for e in errors]


def test_class_validation_compiles_cel() -> None:
    dc = DeviceClass.from_dict(
        {
            "metadata": {"name": "c"},
            "spec": {"selectors": [{"cel": {"expression": "device.driver =="}}]},
        }
    )
    assert validate_device_class(dc) == []  # compiling is opt-in
    errors = validate_device_class(dc, compile_cel=True)
    assert [e.field for e in errors] == ["spec.selectors[0].cel.expression"]
    assert "compilation failed" in errors[0].reason


def test_class_validation_requires_cel() -> None:
    dc = DeviceClass.from_dict({"metadata": {"name": "c"}, "spec": {"selectors": [{}]}})
    assert [e.field for e in validate_device_class(dc)] == ["spec.selectors[0].cel"]


# --------------------------------------------------------------------------- conversion


def test_v1beta1_slice_converts_to_v1() -> None:
    beta = {
        "apiVersion": "resource.k8s.io/v1beta1",
        "kind": "ResourceSlice",
        "metadata": {"name": "s"},
        "spec": {
            "driver": "d.io",
            "nodeName": "",
            "allNodes": True,
            "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {
                    "name": "x",
                    "basic": {"attributes": {"a": {"int": 1}}, "capacity": {"m": {"value": "1"}}},
                }
            ],
        },
    }
    v1 = to_v1(beta)
    assert v1["apiVersion"] == "resource.k8s.io/v1"
    assert "nodeName" not in v1["spec"]
    assert v1["spec"]["devices"][0] == {
        "name": "x",
        "attributes": {"a": {"int": 1}},
        "capacity": {"m": {"value": "1"}},
    }
    assert ResourceSlice.from_dict(v1).spec.all_nodes is True
    assert beta["spec"]["devices"][0].get("basic")  # input untouched


def test_v1beta1_claim_requests_move_under_exactly() -> None:
    beta = {
        "apiVersion": "resource.k8s.io/v1beta1",
        "kind": "ResourceClaim",
        "metadata": {"name": "c"},
        "spec": {
            "devices": {
                "requests": [
                    {"name": "a", "deviceClassName": "gpu", "count": 2, "adminAccess": True},
                    {"name": "b", "firstAvailable": [{"name": "x", "deviceClassName": "gpu"}]},
                ]
            }
        },
    }
    v1 = to_v1(beta)
    reqs = v1["spec"]["devices"]["requests"]
    assert reqs[0] == {
        "name": "a",
        "exactly": {"deviceClassName": "gpu", "count": 2, "adminAccess": True},
    }
    assert reqs[1] == {"name": "b", "firstAvailable": [{"name": "x", "deviceClassName": "gpu"}]}


def test_v1beta2_only_changes_api_version() -> None:
    beta2 = dict(SLICE, apiVersion="resource.k8s.io/v1beta2")
    assert to_v1(beta2) == SLICE


def test_unknown_resource_version_is_refused() -> None:
    with pytest.raises(ModelError):
        to_v1({"apiVersion": "resource.k8s.io/v9", "kind": "ResourceSlice"})


def test_device_helpers() -> None:
    d = Device(name="x", attributes={"a": DeviceAttribute.of([1, 2])})  # type: ignore[arg-type]
    assert d.uses_advanced_features()
    assert DeviceAttribute.of(True).kind == "bool"
    assert AllocationResult().to_dict() == {}


def _nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {"leaf": 1}
    for _ in range(depth):
        value = {"n": value}
    return value


def _claim_with_opaque(parameters: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "c", "namespace": "ns", "uid": "u"},
        "spec": {
            "devices": {
                "requests": [{"name": "r", "exactly": {"deviceClassName": "c"}}],
                "config": [{"opaque": {"driver": "d", "parameters": parameters}}],
            }
        },
    }


def test_opaque_parameters_nested_600_deep_fail_as_a_model_error_naming_the_field():
    with pytest.raises(ModelError) as raised:
        ResourceClaim.from_dict(_claim_with_opaque(_nested(600)))
    assert raised.value.field == "spec.devices.config[0].opaque.parameters"
    assert "nested more than 64 levels" in raised.value.reason


def test_unknown_field_nested_too_deep_fails_as_a_model_error_naming_the_field():
    data = _claim_with_opaque({})
    data["spec"]["future"] = [_nested(600)]
    with pytest.raises(ModelError) as raised:
        ResourceClaim.from_dict(data)
    assert raised.value.field == "spec.future"


def test_opaque_parameters_within_the_depth_limit_round_trip():
    data = _claim_with_opaque(_nested(60))
    assert ResourceClaim.from_dict(data).to_dict()["spec"] == data["spec"]


def test_decode_claim_of_an_undecodable_allocated_claim_keeps_what_its_allocation_holds():
    data = _claim_with_opaque(_nested(600))
    result = {"request": "r", "driver": "d", "pool": "p", "device": "gpu-0", "shareID": "s1",
              "consumedCapacity": {"memory": "1Gi"}}  # fmt: skip
    consumer = {"resource": "pods", "name": "p", "uid": "pu"}
    data["status"] = {
        "allocation": {
            "devices": {"results": [result], "config": data["spec"]["devices"]["config"]}
        },
        "reservedFor": [consumer],
    }
    decoded = decode_claim(data)
    assert decoded.error is not None and not decoded.complete
    assert decoded.model is not None
    assert decoded.model.key == "ns/c" and decoded.model.uid == "u"
    (held,) = decoded.model.status.allocation.devices.results  # type: ignore[union-attr]
    assert (held.device, held.share_id, str(held.consumed_capacity["memory"])) == (
        "gpu-0", "s1", "1Gi",
    )  # fmt: skip
    assert [r.uid for r in decoded.model.status.reserved_for] == ["pu"]


def test_decode_claim_of_an_undecodable_unallocated_claim_has_no_model():
    decoded = decode_claim(_claim_with_opaque(_nested(600)))
    assert decoded.model is None and decoded.error is not None
