"""Compile and evaluate DRA device selectors.

* :func:`compile_selector` turns an expression into a :class:`Selector` (cached by
  expression text; failures are not cached) or raises :class:`CELCompileError` quoting the
  expression with a caret under the failing position.
* :func:`device_context` builds the ``device`` variable for one device once; the allocator
  keeps it with the device and reuses it for every selector and every call.
* :meth:`Selector.matches` evaluates against such a context and returns a bool, or raises
  :class:`CELRuntimeError` (unknown attribute with a hint, non-bool result, library
  function errors). Errors are fatal for an allocation, as in Kubernetes.

Cost: the engine has no runtime cost limit, so every expression's worst case is bounded
statically at compile time (:func:`allocator.cel.rewrite.estimate_cost`) and expressions
whose bound exceeds :data:`MAX_COST` are rejected.
"""

from __future__ import annotations

import logging
import re
import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, Final

import cel as _cel

from allocator.cel.library import FUNCTIONS, quantity_value, semver_value
from allocator.cel.rewrite import CELSyntaxError, estimate_cost, rewrite
from allocator.model import DeviceAttribute, DeviceCapacity

__all__ = [
    "MAX_COST",
    "CELCompileError",
    "CELError",
    "CELRuntimeError",
    "Selector",
    "compile_selector",
    "device_context",
    "qualify",
]

# The engine logs a warning for every failing library call; the error is raised to the
# caller anyway (as a CEL runtime error), so the log line is only noise.
logging.getLogger("cel").setLevel(logging.ERROR)

MAX_COST: Final = 1_000_000
MAX_EXPRESSION_LENGTH: Final = 10 * 1024
CACHE_SIZE: Final = 4096

MISSING_KEY_HINT: Final = (
    'consider using CEL optional types (device.attributes["dom"].?name.orValue(default)) '
    'or has(device.attributes["dom"].name) to check whether the attribute exists'
)


class CELError(ValueError):
    """A selector problem; ``expression`` is the selector's text."""

    def __init__(self, message: str, expression: str) -> None:
        super().__init__(message)
        self.expression = expression


class CELCompileError(CELError):
    """The expression does not compile. The message quotes it and points at the position."""


class CELRuntimeError(CELError):
    """Evaluating the expression failed for a device."""


def _caret(expression: str, position: int) -> str:
    line_start = expression.rfind("\n", 0, position) + 1
    line_end = expression.find("\n", position)
    line = expression[line_start : line_end if line_end >= 0 else None]
    column = position - line_start
    line_no = expression.count("\n", 0, position) + 1
    return f"line {line_no}, column {column + 1}:\n | {line}\n | {'.' * column}^"


_ENGINE_POSITION = re.compile(r"<input>:(\d+):(\d+):\s*(.*?)\n", re.DOTALL)


class Selector:
    """A compiled selector. Thread-safe; evaluate with :meth:`matches`."""

    __slots__ = ("cost", "expression", "program")

    def __init__(self, expression: str, program: Any, cost: int) -> None:
        self.expression = expression
        self.program = program
        self.cost = cost

    def matches(self, context: Any) -> bool:
        """Evaluate for the device whose :func:`device_context` is ``context``."""
        try:
            result = self.program.execute(context)
        except KeyError as exc:
            key = exc.args[0] if exc.args else "?"
            raise CELRuntimeError(
                f"no such key: {key} ({MISSING_KEY_HINT})", self.expression
            ) from None
        except Exception as exc:  # the engine raises several builtin types
            raise CELRuntimeError(_runtime_message(exc), self.expression) from None
        if result is True or result is False:
            return result
        raise CELRuntimeError(
            f"expression must evaluate to a bool, got {_cel_type_name(result)}", self.expression
        )

    def __repr__(self) -> str:
        return f"Selector({self.expression!r})"


def _runtime_message(exc: Exception) -> str:
    text = str(exc).split(". Check ", 1)[0]
    return text.replace("Python function call failed: CELFunctionError: ", "")


def _cel_type_name(v: Any) -> str:
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int"
    if isinstance(v, float):
        return "double"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "list"
    if isinstance(v, dict):
        return "map"
    return type(v).__name__


