"""A selector binds only the parts of the device it reads, and answers as with the whole."""

from __future__ import annotations

from typing import Any

import pytest
from differential.cel_cases import FAMILIES

from drakit.allocator.cel import (
    CELError,
    DeviceVariables,
    Selector,
    compile_selector,
    device_context,
)
from drakit.allocator.cel.projection import ALL, projection_of
from drakit.allocator.model import DeviceAttribute, DeviceCapacity
from drakit.allocator.quantity import Quantity

DRIVER = "gpu.example.com"


def _devices() -> list[Any]:
    """Whole-device dicts, each followed by the same device as lazy DeviceVariables."""
    out: list[Any] = []
    for args in _DEVICE_ARGS:
        out += [device_context(*args), DeviceVariables(*args)]
    return out


_DEVICE_ARGS: list[tuple[Any, ...]] = []


def _device_args() -> None:
    full = (
        DRIVER,
        {
            "model": DeviceAttribute("string", "a100"),
            "index": DeviceAttribute("int", 3),
            "healthy": DeviceAttribute("bool", True),
            "fw": DeviceAttribute("version", "2.1.0"),
            "numas": DeviceAttribute("ints", (0, 1)),
            "tags": DeviceAttribute("strings", ("a", "b")),
            "addr": DeviceAttribute("string", "10.0.0.5"),
            "topo.io/pcie": DeviceAttribute("string", "0000:3b"),
            "broken": DeviceAttribute("version", "not-semver"),
            "bad.io/fw": DeviceAttribute("version", "1.0"),  # a domain of one invalid version
        },
        {"memory": DeviceCapacity(value=Quantity.parse("16Gi"))},
        True,
    )
    sparse = (DRIVER, {"model": DeviceAttribute("string", "h100")}, {})
    other = ("other.example.com", {"index": DeviceAttribute("int", 4)}, {})
    # same as "sparse" to selectors that read only the model; index as int, bool
    twin = (DRIVER, {"model": DeviceAttribute("string", "h100"),
                     "index": DeviceAttribute("int", 1)}, {})  # fmt: skip
    flag = (DRIVER, {"model": DeviceAttribute("string", "h100"),
                     "index": DeviceAttribute("bool", True)}, {})  # fmt: skip
    _DEVICE_ARGS.extend([full, sparse, other, twin, flag, full, twin])


_device_args()


def _outcome(selector: Selector, context: Any) -> tuple[str, str]:
    try:
        return "answer", str(selector.matches(context))
    except CELError as exc:
        return type(exc).__name__, str(exc)


def _whole(selector: Selector) -> Selector:
    return Selector(selector.expression, selector.program, selector.cost, selector.risky)


_EXPRESSIONS = [
    expression
    for family, expressions in FAMILIES.items()
    if family not in ("type-errors", "cost")  # these never compile, or run in a child
    for expression in expressions
] + [
    f'device.driver == "{DRIVER}"',
    "device.allowMultipleAllocations",
    f'device.attributes["{DRIVER}"].model == "a100"',
    f'device.attributes["{DRIVER}"].?index.orValue(0) == 3',
    f'has(device.attributes["{DRIVER}"].fw) && device.attributes["{DRIVER}"].fw.major() == 2',
    f'device.attributes["{DRIVER}"].broken.major() == 2',
    f'device.attributes["{DRIVER}"].missing == 1',
    'device.attributes["topo.io"].pcie == "0000:3b"',
    'device.attributes["nowhere.io"].pcie == "x"',
    f'"model" in device.attributes["{DRIVER}"]',
    f'size(device.attributes["{DRIVER}"]) >= 1',
    f'device.attributes["{DRIVER}"].size() >= 1',
    "device.attributes[device.driver].index == 3",
    "device.attributes.topo_missing.size() == 0",
    'device.attributes.exists(d, d == "topo.io")',
    f'device.capacity["{DRIVER}"].memory.isGreaterThan(quantity("1Gi"))',
    f'device.capacity["{DRIVER}"].?memory.hasValue()',
    f'device.attributes["{DRIVER}"].model == "a100" && device.attributes["{DRIVER}"][?"index"]'
    ".orValue(0) == 3",
    "[1, 2].exists(device, device == 2)",
]


def _compiles(expression: str) -> bool:
    try:
        compile_selector(expression)
    except CELError:
        return False
    return True


