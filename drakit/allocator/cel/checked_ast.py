"""Validators that Kubernetes' CEL environment runs after type checking, on a checked AST.

The C++ checker (:mod:`drakit.allocator.cel.checker`) returns its result as a serialized
``google.protobuf.Any`` holding a ``cel.expr.CheckedExpr``; this module reads the few
fields it needs straight from the protobuf wire format (no generated classes: the
``cel.expr`` protos are not shipped in a Python package) and applies:

* ``ValidateHomogeneousAggregateLiterals``: every element of a list literal, and every key
  and every value of a map literal, has the same type as the first ("expected type 'dyn'
  but found 'int'"); literals inside a ``format`` call are exempt, as in cel-go;
* cel-go's ``string.format`` validator: a constant format string given a list literal must
  have one argument per clause, each of a type its clause accepts
  (:func:`drakit.allocator.cel.strformat.check_literal_call`);
* ``ValidateRegexLiterals``: a constant pattern given to ``matches`` must be valid RE2
  ("invalid matches argument"); constant patterns of ``find``/``findAll`` too (Kubernetes
  compiles them when it builds the program, a compile-time error as well).

:func:`validate` returns ``(line, column, message)`` for the first problem, or None.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Final

from drakit.allocator.cel import regex, strformat

__all__ = ["validate"]

Fields = dict[int, list[int | bytes]]

_PRIMITIVES: Final = {1: "bool", 2: "int", 3: "uint", 4: "double", 5: "string", 6: "bytes"}
_WELL_KNOWN: Final = {1: "any", 2: "timestamp", 3: "duration"}
_REGEX_FUNCTIONS: Final = {"matches": "invalid matches argument", "find": "", "findAll": ""}


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7


def _fields(data: bytes) -> Fields:
    """Field number -> values (ints for varints and fixed, bytes for length-delimited)."""
    out: Fields = {}
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        value: int | bytes
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 1:
            value, pos = int.from_bytes(data[pos : pos + 8], "little"), pos + 8
        elif wire == 2:
            length, pos = _varint(data, pos)
            value, pos = data[pos : pos + length], pos + length
        elif wire == 5:
            value, pos = int.from_bytes(data[pos : pos + 4], "little"), pos + 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
        out.setdefault(number, []).append(value)
    return out


def _bytes(f: Fields, number: int) -> bytes:
    values = f.get(number)
    return values[0] if values and isinstance(values[0], bytes) else b""


def _int(f: Fields, number: int) -> int:
    values = f.get(number)
    return values[0] if values and isinstance(values[0], int) else 0


def format_type(data: bytes) -> str:
    """cel-go's ``FormatCheckedType`` for a serialized ``cel.expr.Type``."""
    f = _fields(data)
    if 1 in f:
        return "dyn"
    if 2 in f:
        return "null"
    if 3 in f:
        return _PRIMITIVES.get(_int(f, 3), "?")
    if 4 in f:
        return f"wrapper({_PRIMITIVES.get(_int(f, 4), '?')})"
    if 5 in f:
        return _WELL_KNOWN.get(_int(f, 5), "?")
    if 6 in f:
        return f"list({format_type(_bytes(_fields(_bytes(f, 6)), 1))})"
    if 7 in f:
        m = _fields(_bytes(f, 7))
        return f"map({format_type(_bytes(m, 1))}, {format_type(_bytes(m, 2))})"
    if 9 in f:
        return _bytes(f, 9).decode()
    if 10 in f:
        return _bytes(f, 10).decode()
    if 11 in f:
        inner = _bytes(f, 11)
        return f"type({format_type(inner)})" if inner else "type"
    if 14 in f:
        a = _fields(_bytes(f, 14))
        name = _bytes(a, 1).decode()
        params = [format_type(p) for p in a.get(2, []) if isinstance(p, bytes)]
        return f"{name}({', '.join(params)})" if params else name
    return "!error!"


@dataclass
class _Checked:
    types: dict[int, bytes] = field(default_factory=dict)
    positions: dict[int, int] = field(default_factory=dict)
    line_offsets: list[int] = field(default_factory=list)


def _packed(data: bytes) -> list[int]:
    values, pos = [], 0
    while pos < len(data):
        value, pos = _varint(data, pos)
        values.append(value)
    return values