_cache: OrderedDict[str, Selector] = OrderedDict()
_cache_lock = threading.Lock()


def compile_selector(expression: str) -> Selector:
    """Compile (or fetch from the cache) a selector; raises CELCompileError."""
    with _cache_lock:
        hit = _cache.get(expression)
        if hit is not None:
            _cache.move_to_end(expression)
            return hit
    selector = _compile(expression)
    with _cache_lock:
        _cache[expression] = selector
        if len(_cache) > CACHE_SIZE:
            _cache.popitem(last=False)
    return selector


def _compile(expression: str) -> Selector:
    if not expression.strip():
        raise CELCompileError("compilation failed: the expression is empty", expression)
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise CELCompileError(
            f"compilation failed: the expression is longer than {MAX_EXPRESSION_LENGTH} bytes",
            expression,
        )
    try:
        core = rewrite(expression)
        cost = estimate_cost(expression)
    except CELSyntaxError as exc:
        raise CELCompileError(
            f"compilation failed: {exc} at {_caret(expression, exc.position)}\n"
            f"in expression: {expression}",
            expression,
        ) from None
    if cost > MAX_COST:
        raise CELCompileError(
            f"compilation failed: estimated worst-case cost {cost} exceeds the limit of "
            f"{MAX_COST} (too many nested comprehensions)\nin expression: {expression}",
            expression,
        )
    try:
        program = _cel.compile(core)
    except Exception as exc:
        raise CELCompileError(_compile_message(expression, core, str(exc)), expression) from None
    return Selector(expression, program, cost)


def _compile_message(expression: str, core: str, engine_message: str) -> str:
    """Explain a compile failure with a position in the *original* expression."""
    if core != expression:
        # The rewritten text has other positions; the original usually fails at the same
        # place (or earlier), so ask the engine about the original.
        try:
            _cel.compile(expression)
        except Exception as exc:
            engine_message = str(exc)
    m = _ENGINE_POSITION.search(engine_message + "\n")
    if m is None:
        reason = engine_message.split("': ", 1)[-1]
        return f"compilation failed: {reason}\nin expression: {expression}"
    reason = m.group(3).strip()
    line, col = int(m.group(1)), int(m.group(2))
    lines = expression.split("\n")
    offset = sum(len(x) + 1 for x in lines[: line - 1]) + col - 1
    return f"compilation failed: {reason} at {_caret(expression, offset)}"


def qualify(name: str, driver: str) -> tuple[str, str]:
    """Split a (possibly unqualified) attribute name into (domain, id)."""
    domain, sep, ident = name.rpartition("/")
    return (domain, ident) if sep else (driver, name)


def _attribute_value(attr: DeviceAttribute) -> Any:
    kind = attr.kind
    if kind == "version":
        return semver_value(attr.value)
    if kind == "versions":
        return [semver_value(v) for v in attr.value]
    if kind in DeviceAttribute.LIST_KINDS:
        return list(attr.value)
    return attr.value


def device_context(
    driver: str,
    attributes: Mapping[str, DeviceAttribute],
    capacity: Mapping[str, DeviceCapacity],
    allow_multiple_allocations: bool = False,
) -> Any:
    """The evaluation context holding the ``device`` variable for one device.

    Build it once per device and reuse it. Version attributes that are not valid semver
    make every evaluation that touches them fail, as in Kubernetes.
    """
    attrs: dict[str, dict[str, Any]] = {}
    for name, attr in attributes.items():
        domain, ident = qualify(name, driver)
        try:
            attrs.setdefault(domain, {})[ident] = _attribute_value(attr)
        except ValueError:
            # not valid semver: left out, so a selector reading it fails (no such key)
            continue
    caps: dict[str, dict[str, Any]] = {}
    for name, cap in capacity.items():
        domain, ident = qualify(name, driver)
        caps.setdefault(domain, {})[ident] = quantity_value(cap.value)
    device = {
        "driver": driver,
        "attributes": attrs,
        "capacity": caps,
        "allowMultipleAllocations": allow_multiple_allocations,
    }
    return _cel.Context(variables={"device": device}, functions=FUNCTIONS)