@pytest.mark.parametrize("expression", [e for e in _EXPRESSIONS if _compiles(e)])
def test_projected_selector_answers_as_with_the_whole_device(expression: str) -> None:
    selector = compile_selector(expression)
    whole = _whole(selector)
    for context in _devices():  # in turn, so that answers kept for one device are reused
        assert _outcome(selector, context) == _outcome(whole, context)


def test_selector_of_the_driver_reads_only_the_driver() -> None:
    projection = projection_of(f'device.driver == "{DRIVER}"')
    assert projection is not None
    assert projection.scalars == {"driver"}
    assert projection.attributes == {}
    assert projection.capacity == {}


def test_selector_reading_named_ids_binds_only_those_ids() -> None:
    projection = projection_of(
        f'device.attributes["{DRIVER}"].fw.major() >= 1 && '
        f'device.capacity["{DRIVER}"].?memory.orValue(quantity("0")).isGreaterThan(quantity("1"))'
    )
    assert projection is not None
    assert projection.attributes == {DRIVER: {"fw"}}
    assert projection.capacity == {DRIVER: {"memory"}}
    view = projection.apply(_devices()[1])
    assert set(view["device"]["attributes"][DRIVER]) == {"fw"}
    assert "topo.io" not in view["device"]["attributes"]


def test_selector_using_a_domain_as_a_map_binds_the_whole_domain() -> None:
    projection = projection_of(f'"model" in device.attributes["{DRIVER}"]')
    assert projection is not None
    assert projection.attributes == {DRIVER: ALL}


def test_selector_indexing_domains_by_expression_binds_every_domain() -> None:
    projection = projection_of("device.attributes[device.driver].index == 3")
    assert projection is not None
    assert projection.attributes is ALL
    assert projection.scalars == {"driver"}


def test_selector_naming_device_otherwise_binds_the_whole_device() -> None:
    assert projection_of("[1, 2].exists(device, device == 2)") is None


def test_domain_missing_on_the_device_stays_missing() -> None:
    projection = projection_of('device.attributes["nowhere.io"].pcie == "x"')
    assert projection is not None
    assert projection.apply(_devices()[2]) == {"device": {"attributes": {}}}
    assert projection.apply(_devices()[3]) == {"device": {"attributes": {}}}


def test_lazy_device_variables_equal_the_whole_device_context() -> None:
    for args in _DEVICE_ARGS:
        lazy = DeviceVariables(*args)
        assert lazy.whole() == device_context(*args)
        assert dict(lazy) == device_context(*args)
    assert "bad.io" not in device_context(*_DEVICE_ARGS[0])["device"]["attributes"]


def test_devices_that_look_the_same_to_a_selector_share_its_answer() -> None:
    projection = projection_of(f'device.attributes["{DRIVER}"].model == "h100"')
    assert projection is not None
    devices = _devices()
    sparse, twin, flag = devices[2], devices[6], devices[8]
    assert projection.key(sparse) == projection.key(twin) == projection.key(flag)
    assert projection.key(devices[3]) == projection.key(sparse)  # lazy and whole alike


def test_values_of_different_types_never_share_an_answer() -> None:
    projection = projection_of(f'device.attributes["{DRIVER}"].?index.orValue(0) == 1')
    assert projection is not None
    devices = _devices()
    sparse, twin, flag = devices[2], devices[7], devices[9]
    keys = {projection.key(sparse), projection.key(twin), projection.key(flag)}
    assert len(keys) == 3
    selector = compile_selector(f'device.attributes["{DRIVER}"].?index.orValue(0) == 1')
    assert selector.matches(twin) is True
    assert _outcome(selector, flag) == _outcome(_whole(selector), flag)


# --------------------------------------------------------------------------- raw keys

_READS_FW_AND_MEMORY = (
    f'device.attributes["{DRIVER}"].?fw.orValue(semver("0.0.1")).major() >= 1 && '
    f'device.capacity["{DRIVER}"].?memory.orValue(quantity("0")).isGreaterThan(quantity("1"))'
)


def _lazy(attributes: dict[str, DeviceAttribute], memory: str = "16Gi",
          driver: str = DRIVER) -> DeviceVariables:  # fmt: skip
    return DeviceVariables(
        driver, attributes, {"memory": DeviceCapacity(value=Quantity.parse(memory))}
    )


