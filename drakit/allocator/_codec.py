"""Declarative JSON <-> dataclass mapping used by :mod:`drakit.allocator.model`.

Every model class is a frozen, slotted dataclass whose fields carry a small spec in their
``metadata``: the JSON key (camelCase, as the API server writes it), a codec, and whether
the key is always written (required fields) or only when set (``omitempty``). The generic
:func:`decode` / :func:`encode` below do the work, so the model module stays a list of
fields. Keys the model does not know are kept in the ``extra`` field and written back, so
``to_dict(from_dict(d)) == d`` for API-shaped input even across API additions.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

from drakit.allocator.quantity import Quantity, QuantityError

T = TypeVar("T")


class ModelError(ValueError):
    """Input that cannot be turned into a model object. ``field`` is a dotted path."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}" if field else reason)
        self.field = field
        self.reason = reason


class FrozenDict(dict[Any, Any]):
    """A dict that refuses mutation and can be hashed (lookups keep C speed)."""

    __slots__ = ()

    def _refuse(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("FrozenDict is immutable")

    __setitem__ = _refuse
    __delitem__ = _refuse
    clear = _refuse
    pop = _refuse
    popitem = _refuse  # type: ignore[assignment]
    setdefault = _refuse
    update = _refuse
    __ior__ = _refuse  # type: ignore[assignment]

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(frozenset(self.items()))

    def __repr__(self) -> str:
        return f"FrozenDict({dict.__repr__(self)})"


EMPTY: FrozenDict = FrozenDict()


#: How deep free-form JSON (opaque parameters, unknown fields) may nest below the field
#: that holds it. The apiserver stores claims nested hundreds of levels deep; recursing
#: through one raised RecursionError, which no caller expects. 64 levels is far beyond any
#: driver's configuration and far below Python's recursion limit.
MAX_RAW_DEPTH = 64


def freeze(value: Any, depth: int = 0) -> Any:
    """Turn JSON-like data into immutable data (dict -> FrozenDict, list -> tuple).

    Raises ModelError (with an empty field path, for the caller to place) when ``value``
    nests more than :data:`MAX_RAW_DEPTH` levels of objects and lists.
    """
    if isinstance(value, Mapping):
        if depth >= MAX_RAW_DEPTH:
            raise _too_deep()
        return FrozenDict({k: freeze(v, depth + 1) for k, v in value.items()})
    if isinstance(value, list | tuple):
        if depth >= MAX_RAW_DEPTH:
            raise _too_deep()
        return tuple(freeze(v, depth + 1) for v in value)
    return value


def _too_deep() -> ModelError:
    return ModelError("", f"nested more than {MAX_RAW_DEPTH} levels deep")


def thaw(value: Any) -> Any:
    """Inverse of :func:`freeze`: plain dicts and lists."""
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [thaw(v) for v in value]
    return value


class Codec:
    """Converts one JSON value to its model form and back."""

    __slots__ = ("decode", "empty", "encode")

    def __init__(
        self,
        decode: Callable[[Any, str], Any],
        encode: Callable[[Any], Any],
        empty: Callable[[Any], bool] = lambda v: v is None,
    ) -> None:
        self.decode = decode
        self.encode = encode
        self.empty = empty


def _typed(kind: type | tuple[type, ...], name: str) -> Codec:
    def decode(value: Any, path: str) -> Any:
        if isinstance(value, bool) and kind is int:
            raise ModelError(path, f"must be {name}, not a boolean")
        if not isinstance(value, kind):
            raise ModelError(path, f"must be {name}, not {_json_type(value)}")
        return value

    return Codec(decode, lambda v: v)


STR = _typed(str, "a string")
INT = _typed(int, "an integer")
BOOL = _typed(bool, "a boolean")


def _decode_quantity(value: Any, path: str) -> Quantity:
    try:
        return Quantity.parse(value)
    except QuantityError as exc:
        raise ModelError(path, str(exc)) from None


QUANTITY = Codec(_decode_quantity, lambda q: q.text)
RAW = Codec(lambda v, _p: freeze(v), thaw)


def list_of(item: Codec) -> Codec:
    def decode(value: Any, path: str) -> tuple[Any, ...]:
        if value is None:
            return ()
        if not isinstance(value, list | tuple):
            raise ModelError(path, f"must be a list, not {_json_type(value)}")
        out = []
        for i, v in enumerate(value):
            try:
                out.append(item.decode(v, ""))
            except ModelError as exc:
                raise _within(exc, f"{path}[{i}]") from None
        return tuple(out)

    return Codec(decode, lambda vs: [item.encode(v) for v in vs], lambda v: not v)


def map_of(item: Codec) -> Codec:
    def decode(value: Any, path: str) -> FrozenDict:
        if value is None:
            return EMPTY
        if not isinstance(value, Mapping):
            raise ModelError(path, f"must be a map, not {_json_type(value)}")
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise ModelError(path, f"key {k!r} must be a string")
            try:
                out[k] = item.decode(v, "")
            except ModelError as exc:
                where = f"{path}[{k!r}]" if "." in k or "/" in k else f"{path}.{k}"
                raise _within(exc, where.lstrip(".")) from None
        return FrozenDict(out)

    return Codec(decode, lambda m: {k: item.encode(v) for k, v in m.items()}, lambda v: not v)


def obj(cls_getter: Callable[[], type]) -> Codec:
    """Codec for a nested model class (a getter, so classes can refer to later ones)."""

    def decode(value: Any, path: str) -> Any:
        cls = cls_getter()
        return decode_object(cls, value, path)

    return Codec(decode, encode_object)


def spec(json: str, codec: Codec, *, required: bool = False, default: Any = None) -> Any:
    """Declare a model field: JSON key, codec, and whether it is always written."""
    meta = {"json": json, "codec": codec, "required": required}
    if isinstance(default, tuple | FrozenDict) or default is None:
        return dataclasses.field(default=default, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def extra_field() -> Any:
    """The catch-all field for unknown JSON keys (kept for lossless round trips)."""
    return dataclasses.field(default=EMPTY, metadata={"extra": True}, compare=False, repr=False)


_FieldPlan = tuple[str, str, Codec, bool]
_PLANS: dict[type, tuple[tuple[_FieldPlan, ...], bool]] = {}


def _plan(cls: type) -> tuple[tuple[_FieldPlan, ...], bool]:
    plan = _PLANS.get(cls)
    if plan is None:
        fields: list[_FieldPlan] = []
        has_extra = False
        for f in dataclasses.fields(cls):
            if f.metadata.get("extra"):
                has_extra = True
            elif "json" in f.metadata:
                fields.append(
                    (f.name, f.metadata["json"], f.metadata["codec"], f.metadata["required"])
                )
        plan = (tuple(fields), has_extra)
        _PLANS[cls] = plan
    return plan


def decode_object(cls: type[T], value: Any, path: str = "") -> T:
    """Build ``cls`` from a JSON object; raises ModelError naming the field path."""
    if not isinstance(value, Mapping):
        raise ModelError(path or "(root)", f"must be an object, not {_json_type(value)}")
    fields, has_extra = _plan(cls)
    kwargs: dict[str, Any] = {}
    known = set()
    for attr, key, codec, required in fields:
        known.add(key)
        if key in value and value[key] is not None:
            try:
                kwargs[attr] = codec.decode(value[key], "")
            except ModelError as exc:
                # paths are built only on failure: the happy path formats no strings
                raise _within(exc, f"{path}.{key}" if path else key) from None
        elif required and key not in value:
            raise ModelError(f"{path}.{key}" if path else key, "required field is missing")
    if has_extra:
        unknown = {k: v for k, v in value.items() if k not in known}
        if unknown:
            kwargs["extra"] = _freeze_extra(unknown, path)
    return cls(**kwargs)


def _freeze_extra(unknown: dict[str, Any], path: str) -> FrozenDict:
    """The unknown keys of an object, frozen; a too-deep one is named in the error."""
    frozen = {}
    for key, item in unknown.items():
        try:
            frozen[key] = freeze(item, 1)
        except ModelError as exc:
            raise _within(exc, f"{path}.{key}" if path else key) from None
    return FrozenDict(frozen)


def _within(exc: ModelError, prefix: str) -> ModelError:
    """The same error with its field path placed under ``prefix``."""
    field = exc.field
    if not field:
        full = prefix
    elif field.startswith("["):
        full = prefix + field
    else:
        full = f"{prefix}.{field}" if prefix else field
    return ModelError(full, exc.reason)


def encode_object(value: Any) -> dict[str, Any]:
    """The JSON object for a model instance (omitempty for optional fields)."""
    fields, has_extra = _plan(type(value))
    out: dict[str, Any] = {}
    for attr, key, codec, required in fields:
        v = getattr(value, attr)
        if required or not codec.empty(v):
            out[key] = None if v is None else codec.encode(v)
    if has_extra and value.extra:
        for k, v in value.extra.items():
            out[k] = thaw(v)
    return out


def iter_field_names(cls: type) -> Iterator[str]:
    for _attr, key, _codec, _req in _plan(cls)[0]:
        yield key


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, Mapping):
        return "an object"
    return type(value).__name__