def _checked(serialized: bytes) -> tuple[_Checked, bytes]:
    any_value = _fields(serialized)
    checked = _fields(_bytes(any_value, 2))
    info = _Checked()
    for entry in checked.get(3, []):
        if isinstance(entry, bytes):
            e = _fields(entry)
            info.types[_int(e, 1)] = _bytes(e, 2)
    source = _fields(_bytes(checked, 5))
    for entry in source.get(4, []):
        if isinstance(entry, bytes):
            e = _fields(entry)
            info.positions[_int(e, 1)] = _int(e, 2)
    for offsets in source.get(3, []):
        info.line_offsets.extend(_packed(offsets) if isinstance(offsets, bytes) else [offsets])
    return info, _bytes(checked, 4)


@dataclass(frozen=True)
class _Node:
    id: int
    kind: int  # the Expr oneof field number: 3 const ... 9 comprehension
    body: Fields
    in_format: bool


def _children(node: _Node) -> Iterator[bytes]:
    b = node.body
    if node.kind == 5:  # select: operand
        yield _bytes(b, 1)
    elif node.kind == 6:  # call: target, args
        if 1 in b:
            yield _bytes(b, 1)
        yield from (a for a in b.get(3, []) if isinstance(a, bytes))
    elif node.kind == 7:  # list: elements
        yield from (a for a in b.get(1, []) if isinstance(a, bytes))
    elif node.kind == 8:  # struct/map: entries' keys and values
        for entry in b.get(2, []):
            if isinstance(entry, bytes):
                ef = _fields(entry)
                yield from (_bytes(ef, n) for n in (3, 4) if n in ef)
    elif node.kind == 9:  # comprehension: range, init, condition, step, result
        yield from (_bytes(b, n) for n in (2, 4, 5, 6, 7) if n in b)


def _walk(data: bytes, in_format: bool = False) -> Iterator[_Node]:
    f = _fields(data)
    kind = next((k for k in range(3, 10) if k in f), 0)
    node = _Node(_int(f, 2), kind, _fields(_bytes(f, kind)) if kind else {}, in_format)
    yield node
    child_in_format = in_format or (kind == 6 and _bytes(node.body, 2) == b"format")
    for child in _children(node):
        if child:
            yield from _walk(child, child_in_format)


def _expr_id(data: bytes) -> int:
    return _int(_fields(data), 2)


def _mismatch(items: list[tuple[int, bool]], info: _Checked) -> tuple[int, str] | None:
    """First (id, message) where a type differs from the first item's (optional items
    compare their inner type)."""
    first: bytes | None = None
    for expr_id, optional in items:
        t = info.types.get(expr_id, b"")
        if optional:
            t = _optional_inner(t)
        if first is None:
            first = t
        elif t != first:
            return expr_id, f"expected type '{format_type(first)}' but found '{format_type(t)}'"
    return None


def _optional_inner(t: bytes) -> bytes:
    a = _fields(_bytes(_fields(t), 14))
    params = [p for p in a.get(2, []) if isinstance(p, bytes)]
    return params[0] if params else t


def _homogeneous(node: _Node, info: _Checked) -> tuple[int, str] | None:
    if node.in_format:
        return None
    if node.kind == 7:
        optional: set[int] = set()
        for value in node.body.get(2, []):  # repeated int32, packed or not
            optional.update(_packed(value) if isinstance(value, bytes) else [value])
        elements = [e for e in node.body.get(1, []) if isinstance(e, bytes)]
        return _mismatch([(_expr_id(e), i in optional) for i, e in enumerate(elements)], info)
    if node.kind == 8 and not _bytes(node.body, 1):  # a map literal (no message name)
        keys, values = [], []
        for entry in node.body.get(2, []):
            if isinstance(entry, bytes):
                ef = _fields(entry)
                keys.append((_expr_id(_bytes(ef, 3)), False))
                values.append((_expr_id(_bytes(ef, 4)), bool(_int(ef, 5))))
        return _mismatch(keys, info) or _mismatch(values, info)
    return None


