"""Runtime cost accounting for one selector evaluation, as Kubernetes counts library calls.

Kubernetes evaluates every device selector with a runtime cost limit of
:data:`COST_LIMIT` (``resourceapi.CELSelectorExpressionMaxCost``); when the actual cost passes
it, evaluation stops with "operation cancelled: actual cost limit exceeded". Library
functions are charged by the formulas of ``k8s.io/apiserver/pkg/cel/library/cost.go``
(``CallCost``): string functions by a tenth of the length they traverse, regexes by that
times a quarter of the pattern length, list functions by the list's size.

The Rust engine cannot be interrupted and does not report the cost of its own steps
(comprehension iterations, ``+``), so this account covers the library functions only; the
steps the engine takes itself are bounded by running risky expressions in a guarded child
process (:mod:`drakit.allocator.cel.sandbox`), whose CPU and memory limits produce the same outcome.

The account is per thread: :func:`start` resets it before each evaluation.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from typing import Final

__all__ = [
    "COST_LIMIT",
    "LIMIT_EXCEEDED",
    "CostLimitExceededError",
    "charge",
    "charge_regex",
    "charge_string",
    "start",
]

COST_LIMIT: Final = 1_000_000  # resourceapi.CELSelectorExpressionMaxCost (k8s.io/api v0.37.2)
LIMIT_EXCEEDED: Final = "operation cancelled: actual cost limit exceeded"
STRING_TRAVERSAL_COST_FACTOR: Final = 0.1  # cel-go common.StringTraversalCostFactor
REGEX_STRING_LENGTH_COST_FACTOR: Final = 0.25  # cel-go common.RegexStringLengthCostFactor


class CostLimitExceededError(RuntimeError):
    """The evaluation spent more than :data:`COST_LIMIT`."""

    def __init__(self) -> None:
        super().__init__(LIMIT_EXCEEDED)


class _Account(threading.local):
    spent = 0
    on_exceeded: Callable[[], None] | None = None


_account: Final = _Account()


def start(on_exceeded: Callable[[], None] | None = None) -> None:
    """Begin a new evaluation on this thread (the account restarts at zero).

    ``on_exceeded`` runs when the limit is passed, before the error is raised. Kubernetes
    aborts the whole evaluation at that point, while CEL's ``all``/``exists`` absorb an
    error and go on iterating; a guarded child uses the hook to answer and exit at once.
    """
    _account.spent = 0
    _account.on_exceeded = on_exceeded


def charge(units: int) -> None:
    """Add ``units``; raises :class:`CostLimitExceededError` past the limit (before the work)."""
    spent = _account.spent + units
    _account.spent = spent
    if spent > COST_LIMIT:
        hook = _account.on_exceeded
        if hook is not None:
            hook()
        raise CostLimitExceededError


def charge_string(length: int, factor: float = 1.0) -> None:
    """Charge a traversal of a string of ``length`` (times ``factor``)."""
    charge(math.ceil(length * factor * STRING_TRAVERSAL_COST_FACTOR))


def charge_regex(subject_length: int, pattern_length: int) -> None:
    """Charge a regex search as Kubernetes does for ``find``/``findAll``."""
    subject_cost = math.ceil((1 + subject_length) * STRING_TRAVERSAL_COST_FACTOR)
    charge(subject_cost * math.ceil(pattern_length * REGEX_STRING_LENGTH_COST_FACTOR))
