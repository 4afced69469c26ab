"""A selector binds only the parts of the device it reads, and answers as with the whole."""

from __future__ import annotations

from typing import Any

import pytest
from differential.cel_cases import FAMILIES

from allocator.cel import CELError, DeviceVariables, Selector, compile_selector, device_context
from allocator.cel.projection import ALL, projection_of
from allocator.model import DeviceAttribute, DeviceCapacity
from allocator.quantity import Quantity

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
