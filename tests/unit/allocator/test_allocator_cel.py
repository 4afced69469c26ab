"""Kubernetes CEL for selectors: the device variable, libraries, errors, cost, cache."""

from __future__ import annotations

from typing import Any

import pytest

from drakit.allocator.cel import (
    CELCompileError,
    CELRuntimeError,
    compile_selector,
    device_context,
)
from drakit.allocator.cel.rewrite import estimate_cost, rewrite
from drakit.allocator.model import DeviceAttribute, DeviceCapacity
from drakit.allocator.quantity import Quantity

DRIVER = "gpu.example.com"


@pytest.fixture(scope="module")
def ctx() -> Any:
    attrs = {
        "model": DeviceAttribute("string", "a100"),
        "index": DeviceAttribute("int", 3),
        "nv": DeviceAttribute("bool", True),
        "fw": DeviceAttribute("version", "2.1.0-rc.1+build"),
        "fws": DeviceAttribute("versions", ("1.0.0", "2.0.0")),
        "numas": DeviceAttribute("ints", (0, 1)),
        "tags": DeviceAttribute("strings", ("a", "b")),
        "topo.io/pcie": DeviceAttribute("string", "0000:3b"),
        "broken": DeviceAttribute("version", "not-semver"),
    }
    caps = {"memory": DeviceCapacity(value=Quantity.parse("16Gi"))}
    return device_context(DRIVER, attrs, caps, True)


def ev(expr: str, ctx: Any) -> bool:
    return compile_selector(expr).matches(ctx)


# --------------------------------------------------------------------------- device variable


@pytest.mark.parametrize(
    "expr",
    [
        'device.driver == "gpu.example.com"',
        "device.allowMultipleAllocations",
        'device.attributes["gpu.example.com"].model == "a100"',
        "device.attributes[device.driver].index == 3",
        'device.attributes["topo.io"].pcie == "0000:3b"',
        "device.attributes.topo_missing.size() == 0",
        'device.capacity["gpu.example.com"].memory == quantity("16Gi")',
        'device.attributes["gpu.example.com"].fws[1].major() == 2',
        'device.attributes["gpu.example.com"].tags == ["a", "b"]',
        'size(device.attributes["gpu.example.com"]) == 7',  # the invalid version is left out
    ],
)
def test_device_variable_exposes_driver_attributes_and_capacity(expr: str, ctx: Any) -> None:
    assert ev(expr, ctx)


def test_unqualified_names_belong_to_the_driver_domain(ctx: Any) -> None:
    assert not ev('"model" in device.attributes["topo.io"]', ctx)
    assert ev('"model" in device.attributes["gpu.example.com"]', ctx)


def test_unknown_domain_is_an_empty_map(ctx: Any) -> None:
    assert ev('device.attributes["nothing.io"] == {}', ctx)
    assert ev('device.capacity["nothing.io"].size() == 0', ctx)


def test_unknown_attribute_is_a_runtime_error_with_a_hint(ctx: Any) -> None:
    with pytest.raises(CELRuntimeError) as info:
        ev('device.attributes["gpu.example.com"].nope == 1', ctx)
    assert "no such key: nope" in str(info.value)
    assert "orValue" in str(info.value)
    assert info.value.expression.endswith("nope == 1")


def test_invalid_version_attribute_fails_when_read(ctx: Any) -> None:
    with pytest.raises(CELRuntimeError):
        ev('device.attributes["gpu.example.com"].broken.major() == 1', ctx)


def test_non_bool_result_is_a_compile_error_as_in_kubernetes() -> None:
    with pytest.raises(
        CELCompileError, match="must evaluate to bool or the unknown type, not string"
    ):
        compile_selector("device.driver")


def test_error_absorbing_logic(ctx: Any) -> None:
    assert ev('true || device.attributes["gpu.example.com"].nope', ctx)
    assert not ev('false && device.attributes["gpu.example.com"].nope', ctx)


# --------------------------------------------------------------------------- libraries