def _projection(expression: str) -> Any:
    projection = projection_of(expression)
    assert projection is not None
    return projection


def test_devices_equal_in_what_a_selector_reads_share_a_raw_key() -> None:
    projection = _projection(_READS_FW_AND_MEMORY)
    fw = DeviceAttribute("version", "2.1.0")
    one = _lazy({"fw": fw, "addr": DeviceAttribute("string", "10.0.0.5")})
    other = _lazy({"fw": fw, "addr": DeviceAttribute("string", "10.0.0.6")}, memory="16384Mi")
    qualified = _lazy({f"{DRIVER}/fw": fw})
    assert projection.raw_key(one) is not None
    assert projection.raw_key(one) == projection.raw_key(other) == projection.raw_key(qualified)
    assert projection.raw_key(_lazy({"fw": DeviceAttribute("version", "2.1.1")})) != (
        projection.raw_key(one)
    )
    assert projection.raw_key(_lazy({"fw": fw}, memory="8Gi")) != projection.raw_key(one)


def test_equal_raw_keys_mean_equal_views() -> None:
    devices = [DeviceVariables(*args) for args in _DEVICE_ARGS] + [
        _lazy({"fw": DeviceAttribute("version", "2.1.0")}),
        _lazy({f"{DRIVER}/fw": DeviceAttribute("version", "2.1.0+build.7")}),
        _lazy({"fw": DeviceAttribute("versions", ("1.0.0", "2.0.0"))}),
        _lazy({"index": DeviceAttribute("int", 1)}, driver="other.example.com"),
        _lazy({f"{DRIVER}/index": DeviceAttribute("int", 1)}, driver="other.example.com"),
        _lazy({f"{DRIVER}/index": DeviceAttribute("bool", True)}, driver="other.example.com"),
    ]
    checked = 0
    for expression in [e for e in _EXPRESSIONS if _compiles(e)] + [_READS_FW_AND_MEMORY]:
        projection = projection_of(expression)
        if projection is None:
            continue
        by_key: dict[Any, Any] = {}
        for device in devices:
            key = projection.raw_key(device)
            if key is None:
                continue
            view = projection.apply(device)
            assert by_key.setdefault(key, view) == view, expression
            checked += 1
    assert checked > 50


def test_raw_key_defers_when_no_id_read_converts() -> None:
    projection = _projection(f'device.attributes["{DRIVER}"].?fw.hasValue()')
    # whether the domain is there depends on its other entries: the converted key decides
    invalid = DeviceAttribute("version", "not-semver")
    alone = _lazy({"fw": invalid})
    beside_model = _lazy({"fw": invalid, "model": DeviceAttribute("string", "a100")})
    no_fw = _lazy({"model": DeviceAttribute("string", "a100")})
    assert projection.raw_key(alone) is None
    assert projection.raw_key(beside_model) is None
    assert projection.raw_key(no_fw) is None
    assert projection.key(beside_model) == projection.key(no_fw) != projection.key(alone)


def test_raw_key_defers_when_an_id_is_spelled_bare_and_qualified() -> None:
    projection = _projection(f'device.attributes["{DRIVER}"].fw.major() == 2')
    both = _lazy({"fw": DeviceAttribute("version", "2.0.0"),
                  f"{DRIVER}/fw": DeviceAttribute("version", "3.0.0")})  # fmt: skip
    assert projection.raw_key(both) is None
    assert compile_selector(f'device.attributes["{DRIVER}"].fw.major() == 2').matches(both) is (
        _whole(compile_selector(f'device.attributes["{DRIVER}"].fw.major() == 2')).matches(both)
    )


def test_raw_key_defers_for_selectors_reading_whole_domains() -> None:
    device = _lazy({"fw": DeviceAttribute("version", "2.1.0")})
    assert _projection(f'"fw" in device.attributes["{DRIVER}"]').raw_key(device) is None
    assert _projection("device.attributes[device.driver].fw.major() == 2").raw_key(device) is None


def test_raw_keys_never_equal_converted_keys() -> None:
    for expression in [e for e in _EXPRESSIONS if _compiles(e)]:
        projection = projection_of(expression)
        if projection is None:
            continue
        for args in _DEVICE_ARGS:
            raw = projection.raw_key(DeviceVariables(*args))
            assert raw is None or raw != projection.key(DeviceVariables(*args))