def _regex_literal(node: _Node) -> tuple[int, str] | None:
    if node.kind != 6:
        return None
    name = _bytes(node.body, 2).decode()
    if name not in _REGEX_FUNCTIONS:
        return None
    args = [a for a in node.body.get(3, []) if isinstance(a, bytes)]
    pattern = args[0] if 1 in node.body else (args[1] if len(args) > 1 else b"")
    pf = _fields(pattern) if pattern else {}
    constant = _fields(_bytes(pf, 3)) if 3 in pf else {}
    if 6 not in constant:
        return None
    text = _bytes(constant, 6).decode("utf-8", "surrogatepass")
    try:
        regex.compile_pattern(text)
    except regex.RegexError as exc:
        return _int(pf, 2), _REGEX_FUNCTIONS[name] or str(exc)
    return None


_STATIC_PRIMITIVES: Final = {1: "bool", 2: "int", 3: "uint", 4: "double", 5: "string", 6: "bytes"}
_STATIC_WELL_KNOWN: Final = {2: ("timestamp", "google.protobuf.Timestamp"),
                             3: ("duration", "google.protobuf.Duration")}  # fmt: skip


def _static_kind(t: bytes) -> tuple[str, str]:
    """(kind, cel-go type name) of a checked type, as the format validator compares them."""
    f = _fields(t)
    if 1 in f or 10 in f or 12 in f or not f:  # dyn, an unresolved type parameter, error
        return "dyn", "dyn"
    if 2 in f:
        return "null", "null_type"
    if 3 in f:
        name = _STATIC_PRIMITIVES.get(_int(f, 3), "?")
        return name, name
    if 5 in f:
        return _STATIC_WELL_KNOWN.get(_int(f, 5), ("other", "google.protobuf.Any"))
    if 6 in f:
        return "list", "list"
    if 7 in f:
        return "map", "map"
    if 11 in f:
        return "type", "type"
    name = format_type(t)
    return "other", name.split("(", 1)[0]


def _static_arg(data: bytes, info: _Checked) -> strformat.StaticArg:
    f = _fields(data)
    expr_id = _int(f, 2)
    kind, name = _static_kind(info.types.get(expr_id, b""))
    parts: list[bytes] = []
    if 7 in f:
        parts = [e for e in _fields(_bytes(f, 7)).get(1, []) if isinstance(e, bytes)]
    elif 8 in f and not _bytes(_fields(_bytes(f, 8)), 1):  # a map literal
        for entry in _fields(_bytes(f, 8)).get(2, []):
            if isinstance(entry, bytes):
                ef = _fields(entry)
                parts.extend(_bytes(ef, n) for n in (3, 4) if n in ef)
    return strformat.StaticArg(expr_id, kind, name, tuple(_static_arg(p, info) for p in parts if p))


def _format_literal(node: _Node, info: _Checked) -> tuple[int, str] | None:
    """cel-go's format validator on ``"<constant>".format([<list literal>])``."""
    if node.kind != 6 or _bytes(node.body, 2) != b"format" or 1 not in node.body:
        return None
    target = _fields(_bytes(node.body, 1))
    constant = _fields(_bytes(target, 3)) if 3 in target else {}
    args = [a for a in node.body.get(3, []) if isinstance(a, bytes)]
    if 6 not in constant or len(args) != 1 or 7 not in _fields(args[0]):
        return None
    elements = [e for e in _fields(_bytes(_fields(args[0]), 7)).get(1, []) if isinstance(e, bytes)]
    fmt = _bytes(constant, 6).decode("utf-8", "surrogatepass")
    problem = strformat.check_literal_call(fmt, [_static_arg(e, info) for e in elements])
    if problem is None:
        return None
    return (problem.expr_id if problem.expr_id is not None else node.id), str(problem)


def _location(info: _Checked, expr_id: int, source: str) -> tuple[int, int]:
    offset = info.positions.get(expr_id, 0)
    line_start = source.rfind("\n", 0, offset) + 1
    return source.count("\n", 0, offset) + 1, offset - line_start + 1


def validate(serialized: bytes, source: str) -> tuple[int, int, str] | None:
    """The first homogeneous-literal, regex-literal or format-literal problem:
    (line, column, message)."""
    info, root = _checked(serialized)
    for node in _walk(root):
        problem = _homogeneous(node, info) or _regex_literal(node) or _format_literal(node, info)
        if problem is not None:
            line, column = _location(info, problem[0], source)
            return line, column, problem[1]
    return None