LIBRARY_CASES = {
    "quantity": [
        'quantity("1Ki") == quantity("1024")',
        'isQuantity("5M")',
        '!isQuantity("5MM")',
        'quantity("2").isGreaterThan(quantity("1"))',
        'quantity("1").isLessThan(quantity("2"))',
        'quantity("1").compareTo(quantity("1")) == 0',
        'quantity("1Mi").asInteger() == 1048576',
        'quantity("1.5").asApproximateFloat() == 1.5',
        'quantity("1").add(2) == quantity("3")',
        'quantity("3").sub(quantity("1")) == quantity("2")',
        'quantity("1.2").isInteger() == false',
        'sign(quantity("0")) == 0',
    ],
    "semver": [
        'semver("1.2.3").major() == 1',
        'semver("1.2.3").minor() == 2',
        'semver("1.2.3").patch() == 3',
        'semver("1.0.0-alpha.1").isLessThan(semver("1.0.0-alpha.2"))',
        'semver("1.0.0-2").isLessThan(semver("1.0.0-alpha"))',
        'semver("2.0.0").compareTo(semver("10.0.0")) == -1',
        'isSemver("1.0.0") && !isSemver("v1.0.0") && isSemver("v1.0", true)',
        'semver("01.2.3", true) == semver("1.2.3")',
        'device.attributes["gpu.example.com"].fw.isLessThan(semver("2.1.0"))',
    ],
    "lists": [
        "[1, 2, 3].isSorted()",
        '!["b", "a"].isSorted()',
        "[1, 2].sum() == 3",
        "[].sum() == 0",
        "[3, 1].min() == 1",
        "[3, 1].max() == 3",
        "[1, 2, 1].indexOf(1) == 0",
        "[1, 2, 1].lastIndexOf(1) == 2",
        "[1, 2].includes(2)",
        '"a".includes("a")',
        '["1.0.0", "2.0.0"].max() == "2.0.0"',
    ],
    "regex": [
        '"abc123".find("[0-9]+") == "123"',
        '"a1b2c3".findAll("[0-9]", 2) == ["1", "2"]',
        '"abc".find("x") == ""',
    ],
    "strings": [
        '"abc".charAt(3) == ""',
        '"aXb".lowerAscii() == "axb"',
        '"ab".upperAscii() == "AB"',
        '"a-b-c".replace("-", "+") == "a+b+c"',
        '"a,b,c".split(",", 2) == ["a", "b,c"]',
        '"hello".substring(2) == "llo"',
        '" a ".trim() == "a"',
        '["x", "y"].join() == "xy"',
        '"%s is %d".format(["x", 3]) == "x is 3"',
        '"%.2f".format([1.5]) == "1.50"',
        '"ab".indexOf("b") == 1',
        '"abab".lastIndexOf("ab") == 2',
    ],
    "sets": [
        "sets.contains([1, 2, 3], [3, 1])",
        "!sets.contains([1], [2])",
        "sets.equivalent([1, 1, 2], [2, 1])",
        "sets.intersects([1], [1, 5])",
    ],
    "ext lists": [
        "[[[1]], [[2, 3]]].flatten(2) == [1, 2, 3]",
        "lists.range(2) == [0, 1]",
        "[2, 1].sort() == [1, 2]",
        "[1, 2, 3].slice(0, 2) == [1, 2]",
        "[1, 1].distinct() == [1]",
        "[1, 2].reverse() == [2, 1]",
    ],
    "ip/cidr": [
        'ip("192.168.0.1").family() == 4',
        'ip("fe80::1").isLinkLocalUnicast()',
        'ip("0.0.0.0").isUnspecified()',
        'ip("8.8.8.8").isGlobalUnicast()',
        'cidr("10.0.0.0/8").containsIP("10.1.1.1")',
        'cidr("10.0.0.0/8").containsCIDR("10.1.0.0/16")',
        'cidr("10.1.2.3/8").masked() == cidr("10.0.0.0/8")',
        'cidr("10.0.0.0/8").prefixLength() == 8',
        'cidr("10.0.0.0/8").ip() == ip("10.0.0.0")',
        'ip.isCanonical("10.0.0.1")',
    ],
    "url": [
        'url("https://u@h:1/p?q=1").getScheme() == "https"',
        'url("https://h:1/p").getHostname() == "h"',
        'url("https://h/p%20x").getEscapedPath() == "/p%20x"',
        'url("https://h/p?a=1&a=2").getQuery() == {"a": ["1", "2"]}',
        'isURL("/relative")',
    ],
    "optional": [
        "optional.of(1).hasValue()",
        "!optional.none().hasValue()",
        '{"a": 1}.?a.value() == 1',
        '{"a": 1}.?b.orValue(2) == 2',
        "[1][?3].orValue(0) == 0",
        "optional.none().or(optional.of(5)).value() == 5",
    ],
    "format": [
        '!format.dns1123Label().validate("abc").hasValue()',
        'format.dns1123Label().validate("A_B").value().size() > 0',
        '!format.dns1035Label().validate("a1").hasValue()',
        'format.dns1035Label().validate("1a").hasValue()',
        '!format.dns1123Subdomain().validate("a.b").hasValue()',
        '!format.qualifiedName().validate("example.com/a_b").hasValue()',
        '!format.labelValue().validate("").hasValue()',
        '!format.uuid().validate("123e4567-e89b-12d3-a456-426614174000").hasValue()',
        '!format.byte().validate("aGk=").hasValue()',
        '!format.date().validate("2026-11-29").hasValue()',
        'format.date().validate("2026-13-01").hasValue()',
        '!format.datetime().validate("2026-11-29T10:00:00Z").hasValue()',
        '!format.uri().validate("https://example.com").hasValue()',
        '!format.dns1123LabelPrefix().validate("abc-").hasValue()',
        'format.named("uuid").hasValue() && !format.named("nope").hasValue()',
    ],
    "bind": ["cel.bind(x, 2, x * x) == 4", "cel.bind(x, [1, 2], cel.bind(y, x.size(), y == 2))"],
    "macros": [
        "[1, 2].all(x, x > 0)",
        "[1, 2].exists_one(x, x > 1)",
        "{'a': 1}.exists(k, k == 'a')",
    ],
}


