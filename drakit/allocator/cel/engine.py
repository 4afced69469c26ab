"""Compile and evaluate DRA device selectors.

* :func:`compile_selector` turns an expression into a :class:`Selector` (cached by
  expression text; failures are not cached) or raises :class:`CELCompileError` quoting the
  expression with a caret under the failing position.
* :func:`device_context` builds the ``device`` variable for one device once; the allocator
  keeps it with the device and reuses it for every selector and every call.
* :meth:`Selector.matches` evaluates against such a context and returns a bool, or raises
  :class:`CELRuntimeError` (unknown attribute with a hint, non-bool result, library
  function errors). Errors are fatal for an allocation, as in Kubernetes.

Cost and time: Kubernetes stops an evaluation whose actual cost passes
:data:`MAX_COST` ("cost limit exceeded"). Here library functions charge the same units
while they run (:mod:`drakit.allocator.cel.budget`), and expressions whose work is not bounded by
their length and the device data (:func:`drakit.allocator.cel.rewrite.is_risky`: ``cel.bind``,
``lists.range``, ``split``, ``map``, deep nesting, ...) are evaluated in a child process
(never a fork of the caller) with CPU, memory and wall-clock limits
(:mod:`drakit.allocator.cel.sandbox`). Either bound produces a
:class:`CELCostError` (a :class:`CELRuntimeError`) whose message says "cost limit exceeded";
cancellation yields :class:`CELCancelledError`.
"""

from __future__ import annotations

import functools
import logging
import re
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Final

import cel as _cel

from drakit.allocator.cel import budget, checker, sandbox
from drakit.allocator.cel.library import CONSTANT_FOLDERS, FUNCTIONS
from drakit.allocator.cel.projection import Projection, projection_of
from drakit.allocator.cel.rewrite import CELSyntaxError, estimate_cost, is_risky, rewrite
from drakit.allocator.cel.variables import DeviceVariables

# The engine logs a warning for every failing library call; the error is raised to the
# caller anyway (as a CEL runtime error), so the log line is only noise.
logging.getLogger("cel").setLevel(logging.ERROR)

MAX_COST: Final = budget.COST_LIMIT
MAX_EXPRESSION_LENGTH: Final = 10 * 1024
CACHE_SIZE: Final = 4096
_MAX_ANSWERS: Final = 1024

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


class CELCostError(CELRuntimeError):
    """The evaluation passed its cost, CPU, memory or time budget."""


class CELCancelledError(CELRuntimeError):
    """The caller asked to stop (or its deadline passed: ``timed_out``) while a guarded
    evaluation ran. Not an answer about the device: do not cache it."""

    def __init__(self, message: str, expression: str, timed_out: bool) -> None:
        super().__init__(message, expression)
        self.timed_out = timed_out


def _caret(expression: str, position: int) -> str:
    line_start = expression.rfind("\n", 0, position) + 1
    line_end = expression.find("\n", position)
    line = expression[line_start : line_end if line_end >= 0 else None]
    column = position - line_start
    line_no = expression.count("\n", 0, position) + 1
    return f"line {line_no}, column {column + 1}:\n | {line}\n | {'.' * column}^"


_ENGINE_POSITION = re.compile(r"<input>:(\d+):(\d+):\s*(.*?)\n", re.DOTALL)


