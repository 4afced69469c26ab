"""``<string>.format(<list>)`` as Kubernetes 1.37 (cel-go ext strings v2) has it.

The expected texts and messages were read from cel-go v0.29.2 (the version Kubernetes
1.37.2 pins) evaluating the same expressions; tests/differential checks the outcomes
against the reference allocator too.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from drakit.allocator.cel import CELCompileError, CELRuntimeError, compile_selector, device_context
from drakit.allocator.cel.strformat import FormatError, format_values, go_float_text
from drakit.allocator.model import DeviceAttribute

DRIVER = "gpu.example.com"
A = f'device.attributes["{DRIVER}"]'


@pytest.fixture(scope="module")
def ctx() -> Any:
    attrs = {
        "model": DeviceAttribute("string", "a100"),
        "index": DeviceAttribute("string", "3"),
        "count": DeviceAttribute("int", 3),
        "healthy": DeviceAttribute("bool", True),
        "fw": DeviceAttribute("version", "2.1.0"),
    }
    return device_context(DRIVER, attrs, {}, False)


@pytest.mark.parametrize(
    ("verb", "attribute", "message"),
    [
        ("%d", "index", "decimal clause can only be used on integers, was given string"),
        ("%d", "healthy", "decimal clause can only be used on integers, was given bool"),
        ("%f", "count", "fixed-point clause can only be used on doubles, was given int"),
        ("%e", "model", "scientific clause can only be used on doubles, was given string"),
        ("%b", "model", "only integers and bools can be formatted as binary, was given string"),
        (
            "%x",
            "healthy",
            "only integers, byte buffers, and strings can be formatted as hex, was given bool",
        ),
        ("%o", "model", "octal clause can only be used on integers, was given string"),
        (
            "%s",
            "fw",
            "string clause can only be used on strings, bools, bytes, ints, doubles, "
            "maps, lists, types, durations, and timestamps, was given kubernetes.Semver",
        ),
    ],
)
def test_a_device_value_of_a_type_the_clause_refuses_is_a_runtime_error(
    verb: str, attribute: str, message: str, ctx: Any
) -> None:
    selector = compile_selector(f'"{verb}".format([{A}.{attribute}]) == "3"')
    with pytest.raises(CELRuntimeError, match=f"error during formatting: {message}"):
        selector.matches(ctx)


def test_a_string_index_in_a_decimal_clause_fails_instead_of_matching(ctx: Any) -> None:
    """The reported case: drakit formatted "3" as 3 and the selector matched."""
    selector = compile_selector(f'"%s-%d".format([{A}.model, {A}.index]) == "a100-3"')
    with pytest.raises(CELRuntimeError, match="decimal clause can only be used on integers"):
        selector.matches(ctx)


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        (
            '"%s-%d".format(["a", "3"])',
            "1:22: error during formatting: decimal clause can only "
            "be used on integers, was given string",
        ),
        ('"%f".format([1])', "1:14: error during formatting: fixed-point clause"),
        ('"%s".format([[optional.of(1)]])', "1:26: error during formatting: string clause"),
        ('"%s".format([quantity("1")])', "was given kubernetes.Quantity"),
        (
            '"%z".format([1])',
            '1:12: could not parse formatting clause: unrecognized formatting clause "z"',
        ),
        ('"%".format([1])', "1:11: unexpected end of string"),
        ('"%d %d".format([1])', "1:15: index 1 out of range"),
        ('"%d".format([1, 2])', "too many arguments supplied to string.format (expected 1, got 2)"),
    ],
)
def test_a_constant_format_with_a_list_literal_is_checked_at_compile_time(
    expression: str, message: str
) -> None:
    with pytest.raises(CELCompileError) as info:
        compile_selector(f'{expression} == ""')
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("fmt", "args", "text"),
    [
        ("%s|%s|%s|%s|%s", ["a", 1, True, None, b"ab"], "a|1|true|null|ab"),
        ("%s|%s|%s|%s|%s", [1.5, 1.0, 1234567.0, 0.00001, -0.0], "1.5|1|1.234567e+06|1e-05|-0"),
        ("%s", [[1, "a", 1.5, True, None, b"x", [2], {"k": 1}, math.inf]],
         '[1, "a", 1.500000, true, null, b"x", [2], {"k":1}, "+Inf"]'),
        ("%s", [{"b": 1, "a": "x", 10: 2, 2: 1}], '{"a":"x", "b":1, 10:2, 2:1}'),
        ("%s", [["\u00a0\u0085\U0001f600", 'a"b\n\x01']],
         '["\\u00a0\\u0085\U0001f600", "a\\"b\\n\\x01"]'),
        ("%f|%.2f|%.0f|%f", [1234.5, -1234.5, 1234.5, -0.0],
         "1,234.500000|-1,234.50|1,234|0.000000"),
        ("%f|%f|%f", ["NaN", "Infinity", -math.inf], "NaN|∞|-∞"),
        ("%e|%e|%.20e", [2.71828, -0.00012, 1234.5678],
         "2.718280\u00d710⁰⁰|-1.200000\u00d710⁻⁰⁴|       1.234568\u00d710⁰³"),
        ("%e", [math.nan], "   NaN"),
        ("%b|%b|%b|%b", [5, -5, True, False], "101|-101|1|0"),
        ("%x|%X|%x|%x|%X", [26, 26, -26, "hi", b"\xff\x01"], "1a|1A|-1a|6869|FF01"),
        ("%o|%o", [30, -8], "36|-10"),
        ("100%%|%%%s|%.2d", ["a", 1], "100%|%a|1"),
    ],
)  # fmt: skip
def test_values_are_formatted_as_cel_go_formats_them(fmt: str, args: list[Any], text: str) -> None:
    assert format_values(fmt, args) == text


@pytest.mark.parametrize(
    ("fmt", "args", "message"),
    [
        ("%d %d", [1], "index 1 out of range"),
        ("%", [1], "unexpected end of string"),
        ("%.2", [1.0], "could not find end of precision specifier"),
        ("%.f", [1.0], 'strconv.Atoi: parsing "": invalid syntax'),
        ("é%é", [1], 'unrecognized formatting clause "Ã"'),
        ("%s", [b"\xff"], "invalid UTF-8 in bytes"),
        ("%s", [{1.5: 1}], "no formatting function for map key of type double"),
    ],
)
def test_malformed_formats_are_refused_with_cel_go_messages(
    fmt: str, args: list[Any], message: str
) -> None:
    with pytest.raises(FormatError, match=message):
        format_values(fmt, args)


@pytest.mark.parametrize(
    ("value", "text"),
    [(1.5, "1.5"), (123456.0, "123456"), (1234567.0, "1.234567e+06"), (1e21, "1e+21"),
     (0.0001, "0.0001"), (1e-7, "1e-07"), (math.inf, "+Inf"), (math.nan, "NaN")],
)  # fmt: skip
def test_doubles_become_strings_as_go_writes_them(value: float, text: str) -> None:
    assert go_float_text(value) == text
    assert compile_selector(f'string(double("{value}")) == "{text}"').matches(
        device_context(DRIVER, {}, {}, False)
    )