@pytest.mark.parametrize(
    "expr",
    [e for exprs in LIBRARY_CASES.values() for e in exprs],
)
def test_kubernetes_library_function(expr: str, ctx: Any) -> None:
    assert ev(expr, ctx), expr


@pytest.mark.parametrize(
    "expr",
    [
        'quantity("x") == quantity("1")',
        'semver("1") == semver("1.0.0")',
        "[].max() == 1",
        '"abc".charAt(5) == ""',
        '"abc".substring(2, 1) == ""',
        "[1, 2].slice(1, 5) == []",
        'ip("::ffff:1.2.3.4").family() == 6',
        'cidr("nope").prefixLength() == 1',
        "lists.range(2000000).size() > 0",
        'quantity("1.5").asInteger() == 1',
        '"x".find(device.driver.substring(0, 0) + "(") == ""',
        "lists.range(49).includes(1)",
    ],
)
def test_library_errors_are_runtime_errors(expr: str, ctx: Any) -> None:
    with pytest.raises(CELRuntimeError):
        ev(expr, ctx)


# --------------------------------------------------------------------------- compile


def test_compile_error_quotes_expression_and_position() -> None:
    with pytest.raises(CELCompileError) as info:
        compile_selector('device.driver == "x" &&')
    text = str(info.value)
    assert "ERROR: <input>:1:24: Syntax error: mismatched input '<EOF>'" in text
    assert ' | device.driver == "x" &&\n | .......................^' in text


def test_compile_error_position_on_second_line() -> None:
    with pytest.raises(CELCompileError, match="<input>:2:7:"):
        compile_selector('device.driver == "x" &&\n  (1 +)')


def test_empty_expression_is_a_compile_error() -> None:
    with pytest.raises(CELCompileError, match="empty"):
        compile_selector("   ")


def test_too_long_expression_is_refused() -> None:
    with pytest.raises(CELCompileError, match="longer than"):
        compile_selector("true && " * 2000 + "true")


def test_compile_cache_returns_the_same_program() -> None:
    assert compile_selector("1 < 2") is compile_selector("1 < 2")


def test_compile_errors_are_not_cached() -> None:
    for _ in range(2):
        with pytest.raises(CELCompileError):
            compile_selector("1 +")


# --------------------------------------------------------------------------- cost


def test_deeply_nested_comprehensions_run_guarded_and_answer_like_kubernetes() -> None:
    expr = "[1].all(a, [1].all(b, [1].all(c, [1].all(d, true))))"
    assert estimate_cost(expr) > 1_000_000
    selector = compile_selector(expr)
    assert selector.risky
    assert selector.matches(device_context("d", {}, {})) is True


def test_cost_bound_accepts_ordinary_selectors() -> None:
    expr = 'device.attributes["gpu.example.com"].numas.exists(n, n == 1)'
    assert estimate_cost(expr) < 1_000_000
    assert compile_selector(expr).cost == estimate_cost(expr)


# --------------------------------------------------------------------------- rewrite


def test_rewrite_leaves_plain_expressions_alone() -> None:
    assert rewrite("1 + 2 == 3") == "1+2==3"


def test_rewrite_of_optional_and_bind_keeps_meaning(ctx: Any) -> None:
    assert ev(
        'cel.bind(d, device.attributes["gpu.example.com"], d.?model.orValue("") == "a100")', ctx
    )
    assert "_dra_opt" in rewrite("a.?b")
    assert rewrite("cel.bind(x, 1, x)") == "([1].map(x,x)[0])"


# --------------------------------------------------------------------------- constant folding


def test_constant_quantity_and_semver_calls_become_literals_of_the_same_value() -> None:
    from drakit.allocator.cel.library import CONSTANT_FOLDERS  # noqa: PLC0415

    core = rewrite('quantity("1Mi") == quantity("1048576") && semver("1.2.3+b").major() == 1',
                   fold=CONSTANT_FOLDERS)  # fmt: skip
    assert "quantity(" not in core
    assert "semver(" not in core
    assert '"1048576/1"' in core


def test_constant_that_does_not_parse_keeps_its_call_and_its_runtime_error(ctx: Any) -> None:
    from drakit.allocator.cel.library import CONSTANT_FOLDERS  # noqa: PLC0415

    assert 'quantity("1 Gi")' in rewrite('quantity("1 Gi").isInteger()', fold=CONSTANT_FOLDERS)
    with pytest.raises(CELRuntimeError):
        ev('quantity("1 Gi").isInteger()', ctx)


def test_folded_constants_compare_as_the_called_functions(ctx: Any) -> None:
    assert ev(f'device.capacity["{DRIVER}"].memory.isGreaterThan(quantity("1Mi"))', ctx)
    assert ev('quantity("2k") == quantity("2000")', ctx)
    assert ev(f'device.attributes["{DRIVER}"].fw.isLessThan(semver("2.1.0"))', ctx)
