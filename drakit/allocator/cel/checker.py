"""Static type checking of DRA selectors with Kubernetes 1.37's declarations.

Kubernetes type-checks every selector when it compiles it and rejects, at compile time,
what does not type-check: ``1 == 1.0``, ``[attr, 2]`` with ``attr`` of type ``dyn``,
``q.sign()`` (only ``sign(q)`` is declared), a result that is not a bool. The evaluating
engine (Rust) has no checker, so this module runs Google's C++ checker (``cel-expr-python``)
over the expression with the Kubernetes environment declared:

* the ``device`` variable (opaque ``kubernetes.DRADevice``) and its typed fields
  (``driver`` string, ``attributes`` map(string, map(string, dyn)), ``capacity``
  map(string, map(string, Quantity)), ``allowMultipleAllocations`` bool). The C++ binding
  cannot declare object types without protobuf descriptors, so ``device.attributes`` is
  checked as a variable ``device_attributes`` (padded to the same length: error columns
  stay right) and another field is "undefined field" from this module;
* ext strings v2, ext lists, ext sets, optional types, ``cel.bind``, two-variable
  comprehensions (the C++ extensions), and the Kubernetes libraries with their overload
  signatures (quantity, semver, lists, regex, URLs, IP, CIDR, named formats);
* ``CrossTypeNumericComparisons`` (``1 < 1.5`` is allowed; ``1 == 1.0`` is not), by
  redeclaring the ordering operators;
* ``HomogeneousAggregateLiterals`` and ``ValidateRegexLiterals``, which the C++ checker does
  not implement, are checked here on the checked AST (:mod:`drakit.allocator.cel.checked_ast`).

:func:`check` returns None or the Kubernetes-style message ("ERROR: <input>:1:3: found no
matching overload for '_==_' applied to '(int, double)'" plus the source line and a caret).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable
from functools import cache
from typing import Any, Final

from cel_expr_python import cel

from drakit.allocator.cel import checked_ast, regex
from drakit.allocator.cel.rewrite import Token, tokenize

__all__ = ["check"]

T: Final = cel.Type
QUANTITY: Final = T("kubernetes.Quantity")
SEMVER: Final = T("kubernetes.Semver")
URL: Final = T("kubernetes.URL")
IP: Final = T("net.IP")
CIDR: Final = T("net.CIDR")
FORMAT: Final = T("kubernetes.NamedFormat")

FORMAT_NAMES: Final = (
    "dns1123Label", "dns1123Subdomain", "dns1035Label", "qualifiedName", "dns1123LabelPrefix",
    "dns1123SubdomainPrefix", "dns1035LabelPrefix", "labelValue", "uri", "uuid", "byte",
    "date", "datetime",
)  # fmt: skip

_ENV_YAML: Final = """
name: kubernetes-dra-selectors
extensions:
  - name: lists
    version: 2
  - name: sets
  - name: optional
  - name: bindings
  - name: two-var-comprehensions
functions:
  # Declared here, not from Python: they need a type parameter or the optional type,
  # which the binding's Python types cannot express.
  - name: indexOf
    overloads:
      - {id: string_index_of_string, target: {type_name: string},
         args: [{type_name: string}], return: {type_name: int}}
      - {id: string_index_of_string_int, target: {type_name: string},
         args: [{type_name: string}, {type_name: int}], return: {type_name: int}}
      - {id: list_a_index_of_int,
         target: {type_name: list, params: [{type_name: A, is_type_param: true}]},
         args: [{type_name: A, is_type_param: true}], return: {type_name: int}}
  - name: lastIndexOf
    overloads:
      - {id: string_last_index_of_string, target: {type_name: string},
         args: [{type_name: string}], return: {type_name: int}}
      - {id: string_last_index_of_string_int, target: {type_name: string},
         args: [{type_name: string}, {type_name: int}], return: {type_name: int}}
      - {id: list_a_last_index_of_int,
         target: {type_name: list, params: [{type_name: A, is_type_param: true}]},
         args: [{type_name: A, is_type_param: true}], return: {type_name: int}}
  - name: format.named
    overloads:
      - {id: format-named, args: [{type_name: string}],
         return: {type_name: optional_type, params: [{type_name: kubernetes.NamedFormat}]}}
  - name: validate
    overloads:
      - {id: format-validate, target: {type_name: kubernetes.NamedFormat},
         args: [{type_name: string}],
         return: {type_name: optional_type,
                  params: [{type_name: list, params: [{type_name: string}]}]}}
