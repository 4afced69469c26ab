"""CEL as Kubernetes 1.37 has it: type checking, RE2, two-variable comprehensions, cost.

The same answers are checked against the Go allocator in tests/differential
(test_differential_cel.py); these tests pin drakit's own messages and bounds.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from drakit.allocator.cel import (
    CELCancelledError,
    CELCompileError,
    CELCostError,
    CELRuntimeError,
    compile_selector,
    device_context,
)
from drakit.allocator.cel import regex as cel_regex
from drakit.allocator.model import DeviceAttribute, DeviceCapacity
from drakit.allocator.quantity import Quantity

DRIVER = "gpu.example.com"
A = f'device.attributes["{DRIVER}"]'


@pytest.fixture(scope="module")
def ctx() -> Any:
    attrs = {
        "model": DeviceAttribute("string", "a100"),
        "index": DeviceAttribute("int", 3),
        "numas": DeviceAttribute("ints", (0, 1)),
    }
    caps = {"memory": DeviceCapacity(value=Quantity.parse("16Gi"))}
    return device_context(DRIVER, attrs, caps, False)


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        (
            "1 == 1.0",
            "<input>:1:3: found no matching overload for '_==_' applied to '(int, double)'",
        ),
        (f"[{A}.index, 2].size() == 2", "expected type 'dyn' but found 'int'"),
        ('quantity("1").sign() == 1', "<input>:1:19: undeclared reference to 'sign'"),
        ("device.driver == 1", "applied to '(string, int)'"),
        (
            f'device.capacity["{DRIVER}"].memory.isGreaterThan(1)',
            "no matching overload for 'isGreaterThan' applied to '(kubernetes.Quantity, int)'",
        ),
        ('"abc".reverse() == "cba"', "found no matching overload for 'reverse'"),
        ('"a".matches("(a")', "<input>:1:13: invalid matches argument"),
        ('{"a": 1, "b": "c"}.size() == 2', "expected type 'int' but found 'string'"),
        ("device.driver", "must evaluate to bool or the unknown type, not string"),
        ("nothing == 1", "undeclared reference to 'nothing'"),
    ],
)
def test_type_errors_are_compile_errors_with_kubernetes_messages(
    expression: str, message: str
) -> None:
    with pytest.raises(CELCompileError) as info:
        compile_selector(expression)
    assert message in str(info.value)


@pytest.mark.parametrize(
    "expression",
    [
        "1 < 1.5",  # CrossTypeNumericComparisons
        'sign(quantity("-1")) == -1',
        f'{A}.?model.orValue("") == "a100"',
        f"{A}.numas.indexOf(1) == 1",
        '"%s-%d".format(["a", 1]) == "a-1"',  # format's list is exempt from homogeneity
        'format.named("dns1123Label").hasValue()',
        'ip("10.0.0.1").family() == 4 && string(cidr("10.0.0.0/8")) == "10.0.0.0/8"',
    ],
)
def test_kubernetes_accepts_these_and_so_does_drakit(expression: str, ctx: Any) -> None:
    assert compile_selector(expression).matches(ctx) is True


@pytest.mark.parametrize(
    "expression",
    [
        f"{A}.numas.all(i, v, v == i)",
        f"{A}.numas.exists(i, v, i == 1 && v == 1)",
        f"{A}.numas.existsOne(i, v, v == 0)",
        f"{A}.numas.transformList(i, v, v * 10) == [0, 10]",
        f"{A}.numas.transformList(i, v, i > 0, v) == [1]",
        f"{A}.numas.transformMap(i, v, v + 1) == {{0: 1, 1: 2}}",
        '{"a": 1, "b": 2}.all(k, v, v > 0 && k != "")',
        '{"a": 1}.transformMapEntry(k, v, {v: k}) == {1: "a"}',
    ],
)
def test_two_variable_comprehensions_evaluate_like_kubernetes(expression: str, ctx: Any) -> None:
    assert compile_selector(expression).matches(ctx) is True


def test_redos_pattern_runs_in_linear_time_with_re2(ctx: Any) -> None:
    expression = '"' + "a" * 48 + 'b".find("^(a+)+$") == ""'
    assert compile_selector(expression).matches(ctx) is True


def test_re2_refuses_what_go_refuses_with_gos_message() -> None:
    with pytest.raises(cel_regex.RegexError, match=r"invalid or unsupported Perl syntax: `\(\?=`"):
        cel_regex.compile_pattern("(?=a)")


def test_find_all_reports_empty_matches_as_go_does() -> None:
    assert cel_regex.find_all("baaa", "a*") == ["", "aaa"]
    assert cel_regex.find_all("bänä", "ä", 1) == ["ä"]


def test_dynamic_invalid_pattern_is_a_runtime_error(ctx: Any) -> None:
    with pytest.raises(
        CELRuntimeError, match="Illegal regex: error parsing regexp: missing closing \\)"
    ):
        compile_selector('"x".matches(device.driver.substring(0, 0) + "(")').matches(ctx)


def test_lists_range_within_the_cost_limit_is_allowed(ctx: Any) -> None:
    assert compile_selector("lists.range(5000).size() == 5000").matches(ctx) is True


@pytest.mark.parametrize(
    "expression",
    [
        "lists.range(2000000).size() > 0",
        "lists.range(1500).all(i, lists.range(1500).all(j, i + j >= 0))",
        'cel.bind(s0, "abcdefgh", '
        + "".join(f"cel.bind(s{i}, s{i - 1} + s{i - 1}, " for i in range(1, 29))
        + "s28.size() > 0"
        + ")" * 29,
    ],
)
def test_expensive_selectors_fail_with_cost_limit_exceeded(expression: str, ctx: Any) -> None:
    selector = compile_selector(expression)
    assert selector.risky
    with pytest.raises(CELCostError, match="operation cancelled: actual cost limit exceeded"):
        selector.matches(ctx)


def test_simple_selectors_are_evaluated_in_process() -> None:
    assert not compile_selector(f'{A}.model == "a100" && {A}.numas.exists(n, n == 1)').risky


SLOW = (
    '"abcdefghijklmnopqrstuvwxyz0123456789".split("").all(a, '
    '"abcdefghijklmnopqrstuvwxyz0123456789".split("").all(b, a + b != ""))'
)


def test_guarded_evaluation_stops_when_the_caller_cancels(ctx: Any) -> None:
    selector = compile_selector(SLOW)
    assert selector.risky
    with pytest.raises(CELCancelledError) as info:
        selector.matches(ctx, cancelled=lambda: True)
    assert not info.value.timed_out


def test_guarded_evaluation_past_the_deadline_is_a_time_out_not_an_answer(ctx: Any) -> None:
    with pytest.raises(CELCancelledError, match="time limit exceeded") as info:
        compile_selector(SLOW).matches(ctx, deadline=time.monotonic())
    assert info.value.timed_out


def test_guarded_evaluation_never_forks_the_calling_process(
    ctx: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 30: the sandbox forked the multi-threaded controller (locks held by other
    threads are copied locked; Python 3.12 deprecates it). Children now come from a
    single-threaded fork server, and still answer and stay bounded."""
    import os  # noqa: PLC0415

    def no_fork() -> int:
        raise AssertionError("the caller forked itself")

    monkeypatch.setattr(os, "fork", no_fork)
    selector = compile_selector(f"cel.bind(i, {A}.index, i == 3)")
    assert selector.risky
    assert selector.matches(ctx) is True
    with pytest.raises(CELCostError, match="cost limit exceeded"):
        compile_selector("lists.range(2000000).size() > 0").matches(ctx)
    with pytest.raises(CELRuntimeError, match="no such key"):
        compile_selector(f"cel.bind(i, {A}.nope, i == 3)").matches(ctx)