class Selector:
    """A compiled selector. Thread-safe; evaluate with :meth:`matches`.

    ``risky`` selectors are evaluated in a guarded child process (see the module doc).
    """

    __slots__ = ("_answers", "core", "cost", "expression", "program", "projection", "risky")

    def __init__(
        self,
        expression: str,
        program: Any,
        cost: int,
        risky: bool = False,
        projection: Projection | None = None,
        *,
        core: str | None = None,
    ) -> None:
        self.expression = expression
        #: The text ``program`` was compiled from (the rewritten expression): a guarded
        #: child compiles it again, as compiled programs cannot be sent to a process.
        self.core = _core_of(expression, risky) if core is None else core
        self.program = program
        self.cost = cost
        self.risky = risky
        #: The part of ``device`` the expression reads (None: all of it); see
        #: :mod:`drakit.allocator.cel.projection`.
        self.projection = projection
        # Answers by the projected view's key: devices that look the same to this
        # selector (one model, one driver version) are evaluated once. Only answers are
        # kept (errors are evaluated again); bounded, cleared when full.
        self._answers: dict[tuple[Any, ...], bool] = {}

    def _answer_key(self, context: dict[str, Any]) -> tuple[Any, ...] | None:
        if self.projection is None or self.risky:
            return None
        if isinstance(context, DeviceVariables):
            raw = self.projection.raw_key(context)
            if raw is not None:
                return raw
        return self.projection.key(context)

    def matches(
        self,
        context: Any,
        *,
        deadline: float | None = None,
        cancelled: Callable[[], bool] | None = None,
    ) -> bool:
        """Evaluate for the device whose :func:`device_context` is ``context``.

        ``deadline`` (``time.monotonic()``) and ``cancelled`` bound a guarded evaluation;
        raises :class:`CELRuntimeError` (or its :class:`CELCostError` and
        :class:`CELCancelledError` subclasses).
        """
        if not self.risky:
            return self._evaluate(context)
        task = functools.partial(
            _guarded_answer, self.expression, self.core, self._variables(context)
        )
        try:
            ok, text = sandbox.run_guarded(task, deadline=deadline, cancelled=cancelled)
        except sandbox.SandboxCancelledError as exc:
            timed_out = isinstance(exc, sandbox.SandboxDeadlineError)
            raise CELCancelledError(str(exc), self.expression, timed_out) from None
        except sandbox.SandboxLimitError as exc:
            raise CELCostError(f"{budget.LIMIT_EXCEEDED}: {exc}", self.expression) from None
        if not ok:
            error = CELCostError if budget.LIMIT_EXCEEDED in text else CELRuntimeError
            raise error(text, self.expression)
        return text == "true"

    def _answer(self, context: Any) -> tuple[bool, str]:
        """The child's side of a guarded evaluation: never raises."""
        try:
            return True, "true" if self._evaluate(context, _stop_child_at_limit) else "false"
        except CELError as exc:
            return False, str(exc)

    def _evaluate(self, context: Any, on_limit: Callable[[], None] | None = None) -> bool:
        key = self._answer_key(context)
        if key is not None:
            known = self._answers.get(key)
            if known is not None:
                return known
        result = self._execute(context, on_limit)
        if key is not None:
            if len(self._answers) >= _MAX_ANSWERS:
                self._answers.clear()
            self._answers[key] = result
        return result

    def _variables(self, context: Any) -> dict[str, Any]:
        """The engine's variables for ``context``: what the selector reads of the device."""
        if self.projection is not None:
            return self.projection.apply(context)
        if isinstance(context, DeviceVariables):
            return context.whole()
        return dict(context)

    def _execute(self, context: Any, on_limit: Callable[[], None] | None) -> bool:
        budget.start(on_limit)
        variables = self._variables(context)
        try:
            result = self.program.execute(_bound_context(variables))
        except KeyError as exc:
            key = exc.args[0] if exc.args else "?"
            raise CELRuntimeError(
                f"no such key: {key} ({MISSING_KEY_HINT})", self.expression
            ) from None
        except MemoryError:
            raise CELCostError(f"{budget.LIMIT_EXCEEDED}: out of memory", self.expression) from None
        except Exception as exc:  # the engine raises several builtin types
            message = _runtime_message(exc)
            error = CELCostError if budget.LIMIT_EXCEEDED in message else CELRuntimeError
            raise error(message, self.expression) from None
        if result is True or result is False:
            return result
        raise CELRuntimeError(
            f"expression must evaluate to a bool, got {_cel_type_name(result)}", self.expression
        )

    def __repr__(self) -> str:
        return f"Selector({self.expression!r})"


def _guarded_answer(expression: str, core: str, variables: dict[str, Any]) -> tuple[bool, str]:
    """A guarded child's task (:func:`sandbox.run_guarded`): evaluate the selector compiled
    from ``core`` for ``variables``; never raises."""
    try:
        program = _cel.compile(core)
    except Exception as exc:  # compiled in the parent already: should not happen
        return False, f"compilation failed in the guarded child: {exc}"
    return Selector(expression, program, 0, core=core)._answer(variables)


def _stop_child_at_limit() -> None:
    sandbox.finish_early(False, budget.LIMIT_EXCEEDED)


_ENGINE_NOISE: Final = re.compile(r"Python function call failed: \w+: |Function '[\w.]+' error: ")


def _runtime_message(exc: Exception) -> str:
    text = str(exc).split(". Check ", 1)[0]
    return _ENGINE_NOISE.sub("", text).replace("_dra_", "")


# CEL's names for the Python types a result can have; bool before int, as bool is an int.
_CEL_TYPE_NAMES: Final = (
    (bool, "bool"),
    (int, "int"),
    (float, "double"),
    (str, "string"),
    (list, "list"),
    (dict, "map"),
)


def _cel_type_name(v: Any) -> str:
    return next((name for kind, name in _CEL_TYPE_NAMES if isinstance(v, kind)), type(v).__name__)


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
    problem = checker.check(expression)
    if problem is not None:
        raise CELCompileError(f"compilation failed: {problem}", expression)
    try:
        cost = estimate_cost(expression)
        risky = is_risky(expression, MAX_COST)
        core = _core_of(expression, risky)
    except CELSyntaxError as exc:
        raise CELCompileError(
            f"compilation failed: {exc} at {_caret(expression, exc.position)}\n"
            f"in expression: {expression}",
            expression,
        ) from None
    try:
        program = _cel.compile(core)
    except Exception as exc:
        raise CELCompileError(_compile_message(expression, core, str(exc)), expression) from None
    return Selector(expression, program, cost, risky, projection_of(expression), core=core)


def _core_of(expression: str, risky: bool) -> str:
    """The text the engine compiles for ``expression``; raises CELSyntaxError."""
    # Risky expressions keep their calls: each charges its cost as Kubernetes does.
    return rewrite(expression, count_iterations=risky, fold=None if risky else CONSTANT_FOLDERS)


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


_THREAD = threading.local()


def _bound_context(variables: dict[str, Any]) -> Any:
    """This thread's engine context with the library functions, holding ``variables``.

    Building an engine context registers every library function again (95 of them);
    a per-thread one is built once and only its variables change. Per thread, because
    evaluations on other threads would overwrite the variables; binding is skipped when
    the context holds these very variables already (a device's selectors are evaluated
    one after the other: class selectors, then the request's).
    """
    context = getattr(_THREAD, "context", None)
    if context is None:
        context = _THREAD.context = _cel.Context(functions=FUNCTIONS)
        _THREAD.bound = None
    if _THREAD.bound is not variables:
        context.update(variables)
        _THREAD.bound = variables
    return context