stdlib:
  exclude_functions:
    - name: _<_
    - name: _<=_
    - name: _>_
    - name: _>=_
    - name: string
"""

_DEVICE_FIELDS: Final = ("driver", "attributes", "capacity", "allowMultipleAllocations")
_NUMERIC: Final = (("int64", T.INT), ("uint64", T.UINT), ("double", T.DOUBLE))
_ORDERED: Final = (
    ("string", T.STRING), ("bytes", T.BYTES), ("bool", T.BOOL),
    ("timestamp", T.TIMESTAMP), ("duration", T.DURATION),
)  # fmt: skip
_COMPARABLE: Final = (
    ("int", T.INT), ("uint", T.UINT), ("double", T.DOUBLE), ("bool", T.BOOL),
    ("duration", T.DURATION), ("timestamp", T.TIMESTAMP), ("string", T.STRING),
    ("bytes", T.BYTES),
)  # fmt: skip
_SUMMABLE: Final = (
    ("int", T.INT), ("uint", T.UINT), ("double", T.DOUBLE), ("duration", T.DURATION),
)  # fmt: skip


def _ov(oid: str, ret: Any, params: list[Any], member: bool = False) -> Any:
    return cel.Overload(oid, ret, params, is_member=member)


def _ordering() -> list[Any]:
    decls = []
    for op, name in (("_<_", "less"), ("_<=_", "less_equals"), ("_>_", "greater"),
                     ("_>=_", "greater_equals")):  # fmt: skip
        overloads = [
            _ov(f"{name}_{an}" if an == bn else f"{name}_{an}_{bn}", T.BOOL, [at, bt])
            for an, at in _NUMERIC
            for bn, bt in _NUMERIC
        ]
        overloads += [_ov(f"{name}_{n}", T.BOOL, [t, t]) for n, t in _ORDERED]
        decls.append(cel.FunctionDecl(op, overloads))
    return decls


def _string_conversions() -> Any:
    sources = (
        ("string", T.STRING), ("int64", T.INT), ("uint64", T.UINT), ("double", T.DOUBLE),
        ("bytes", T.BYTES), ("bool", T.BOOL), ("timestamp", T.TIMESTAMP),
        ("duration", T.DURATION), ("ip", IP), ("cidr", CIDR),
    )  # fmt: skip
    return cel.FunctionDecl("string", [_ov(f"{n}_to_string", T.STRING, [t]) for n, t in sources])


def _kubernetes_overloads() -> dict[str, list[Any]]:
    o: dict[str, list[Any]] = {}

    def add(name: str, *overloads: Any) -> None:
        o.setdefault(name, []).extend(overloads)

    # quantity
    add("quantity", _ov("string_to_quantity", QUANTITY, [T.STRING]))
    add("isQuantity", _ov("is_quantity_string", T.BOOL, [T.STRING]))
    add("sign", _ov("quantity_sign", T.INT, [QUANTITY]))
    add("isGreaterThan", _ov("quantity_is_greater_than", T.BOOL, [QUANTITY, QUANTITY], True))
    add("isLessThan", _ov("quantity_is_less_than", T.BOOL, [QUANTITY, QUANTITY], True))
    add("compareTo", _ov("quantity_compare_to", T.INT, [QUANTITY, QUANTITY], True))
    add("asApproximateFloat", _ov("quantity_get_float", T.DOUBLE, [QUANTITY], True))
    add("asInteger", _ov("quantity_get_int", T.INT, [QUANTITY], True))
    add("isInteger", _ov("quantity_is_integer", T.BOOL, [QUANTITY], True))
    for fn in ("add", "sub"):
        add(fn, _ov(f"quantity_{fn}", QUANTITY, [QUANTITY, QUANTITY], True),
            _ov(f"quantity_{fn}_int", QUANTITY, [QUANTITY, T.INT], True))  # fmt: skip
    # semver (version 1: normalize flag)
    add("semver", _ov("string_to_semver", SEMVER, [T.STRING]),
        _ov("string_bool_to_semver", SEMVER, [T.STRING, T.BOOL]))  # fmt: skip
    add("isSemver", _ov("is_semver_string", T.BOOL, [T.STRING]),
        _ov("is_semver_string_bool", T.BOOL, [T.STRING, T.BOOL]))  # fmt: skip
    add("isGreaterThan", _ov("semver_is_greater_than", T.BOOL, [SEMVER, SEMVER], True))
    add("isLessThan", _ov("semver_is_less_than", T.BOOL, [SEMVER, SEMVER], True))
    add("compareTo", _ov("semver_compare_to", T.INT, [SEMVER, SEMVER], True))
    for part in ("major", "minor", "patch"):
        add(part, _ov(f"semver_{part}", T.INT, [SEMVER], True))
    # Kubernetes lists (version 1) and DRA's includes
    for n, t in _COMPARABLE:
        add("isSorted", _ov(f"list_{n}_is_sorted_bool", T.BOOL, [T.List(t)], True))
        add("max", _ov(f"list_{n}_max_{n}", t, [T.List(t)], True))
        add("min", _ov(f"list_{n}_min_{n}", t, [T.List(t)], True))
    for n, t in _SUMMABLE:
        add("sum", _ov(f"list_{n}_sum_{n}", t, [T.List(t)], True))
    _strings_v2(add)
    add("includes", _ov("list_includes_dyn_dyn", T.BOOL, [T.DYN, T.DYN], True))
    # regex
    add("find", _ov("string_find_string", T.STRING, [T.STRING, T.STRING], True))
    add("findAll",
        _ov("string_find_all_string", T.List(T.STRING), [T.STRING, T.STRING], True),
        _ov("string_find_all_string_int", T.List(T.STRING), [T.STRING, T.STRING, T.INT],
            True))  # fmt: skip
    # URLs
    add("url", _ov("string_to_url", URL, [T.STRING]))
    add("isURL", _ov("is_url_string", T.BOOL, [T.STRING]))
    for fn, oid in (("getScheme", "scheme"), ("getHost", "host"), ("getHostname", "hostname"),
                    ("getPort", "port"), ("getEscapedPath", "escaped_path")):  # fmt: skip
        add(fn, _ov(f"url_get_{oid}", T.STRING, [URL], True))
    add("getQuery", _ov("url_get_query", T.Map(T.STRING, T.List(T.STRING)), [URL], True))
    # IP and CIDR
    add("ip", _ov("string_to_ip", IP, [T.STRING]), _ov("cidr_ip", IP, [CIDR], True))
    add("isIP", _ov("is_ip", T.BOOL, [T.STRING]))
    add("ip.isCanonical", _ov("ip_is_canonical", T.BOOL, [T.STRING]))
    add("family", _ov("ip_family", T.INT, [IP], True))
    for fn, oid in (("isUnspecified", "unspecified"), ("isLoopback", "loopback"),
                    ("isLinkLocalMulticast", "link_local_multicast"),
                    ("isLinkLocalUnicast", "link_local_unicast"),
                    ("isGlobalUnicast", "global_unicast")):  # fmt: skip
        add(fn, _ov(f"ip_is_{oid}", T.BOOL, [IP], True))
    add("cidr", _ov("string_to_cidr", CIDR, [T.STRING]))
    add("isCIDR", _ov("is_cidr", T.BOOL, [T.STRING]))
    add("containsIP", _ov("cidr_contains_ip_string", T.BOOL, [CIDR, T.STRING], True),
        _ov("cidr_contains_ip_ip", T.BOOL, [CIDR, IP], True))  # fmt: skip
    add("containsCIDR", _ov("cidr_contains_cidr_string", T.BOOL, [CIDR, T.STRING], True),
        _ov("cidr_contains_cidr", T.BOOL, [CIDR, CIDR], True))  # fmt: skip
    add("prefixLength", _ov("cidr_prefix_length", T.INT, [CIDR], True))
    add("masked", _ov("cidr_masked", CIDR, [CIDR], True))
    # named formats
    for name in FORMAT_NAMES:
        add(f"format.{name}", _ov(f"format-{name}", FORMAT, []))
    return o


def _strings_v2(add: Callable[..., None]) -> None:
    """cel-go's ext strings, version 2 (declared here: ``indexOf`` shares its name with the
    Kubernetes list function, and one name has one declaration in the C++ checker)."""
    s, i, ls = T.STRING, T.INT, T.List(T.STRING)
    add("charAt", _ov("string_char_at_int", s, [s, i], True))
    for fn, oid in (("lowerAscii", "lower_ascii"), ("upperAscii", "upper_ascii"),
                    ("trim", "trim")):  # fmt: skip
        add(fn, _ov(f"string_{oid}", s, [s], True))
    add("replace", _ov("string_replace_string_string", s, [s, s, s], True),
        _ov("string_replace_string_string_int", s, [s, s, s, i], True))  # fmt: skip
    add("split", _ov("string_split_string", ls, [s, s], True),
        _ov("string_split_string_int", ls, [s, s, i], True))  # fmt: skip
    add("substring", _ov("string_substring_int", s, [s, i], True),
        _ov("string_substring_int_int", s, [s, i, i], True))  # fmt: skip
    add("join", _ov("list_join", s, [ls], True), _ov("list_join_string", s, [ls, s], True))
    add("format", _ov("string_format", s, [s, T.List(T.DYN)], True))
    add("strings.quote", _ov("strings_quote", s, [s]))


def _variables() -> dict[str, Any]:
    attributes = T.Map(T.STRING, T.Map(T.STRING, T.DYN))
    return {
        "device": T.AbstractType("kubernetes.DRADevice"),
        "device_driver": T.STRING,
        "device_attributes": attributes,
        "device_capacity": T.Map(T.STRING, T.Map(T.STRING, QUANTITY)),
        "device_allowMultipleAllocations": T.BOOL,
    }


@cache
def _environment() -> Any:
    functions = [cel.FunctionDecl(n, ovs) for n, ovs in _kubernetes_overloads().items()]
    return cel.NewEnv(
        config=cel.NewEnvConfigFromYaml(_ENV_YAML),
        variables=_variables(),
        functions=[*functions, *_ordering(), _string_conversions()],
    )


_env_lock = threading.Lock()
_ISSUE: Final = re.compile(r"ERROR: <input>:(\d+):(\d+): (.*)")
_DEVICE_VARIABLE: Final = re.compile(
    r"device_(driver|attributes|capacity|allowMultipleAllocations)"
)


def check(expression: str) -> str | None:
    """None when ``expression`` type-checks as Kubernetes would; else the compile error."""
    try:
        source = _typed_device_fields(expression)
    except _UndefinedFieldError as exc:
        line = expression.count("\n", 0, exc.position) + 1
        column = exc.position - (expression.rfind("\n", 0, exc.position) + 1) + 1
        return _format(expression, [(line, column, str(exc))])
    with _env_lock:  # the binding's thread safety is not documented
        env = _environment()
        try:
            compiled = env.compile(source)
        except RuntimeError as exc:
            return _issues(expression, str(exc))
    problem = checked_ast.validate(compiled.serialize(), source) if _has_literals(source) else None
    if problem is not None:
        line, column, message = problem
        return _format(expression, [(line, column, message)])
    result = compiled.return_type().name().lower()
    if result not in ("bool", "dyn"):
        return f"must evaluate to bool or the unknown type, not {result}"
    return None


def _has_literals(source: str) -> bool:
    """Whether the checked-AST validators have anything to look at: a list or map literal,
    or a regex function (most selectors have neither, and skip decoding the AST)."""
    tokens = tokenize(source)
    for i, t in enumerate(tokens):
        if t.text == "{" or (t.kind == "ident" and t.text in ("matches", "find", "findAll")):
            return True
        if t.text in ("[", "[?") and (i == 0 or not _is_operand_end(tokens[i - 1])):
            return True
    return False


def _is_operand_end(t: Token) -> bool:
    return t.kind in ("ident", "str", "num") or t.text in (")", "]", "}")


class _UndefinedFieldError(ValueError):
    def __init__(self, name: str, position: int) -> None:
        super().__init__(f"undefined field '{name}'")
        self.position = position


def _typed_device_fields(expression: str) -> str:
    """The text the checker sees: ``device.F`` -> ``device_F`` padded with spaces to the
    same length (columns stay right), ``has(device.F)`` -> ``true`` padded, for the four
    fields of Kubernetes' device type; raises :class:`_UndefinedFieldError` for another field.
    Any other use of ``device`` meets its opaque type, as in Kubernetes."""
    chars = list(expression)
    tokens = tokenize(expression)
    for i in range(len(tokens) - 2):
        t, dot, field = tokens[i], tokens[i + 1], tokens[i + 2]
        if not (
            t.kind == "ident"
            and t.text == "device"
            and (i == 0 or tokens[i - 1].text != ".")
            and dot.text == "."
            and field.kind == "ident"
        ):
            continue
        if i + 3 < len(tokens) and tokens[i + 3].text == "(":
            continue  # a method call on device: the checker reports it
        inside_has = _inside_has(tokens, i)
        if field.text not in _DEVICE_FIELDS:
            # cel-go reports has()'s missing field at the macro's parenthesis
            raise _UndefinedFieldError(field.text, tokens[i - 1].pos if inside_has else dot.pos)
        if inside_has:
            start, end = tokens[i - 2].pos, tokens[i + 3].pos + 1
            replacement = "true"
        else:
            start, end = t.pos, field.pos + len(field.text)
            replacement = f"device_{field.text}"
        chars[start:end] = list(replacement.ljust(end - start))
    return "".join(chars)


def _inside_has(tokens: list[Token], i: int) -> bool:
    return (
        i >= 2
        and tokens[i - 1].text == "("
        and tokens[i - 2].text == "has"
        and i + 3 < len(tokens)
        and tokens[i + 3].text == ")"
    )


def _issues(expression: str, text: str) -> str:
    found = [(int(m[1]), int(m[2]), m[3].strip()) for m in _ISSUE.finditer(text)]
    if not found:
        return text.removeprefix("INVALID_ARGUMENT: ")
    return _format(expression, found)


def _format(expression: str, issues: Iterable[tuple[int, int, str]]) -> str:
    """Kubernetes' (cel-go's) issue text: one error per line, each with its source line."""
    lines = expression.split("\n")
    out = []
    for line, column, raw in issues:
        message = _DEVICE_VARIABLE.sub(r"device.\1", re.sub(r"\s*\[INVALID_ARGUMENT\]$", "", raw))
        src = lines[line - 1] if 0 < line <= len(lines) else ""
        out.append(f"ERROR: <input>:{line}:{column}: {message}\n | {src}\n | {'.' * (column - 1)}^")
    return "\n".join(out)


def regex_literal_error(pattern: str) -> str | None:
    """RE2's verdict on a constant pattern (``ValidateRegexLiterals``)."""
    try:
        regex.compile_pattern(pattern)
    except regex.RegexError as exc:
        return str(exc)
    return None
