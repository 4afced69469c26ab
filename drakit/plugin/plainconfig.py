"""Backend settings that are plainly valid, checked without pydantic.

A backend describes its ``--backend-config`` with a pydantic model (the model says what is
accepted, coerces and names every error), but pydantic costs the node plugin about 8 MiB of
RSS. So a backend may first check its settings against a plain description of the same
model, built from :func:`obj`, :class:`Field` and the checks below, which accepts only values
that are valid as they are: JSON types exactly (an ``int`` for an integer, a ``str`` for
text), every bound met, no unknown or doubled key. Anything else (a value the model would
coerce, such as ``"8"`` for an integer, or an error) raises :class:`NotPlainError`, and
:func:`settings` hands the document to the pydantic model, which coerces it or raises the
same error as ever. What is accepted and every error stay the model's; the plain check only
decides when the model need not be loaded::

    from drakit.plugin import plainconfig as plain

    SETTINGS = plain.obj(
        plain.Field("slots", plain.integer(1, 64), 8),
        plain.Field("mode", plain.one_of("fast", "safe"), "safe"),
    )

    class MyBackend(BackendBase):
        def __init__(self, context: BackendContext) -> None:
            super().__init__(context)
            # a dict in the shape of MySettings.model_dump(); pydantic only when needed
            self.settings = plain.settings(SETTINGS, "mypkg.models:MySettings", context, "mine")

The plain result has the shape of the model's ``model_dump()``: field names, defaults
filled in, nested models as dicts. Keep the description in step with the model: a test
that feeds both the same documents and compares ``settings`` with ``model_dump()`` (as
drakit's built-in backends do) catches a drift.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from drakit.allocator.quantity import QuantityError, parse_quantity
from drakit.plugin.context import BackendContext
from drakit.plugin.settings import validate_settings

__all__ = [
    "Check",
    "Field",
    "NotPlainError",
    "boolean",
    "integer",
    "list_of",
    "obj",
    "one_of",
    "optional",
    "positive_number",
    "quantity",
    "settings",
    "text",
]

#: A check: returns the value as the model would keep it, or raises NotPlainError.
Check = Callable[[Any], Any]


class NotPlainError(Exception):
    """The value is not plainly valid: the pydantic model decides (coerces or rejects)."""


_REQUIRED: Any = object()


@dataclass(frozen=True)
class Field:
    """One field of a model: its name, its JSON alias (if any), its check and default.

    A list default is copied for each result (as a pydantic ``default_factory``).
    """

    name: str
    check: Check
    default: Any = _REQUIRED
    alias: str | None = None

    def given_as(self) -> tuple[str, ...]:
        """The keys this field is given under (alias and name: ``populate_by_name``)."""
        return (self.name,) if self.alias is None else (self.alias, self.name)


def obj(*fields: Field) -> Check:
    """A model: a dict whose keys are all known, each given once, required ones present."""
    by_key = {key: f for f in fields for key in f.given_as()}

    def check(value: Any) -> dict[str, Any]:
        if type(value) is not dict or any(key not in by_key for key in value):
            raise NotPlainError
        out: dict[str, Any] = {}
        for f in fields:
            given = [key for key in f.given_as() if key in value]
            if len(given) > 1:
                raise NotPlainError
            if given:
                out[f.name] = f.check(value[given[0]])
            elif f.default is _REQUIRED:
                raise NotPlainError
            else:
                out[f.name] = list(f.default) if isinstance(f.default, list) else f.default
        return out

    return check


def integer(ge: int, le: int) -> Check:
    """An ``int`` (not a bool, not a float) within ``[ge, le]``."""

    def check(value: Any) -> int:
        if type(value) is not int or not ge <= value <= le:
            raise NotPlainError
        return value

    return check


def positive_number(value: Any) -> float:
    """A finite ``int`` or ``float`` above 0, as a float."""
    if type(value) not in (int, float):
        raise NotPlainError
    try:
        number = float(value)
    except OverflowError as exc:
        raise NotPlainError from exc
    if not math.isfinite(number) or number <= 0:
        raise NotPlainError
    return number


def text(value: Any) -> str:
    """A ``str``."""
    if type(value) is not str:
        raise NotPlainError
    return value


def boolean(value: Any) -> bool:
    """A ``bool``."""
    if type(value) is not bool:
        raise NotPlainError
    return value


def quantity(value: Any) -> str:
    """A ``str`` that is a Kubernetes quantity."""
    try:
        parse_quantity(text(value))
    except QuantityError as exc:
        raise NotPlainError from exc
    return value  # type: ignore[no-any-return]


def one_of(*choices: str) -> Check:
    """One of ``choices`` (a Literal of strings)."""

    def check(value: Any) -> str:
        if type(value) is not str or value not in choices:
            raise NotPlainError
        return value

    return check


def optional(inner: Check) -> Check:
    """None, or what ``inner`` accepts."""
    return lambda value: None if value is None else inner(value)


def list_of(inner: Check, min_length: int = 0) -> Check:
    """A ``list`` of at least ``min_length`` items, each accepted by ``inner``."""

    def check(value: Any) -> list[Any]:
        if type(value) is not list or len(value) < min_length:
            raise NotPlainError
        return [inner(item) for item in value]

    return check


def settings(check: Check, model: str, context: BackendContext, backend: str) -> dict[str, Any]:
    """``context.config`` as a plain dict (the shape of ``model_dump()``).

    Plainly valid settings are checked here; any other document goes to the pydantic
    ``model`` (``module:Class``, imported now), which coerces it or raises
    BackendConfigError naming the source, the backend and each bad field.
    """
    try:
        return check(dict(context.config))  # type: ignore[no-any-return]
    except NotPlainError:
        pass
    module, _, attr = model.partition(":")
    model_class = getattr(importlib.import_module(module), attr)
    dumped: dict[str, Any] = validate_settings(model_class, context, backend).model_dump()
    return dumped
