"""The Kubernetes CEL libraries available to DRA selectors, as functions for the Rust engine.

The engine calls a registered Python function for ``f(x, ...)`` and for the method form
``x.f(...)``; one Python function therefore serves every overload of a name and dispatches
on the receiver's type. Kubernetes object types that the engine cannot hold natively
(Quantity, Semver, IP, CIDR, URL) are carried as one-key maps whose single value is a
*normalized* text, so CEL's ``==`` on them is semantic equality, as in Kubernetes:
``quantity("1Ki") == quantity("1024")`` and ``semver("1.0.0+a") == semver("1.0.0")``.

Libraries (Kubernetes 1.37 base environment plus DRA's own ``includes``):
quantity, semver, lists (``isSorted sum min max indexOf lastIndexOf includes``), regex
(``find findAll``), ext strings (``charAt indexOf lastIndexOf lowerAscii upperAscii replace
split substring trim join format strings.quote reverse``), ext sets, ext lists (``slice
flatten lists.range distinct reverse sort``), URLs, IP and CIDR, and named formats
(``format.dns1123Label()``... ``.validate(s)``, ``format.named(n)``). Errors raised here
surface as CEL runtime errors.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import functools
import ipaddress
import json
import re
from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import Any, Final
from urllib.parse import parse_qs, urlsplit

import cel as _cel

from drakit.allocator.cel import budget, regex, strformat
from drakit.allocator.quantity import Quantity, QuantityError
from drakit.allocator.semver import is_semver

__all__ = ["FUNCTIONS", "quantity_value", "semver_value"]

QUANTITY_KEY: Final = "__k8s_quantity__"
SEMVER_KEY: Final = "__k8s_semver__"
IP_KEY: Final = "__k8s_ip__"
CIDR_KEY: Final = "__k8s_cidr__"
URL_KEY: Final = "__k8s_url__"
MAX_INCLUDES_LIST: Final = 48
INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1


class CELFunctionError(ValueError):
    """A library function refused its arguments (becomes a CEL runtime error)."""


# --------------------------------------------------------------------------- values


def quantity_value(q: Quantity) -> dict[str, str]:
    """The CEL value for a quantity (normalized so that ``==`` compares numerically)."""
    v = q.value
    return {QUANTITY_KEY: f"{v.numerator}/{v.denominator}"}


# Every device carries the same few quantity and version texts, evaluated again for each
# device and selector: parse each text once (bounded, so hostile input cannot grow them).
_PARSE_CACHE_SIZE: Final = 4096


@functools.lru_cache(maxsize=_PARSE_CACHE_SIZE)
def _fraction(text: str) -> Fraction:
    return Fraction(text)


@functools.lru_cache(maxsize=_PARSE_CACHE_SIZE)
def _semver_parts(text: str) -> tuple[int, int, int, str]:
    m = _SEMVER_RE.match(text)
    assert m is not None
    return int(m.group(1)), int(m.group(2)), int(m.group(3)), m.group(4) or ""


def _as_quantity(v: Any) -> Fraction | None:
    if isinstance(v, dict) and len(v) == 1 and QUANTITY_KEY in v:
        return _fraction(v[QUANTITY_KEY])
    return None


def _q(v: Fraction) -> dict[str, str]:
    return {QUANTITY_KEY: f"{v.numerator}/{v.denominator}"}


_SEMVER_RE: Final = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-([0-9A-Za-z.-]+))?(?:\+([0-9A-Za-z.-]+))?$"
)


def semver_value(text: str) -> dict[str, str]:
    """The CEL value for a semantic version (build metadata dropped: it never compares)."""
    if not is_semver(text):
        raise CELFunctionError(f"invalid semver {text!r}")
    return {SEMVER_KEY: text.split("+", 1)[0]}


def _as_semver(v: Any) -> tuple[int, int, int, str] | None:
    if isinstance(v, dict) and len(v) == 1 and SEMVER_KEY in v:
        return _semver_parts(v[SEMVER_KEY])
    return None


def _semver_cmp(a: tuple[int, int, int, str], b: tuple[int, int, int, str]) -> int:
    if a[:3] != b[:3]:
        return -1 if a[:3] < b[:3] else 1
    pa, pb = a[3], b[3]
    if pa == pb:
        return 0
    if not pa:
        return 1  # a release outranks any pre-release
    if not pb:
        return -1
    for x, y in zip(pa.split("."), pb.split("."), strict=False):
        if x == y:
            continue
        xn, yn = x.isdigit(), y.isdigit()
        if xn and yn:
            return -1 if int(x) < int(y) else 1
        if xn != yn:
            return -1 if xn else 1  # numeric identifiers rank lower
        return -1 if x < y else 1
    la, lb = len(pa.split(".")), len(pb.split("."))
    return (la > lb) - (la < lb)


def _normalize_semver(s: str) -> str:
    """Kubernetes' optional normalization: drop a leading v, strip leading zeros, fill x.y."""
    s = s.removeprefix("v")
    parts = s.split(".", 2)
    for i, part in enumerate(parts):
        if len(part) > 1:
            stripped = part.lstrip("0")
            if not stripped or not stripped[0].isdigit():
                stripped = "0" + stripped
            parts[i] = stripped
    if len(parts) < 3:
        if any(c in parts[-1] for c in "+-"):
            raise CELFunctionError("short version cannot contain PreRelease/Build meta data")
        parts += ["0"] * (3 - len(parts))
    return ".".join(parts)


# --------------------------------------------------------------------------- quantity/semver


def _quantity(s: Any) -> dict[str, str]:
    if not isinstance(s, str):
        raise CELFunctionError("quantity() needs a string")
    return dict(_quantity_of(s))  # a copy: the engine may keep what it is given


@functools.lru_cache(maxsize=_PARSE_CACHE_SIZE)
def _quantity_of(s: str) -> dict[str, str]:
    try:
        return quantity_value(Quantity.parse(s))
    except QuantityError as exc:
        raise CELFunctionError(str(exc)) from None


def _constant(value: Callable[[str], dict[str, str]]) -> Callable[[str], str | None]:
    """A folder for :func:`drakit.allocator.cel.rewrite.rewrite`: the CEL map literal of
    ``value(literal)``, or None when the literal does not parse (the call then stays, and
    fails at run time with its usual message)."""

    def fold(literal: str) -> str | None:
        try:
            folded = value(literal)
        except CELFunctionError:
            return None
        return "{" + ", ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in folded.items()) + "}"

    return fold


def _is_quantity(s: Any) -> bool:
    try:
        Quantity.parse(s)
    except QuantityError:
        return False
    return isinstance(s, str)


def _semver(s: Any, normalize: bool = False) -> dict[str, str]:
    if not isinstance(s, str):
        raise CELFunctionError("semver() needs a string")
    text = _normalize_semver(s) if normalize else s
    return semver_value(text)


#: Calls with a constant argument folded at compile time: the value is the same map the
#: function returns, built by the engine instead of a callback into Python per evaluation.
CONSTANT_FOLDERS: Final[Mapping[str, Callable[[str], str | None]]] = {
    "quantity": _constant(_quantity_of),
    "semver": _constant(_semver),
}


def _is_semver(s: Any, normalize: bool = False) -> bool:
    try:
        _semver(s, normalize)
    except CELFunctionError:
        return False
    return True


def _need_quantity(v: Any, fn: str) -> Fraction:
    q = _as_quantity(v)
    if q is None:
        raise CELFunctionError(f"no such overload: {fn} on {type(v).__name__}")
    return q


def _sign(v: Any) -> int:
    q = _need_quantity(v, "sign")
    return (q > 0) - (q < 0)


def _is_integer(v: Any) -> bool:
    q = _need_quantity(v, "isInteger")
    return q.denominator == 1 and INT64_MIN <= q <= INT64_MAX


def _as_integer(v: Any) -> int:
    if not _is_integer(v):
        raise CELFunctionError("cannot convert value to integer")
    return int(_need_quantity(v, "asInteger"))


def _as_float(v: Any) -> float:
    return float(_need_quantity(v, "asApproximateFloat"))


def _add(a: Any, b: Any) -> dict[str, str]:
    qa = _need_quantity(a, "add")
    qb = _as_quantity(b)
    if qb is None:
        if isinstance(b, bool) or not isinstance(b, int):
            raise CELFunctionError("no such overload: add")
        qb = Fraction(b)
    return _q(qa + qb)


def _sub(a: Any, b: Any) -> dict[str, str]:
    qa = _need_quantity(a, "sub")
    qb = _as_quantity(b)
    if qb is None:
        if isinstance(b, bool) or not isinstance(b, int):
            raise CELFunctionError("no such overload: sub")
        qb = Fraction(b)
    return _q(qa - qb)


def _compare_to(a: Any, b: Any) -> int:
    qa, qb = _as_quantity(a), _as_quantity(b)
    if qa is not None and qb is not None:
        return (qa > qb) - (qa < qb)
    sa, sb = _as_semver(a), _as_semver(b)
    if sa is not None and sb is not None:
        return _semver_cmp(sa, sb)
    raise CELFunctionError("no such overload: compareTo needs two quantities or two semvers")


def _is_greater(a: Any, b: Any) -> bool:
    return _compare_to(a, b) > 0


def _is_less(a: Any, b: Any) -> bool:
    return _compare_to(a, b) < 0


def _semver_part(index: int, name: str) -> Callable[[Any], int]:
    def part(v: Any) -> int:
        s = _as_semver(v)
        if s is None:
            raise CELFunctionError(f"no such overload: {name}")
        return s[index]  # type: ignore[return-value]

    return part


# --------------------------------------------------------------------------- lists


def _need_list(v: Any, fn: str) -> list[Any]:
    if not isinstance(v, list):
        raise CELFunctionError(f"no such overload: {fn} on {type(v).__name__}")
    return v


def _sort_key(v: Any) -> Any:
    q = _as_quantity(v)
    if q is not None:
        return q
    s = _as_semver(v)
    if s is not None:
        return _SemverKey(s)
    return v


class _SemverKey:
    __slots__ = ("v",)

    def __init__(self, v: tuple[int, int, int, str]) -> None:
        self.v = v

    def __lt__(self, other: _SemverKey) -> bool:
        return _semver_cmp(self.v, other.v) < 0


def _check_homogeneous(items: list[Any], fn: str) -> None:
    kinds = {type(x) for x in items}
    numeric = {int, float}
    if len(kinds) > 1 and not kinds <= numeric:
        raise CELFunctionError(f"no such overload: {fn} on a list of mixed types")


def _is_sorted(v: Any) -> bool:
    items = _need_list(v, "isSorted")
    _check_homogeneous(items, "isSorted")
    keys = [_sort_key(x) for x in items]
    return all(not (keys[i + 1] < keys[i]) for i in range(len(keys) - 1))


def _sum(v: Any) -> Any:
    items = _need_list(v, "sum")
    if not items:
        return 0
    _check_homogeneous(items, "sum")
    if any(isinstance(x, bool) or not isinstance(x, int | float) for x in items):
        raise CELFunctionError("no such overload: sum needs numbers")
    total = sum(items)
    if isinstance(total, int) and not INT64_MIN <= total <= INT64_MAX:
        raise CELFunctionError("integer overflow")
    return total


def _min(v: Any, *rest: Any) -> Any:
    items = [v, *rest] if rest else _need_list(v, "min")
    if not items:
        raise CELFunctionError("min called on empty list")
    _check_homogeneous(items, "min")
    return min(items, key=_sort_key)


def _max(v: Any, *rest: Any) -> Any:
    items = [v, *rest] if rest else _need_list(v, "max")
    if not items:
        raise CELFunctionError("max called on empty list")
    _check_homogeneous(items, "max")
    return max(items, key=_sort_key)


def _cel_equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) != isinstance(b, bool):
        return False
    return bool(a == b)


def _index_of(v: Any, x: Any, start: int | None = None) -> int:
    if isinstance(v, str):
        if not isinstance(x, str):
            raise CELFunctionError("no such overload: indexOf")
        begin = 0 if start is None else start
        if begin < 0 or begin > len(v):
            raise CELFunctionError(f"index out of range: {begin}")
        return v.find(x, begin)
    items = _need_list(v, "indexOf")
    for i, item in enumerate(items):
        if _cel_equal(item, x):
            return i
    return -1


def _last_index_of(v: Any, x: Any, start: int | None = None) -> int:
    if isinstance(v, str):
        if not isinstance(x, str):
            raise CELFunctionError("no such overload: lastIndexOf")
        end = len(v) if start is None else start
        if end < 0 or end > len(v):
            raise CELFunctionError(f"index out of range: {end}")
        return v.rfind(x, 0, end + len(x))
    items = _need_list(v, "lastIndexOf")
    for i in range(len(items) - 1, -1, -1):
        if _cel_equal(items[i], x):
            return i
    return -1


def _includes(v: Any, x: Any) -> bool:
    if isinstance(v, list):
        if len(v) > MAX_INCLUDES_LIST:
            raise CELFunctionError(
                f"includes() supports lists of at most {MAX_INCLUDES_LIST} items, got {len(v)}"
            )
        return any(_cel_equal(item, x) for item in v)
    return _cel_equal(v, x)


# --------------------------------------------------------------------------- regex


# RE2 (linear time, Go's syntax and errors): see allocator.cel.regex.


def _regex_args(s: Any, pattern: Any, fn: str) -> tuple[str, str]:
    if not isinstance(s, str) or not isinstance(pattern, str):
        raise CELFunctionError(f"no such overload: {fn}")
    budget.charge_regex(len(s), len(pattern))
    return s, pattern


def _illegal(exc: regex.RegexError) -> CELFunctionError:
    return CELFunctionError(f"Illegal regex: {exc}")


def _matches(s: Any, pattern: Any) -> bool:
    s, pattern = _regex_args(s, pattern, "matches")
    try:
        return regex.matches(s, pattern)
    except regex.RegexError as exc:
        raise _illegal(exc) from None


def _find(s: Any, pattern: Any) -> str:
    s, pattern = _regex_args(s, pattern, "find")
    try:
        return regex.find(s, pattern)
    except regex.RegexError as exc:
        raise _illegal(exc) from None


def _find_all(s: Any, pattern: Any, limit: int = -1) -> list[str]:
    s, pattern = _regex_args(s, pattern, "findAll")
    try:
        return regex.find_all(s, pattern, limit)
    except regex.RegexError as exc:
        raise _illegal(exc) from None


# --------------------------------------------------------------------------- strings


def _need_str(v: Any, fn: str) -> str:
    if not isinstance(v, str):
        raise CELFunctionError(f"no such overload: {fn} on {type(v).__name__}")
    return v


def _parses(parse: Callable[[Any], object], s: Any) -> bool:
    """Whether ``parse(s)`` accepts ``s`` (the library's ``isX`` functions)."""
    try:
        parse(s)
    except CELFunctionError:
        return False
    return True


def _traversed(s: Any, fn: str, factor: float = 1.0) -> str:
    """``s`` as a string, charged as one traversal (Kubernetes' CallCost for ``fn``)."""
    text = _need_str(s, fn)
    budget.charge_string(len(text), factor)
    return text


def _char_at(s: Any, i: int) -> str:
    s = _need_str(s, "charAt")
    if i < 0 or i > len(s):
        raise CELFunctionError(f"index out of range: {i}")
    return s[i] if i < len(s) else ""


def _substring(s: Any, start: int, end: int | None = None) -> str:
    text = _traversed(s, "substring")
    stop = len(text) if end is None else end
    if start < 0 or start > len(text) or stop < start or stop > len(text):
        raise CELFunctionError(f"substring index out of range: [{start}, {stop})")
    return text[start:stop]


def _replace(s: Any, old: Any, new: Any, n: int = -1) -> str:
    text = _traversed(s, "replace", 2)
    return text.replace(str(old), str(new), n if n >= 0 else -1)


def _split(s: Any, sep: Any, n: int = -1) -> list[str]:
    text = _traversed(s, "split", 2)
    separator = _need_str(sep, "split")
    if n == 0:
        return []
    if separator == "":
        parts = list(text)
        if n > 0 and len(parts) > n:
            parts = [*parts[: n - 1], "".join(parts[n - 1 :])]
        return parts
    return text.split(separator, n - 1) if n > 0 else text.split(separator)


def _join(items: Any, sep: str = "") -> str:
    items = _need_list(items, "join")
    if not all(isinstance(x, str) for x in items):
        raise CELFunctionError("join needs a list of strings")
    joined = str(sep).join(items)
    budget.charge_string(len(joined), 2)
    return joined


def _reverse(v: Any) -> Any:
    # lists only: Kubernetes 1.37 ships ext strings v2, which has no string reverse()
    return list(reversed(_need_list(v, "reverse")))


def _quote(s: Any) -> str:
    s = _need_str(s, "strings.quote")
    escaped = (
        s.replace("\\", "\\\\")
        .replace('"', '\\"')
        .replace("\n", "\\n")
        .replace("\t", "\\t")
        .replace("\r", "\\r")
    )
    return f'"{escaped}"'


def _format(fmt: Any, args: Any) -> str:
    """``fmt.format(args)`` with Kubernetes' clause rules
    (:mod:`drakit.allocator.cel.strformat`)."""
    fmt = _need_str(fmt, "format")
    try:
        return strformat.format_values(fmt, _need_list(args, "format"))
    except strformat.FormatError as exc:
        raise CELFunctionError(str(exc)) from None


# --------------------------------------------------------------------------- sets / lists ext


def _sets_contains(a: Any, b: Any) -> bool:
    la, lb = _need_list(a, "sets.contains"), _need_list(b, "sets.contains")
    return all(any(_cel_equal(x, y) for x in la) for y in lb)


def _sets_equivalent(a: Any, b: Any) -> bool:
    return _sets_contains(a, b) and _sets_contains(b, a)


def _sets_intersects(a: Any, b: Any) -> bool:
    la, lb = _need_list(a, "sets.intersects"), _need_list(b, "sets.intersects")
    return any(any(_cel_equal(x, y) for x in la) for y in lb)


def _slice(v: Any, start: int, end: int) -> list[Any]:
    items = _need_list(v, "slice")
    if start < 0 or end < 0 or start > end or end > len(items):
        raise CELFunctionError(f"slice index out of range: [{start}, {end})")
    return items[start:end]


def _flatten(v: Any, depth: int = 1) -> list[Any]:
    items = _need_list(v, "flatten")
    if depth < 0:
        raise CELFunctionError("level must be non-negative")
    out: list[Any] = []
    for x in items:
        if isinstance(x, list) and depth > 0:
            out.extend(_flatten(x, depth - 1))
        else:
            out.append(x)
    return out


def _range(n: int) -> list[int]:
    budget.charge(max(n, 0))  # one unit per element, charged before the list exists
    return list(range(n))


def _distinct(v: Any) -> list[Any]:
    out: list[Any] = []
    for x in _need_list(v, "distinct"):
        if not any(_cel_equal(x, y) for y in out):
            out.append(x)
    return out


def _sort(v: Any) -> list[Any]:
    items = _need_list(v, "sort")
    _check_homogeneous(items, "sort")
    return sorted(items, key=_sort_key)


# --------------------------------------------------------------------------- ip / cidr / url


def _ip(s: Any) -> dict[str, str]:
    if isinstance(s, dict) and CIDR_KEY in s:
        return _cidr_ip(s)
    s = _need_str(s, "ip")
    if "%" in s:
        raise CELFunctionError("IP address with zone value is not allowed")
    try:
        addr = ipaddress.ip_address(s)
    except ValueError:
        raise CELFunctionError(f"IP Address {s!r} parse error during conversion") from None
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        raise CELFunctionError("IPv4-mapped IPv6 address is not allowed")
    return {IP_KEY: addr.compressed}


def _is_ip(s: Any) -> bool:
    return _parses(_ip, s)


def _as_ip(v: Any) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    if isinstance(v, dict) and IP_KEY in v:
        return ipaddress.ip_address(v[IP_KEY])
    raise CELFunctionError("no such overload: expected an IP address")


def _cidr(s: Any) -> dict[str, str]:
    s = _need_str(s, "cidr")
    try:
        net = ipaddress.ip_interface(s)
    except ValueError:
        raise CELFunctionError(f"network address {s!r} parse error during conversion") from None
    if "/" not in s:
        raise CELFunctionError(f"network address {s!r} parse error during conversion")
    return {CIDR_KEY: net.with_prefixlen}


def _is_cidr(s: Any) -> bool:
    return _parses(_cidr, s)


def _as_cidr(v: Any) -> ipaddress.IPv4Interface | ipaddress.IPv6Interface:
    if isinstance(v, dict) and CIDR_KEY in v:
        return ipaddress.ip_interface(v[CIDR_KEY])
    raise CELFunctionError("no such overload: expected a CIDR")


def _family(v: Any) -> int:
    return _as_ip(v).version if isinstance(v, dict) and IP_KEY in v else _as_cidr(v).version


def _ip_pred(attr: str) -> Callable[[Any], bool]:
    def pred(v: Any) -> bool:
        addr = _as_ip(v)
        if attr == "is_global_unicast":
            return not (
                addr.is_multicast or addr.is_loopback or addr.is_link_local or addr.is_unspecified
            ) and addr != ipaddress.ip_address("255.255.255.255")
        if attr == "is_link_local_multicast":
            if isinstance(addr, ipaddress.IPv4Address):
                return addr in ipaddress.ip_network("224.0.0.0/24")
            return addr.is_multicast and (addr.packed[1] & 0x0F) == 0x02
        return bool(getattr(addr, attr))

    return pred


def _contains_ip(c: Any, ip: Any) -> bool:
    net = _as_cidr(c).network
    addr = _as_ip(_ip(ip) if isinstance(ip, str) else ip)
    return addr.version == net.version and addr in net


def _contains_cidr(c: Any, other: Any) -> bool:
    net = _as_cidr(c).network
    sub = _as_cidr(_cidr(other) if isinstance(other, str) else other).network
    return sub.version == net.version and sub.subnet_of(net)  # type: ignore[arg-type]


def _cidr_ip(c: Any) -> dict[str, str]:
    return {IP_KEY: _as_cidr(c).ip.compressed}


def _masked(c: Any) -> dict[str, str]:
    return {CIDR_KEY: _as_cidr(c).network.with_prefixlen}


def _prefix_length(c: Any) -> int:
    return _as_cidr(c).network.prefixlen


def _url(s: Any) -> dict[str, str]:
    s = _need_str(s, "url")
    try:
        parts = urlsplit(s)
    except ValueError as exc:
        raise CELFunctionError(f"URL parse error during conversion from string: {exc}") from None
    if not (parts.scheme or s.startswith("/")):
        raise CELFunctionError(
            "URL parse error during conversion from string: must be absolute or begin with '/'"
        )
    return {URL_KEY: s}


def _is_url(s: Any) -> bool:
    return _parses(_url, s)


def _url_part(name: str) -> Callable[[Any], str]:
    def part(v: Any) -> str:
        if not (isinstance(v, dict) and URL_KEY in v):
            raise CELFunctionError(f"no such overload: {name}")
        u = urlsplit(v[URL_KEY])
        if name == "getScheme":
            return u.scheme
        if name == "getHost":
            return u.netloc.rsplit("@", 1)[-1]
        if name == "getHostname":
            return (u.hostname or "").strip("[]")
        if name == "getPort":
            return "" if u.port is None else str(u.port)
        if name == "getEscapedPath":
            return u.path
        return u.query

    return part


def _get_query(v: Any) -> dict[str, list[str]]:
    if not (isinstance(v, dict) and URL_KEY in v):
        raise CELFunctionError("no such overload: getQuery")
    return parse_qs(urlsplit(v[URL_KEY]).query, keep_blank_values=True)


# --------------------------------------------------------------------------- format

FORMAT_KEY: Final = "__k8s_format__"
_LABEL_RE: Final = regex.compile_text(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_SUBDOMAIN_RE: Final = regex.compile_text(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)
_DNS1035_RE: Final = regex.compile_text(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_QUALIFIED_NAME_RE: Final = regex.compile_text(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE_RE: Final = regex.compile_text(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_UUID_RE: Final = regex.compile_text(
    r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
)
_DATETIME_RE: Final = regex.compile_text(
    r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$"
)


def _regex_check(pattern: Any, limit: int, what: str) -> Callable[[str], list[str]]:
    def check(v: str) -> list[str]:
        errors = []
        if len(v) > limit:
            errors.append(f"must be no more than {limit} characters")
        if not pattern.match(v):
            errors.append(f"a {what} must consist of valid characters")
        return errors

    return check


def _prefix(check: Callable[[str], list[str]]) -> Callable[[str], list[str]]:
    """Prefix formats (generateName) allow a trailing dash."""
    return lambda v: check(v[:-1] + "a" if v.endswith("-") else v)


def _qualified_name(v: str) -> list[str]:
    prefix, sep, name = v.rpartition("/")
    errors = []
    if sep and (not prefix or len(prefix) > 253 or not _SUBDOMAIN_RE.match(prefix)):
        errors.append("prefix part must be a DNS-1123 subdomain")
    if not name or len(name) > 63 or not _QUALIFIED_NAME_RE.match(name):
        errors.append("name part must consist of alphanumeric characters, '-', '_' or '.'")
    return errors


def _uri(v: str) -> list[str]:
    return [] if _is_url(v) else ["must be a valid URI"]


def _base64(v: str) -> list[str]:
    try:
        base64.b64decode(v, validate=True)
    except (binascii.Error, ValueError):
        return ["must be base64 encoded"]
    return []


def _date(v: str) -> list[str]:
    try:
        datetime.date.fromisoformat(v)
    except ValueError:
        return ["must be a date in the form YYYY-MM-DD"]
    return [] if len(v) == 10 else ["must be a date in the form YYYY-MM-DD"]


def _datetime(v: str) -> list[str]:
    return [] if _DATETIME_RE.match(v) else ["must be an RFC 3339 date-time"]


_FORMATS: Final[dict[str, Callable[[str], list[str]]]] = {
    "dns1123Label": _regex_check(_LABEL_RE, 63, "DNS-1123 label"),
    "dns1123Subdomain": _regex_check(_SUBDOMAIN_RE, 253, "DNS-1123 subdomain"),
    "dns1035Label": _regex_check(_DNS1035_RE, 63, "DNS-1035 label"),
    "qualifiedName": _qualified_name,
    "dns1123LabelPrefix": _prefix(_regex_check(_LABEL_RE, 63, "DNS-1123 label")),
    "dns1123SubdomainPrefix": _prefix(_regex_check(_SUBDOMAIN_RE, 253, "DNS-1123 subdomain")),
    "dns1035LabelPrefix": _prefix(_regex_check(_DNS1035_RE, 63, "DNS-1035 label")),
    "labelValue": _regex_check(_LABEL_VALUE_RE, 63, "label value"),
    "uri": _uri,
    "uuid": lambda v: [] if _UUID_RE.match(v) else ["does not match the UUID format"],
    "byte": _base64,
    "date": _date,
    "datetime": _datetime,
}


def _format_named(name: Any) -> Any:
    if isinstance(name, str) and name in _FORMATS:
        return _cel.OptionalValue.of({FORMAT_KEY: name})
    return _cel.OptionalValue.none()


def _format_validate(fmt: Any, value: Any) -> Any:
    if not (isinstance(fmt, dict) and FORMAT_KEY in fmt):
        raise CELFunctionError("no such overload: validate needs a format")
    errors = _FORMATS[fmt[FORMAT_KEY]](_need_str(value, "validate"))
    return _cel.OptionalValue.of(errors) if errors else _cel.OptionalValue.none()


def _format_constructor(name: str) -> Callable[[], dict[str, str]]:
    return lambda: {FORMAT_KEY: name}


# --------------------------------------------------------------------------- DRA helpers


def _dra_domain(attributes: Any, domain: Any) -> Any:
    """``device.attributes[domain]``, but an unknown domain is an empty map."""
    if not isinstance(attributes, Mapping):
        raise CELFunctionError("no such overload: index on a non-map")
    return attributes.get(domain, {})


def _dra_opt(container: Any, key: Any) -> Any:
    """``container.?key`` / ``container[?key]``: optional.of(value) or optional.none()."""
    if isinstance(container, _cel.OptionalValue):
        if not container.has_value():
            return container
        container = container.value()
    if isinstance(container, Mapping):
        if key in container:
            return _cel.OptionalValue.of(container[key])
        return _cel.OptionalValue.none()
    if isinstance(container, list) and isinstance(key, int) and not isinstance(key, bool):
        if 0 <= key < len(container):
            return _cel.OptionalValue.of(container[key])
        return _cel.OptionalValue.none()
    raise CELFunctionError("no such overload: optional selection on a non-container")


def _dra_string(v: Any) -> str:
    """CEL ``string(x)``, plus Kubernetes' ``string(ip)`` and ``string(cidr)``."""
    if isinstance(v, dict) and IP_KEY in v:
        return str(v[IP_KEY])
    if isinstance(v, dict) and CIDR_KEY in v:
        return str(v[CIDR_KEY])
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return strformat.go_float_text(v)
    if isinstance(v, bytes):
        return v.decode("utf-8")
    if isinstance(v, (int, str)):
        return str(v)
    raise CELFunctionError(f"no such overload: string({type(v).__name__})")


def _dra_iter(target: Any) -> Any:
    """A comprehension's range, charged one cost unit per element (risky selectors only)."""
    if isinstance(target, (list, dict)):
        budget.charge(len(target))
    return target


def _present(items: Any) -> list[Any]:
    """A list literal with optional entries: the values of the optionals that have one."""
    return [x.value() for x in _need_list(items, "list literal") if x.has_value()]


def _present_map(entries: Any) -> dict[Any, Any]:
    """A map literal with optional entries: ``[key, optional]`` pairs that have a value."""
    out: dict[Any, Any] = {}
    for key, value in _need_list(entries, "map literal"):
        if value.has_value():
            out[key] = value.value()
    return out


def _first(v: Any) -> Any:
    items = _need_list(v, "first")
    return _cel.OptionalValue.of(items[0]) if items else _cel.OptionalValue.none()


def _last(v: Any) -> Any:
    items = _need_list(v, "last")
    return _cel.OptionalValue.of(items[-1]) if items else _cel.OptionalValue.none()


def _dra_sort_by(items: Any, keys: Any) -> list[Any]:
    """``x.sortBy(v, key)``: ``x`` ordered by the keys computed for its elements (stable)."""
    values, order = _need_list(items, "sortBy"), _need_list(keys, "sortBy")
    _check_homogeneous(order, "sortBy")
    ranked = sorted(range(len(values)), key=lambda i: _sort_key(order[i]))
    return [values[i] for i in ranked]


def _dra_keys(target: Any) -> list[Any]:
    """What a two-variable comprehension's first variable ranges over: indices or keys."""
    if isinstance(target, list):
        return list(range(len(target)))
    if isinstance(target, dict):
        return list(target)
    raise CELFunctionError("no such overload: comprehension over a non-list, non-map value")


def _dra_to_map(keys: Any, values: Any) -> dict[Any, Any]:
    """``transformMap``'s result: the i-th key maps to the i-th value."""
    return dict(zip(_need_list(keys, "transformMap"), _need_list(values, "transformMap"),
                    strict=True))  # fmt: skip


def _dra_merge_entries(entries: Any) -> dict[Any, Any]:
    """``transformMapEntry``'s result: the union of one-entry maps; a repeated key is an error."""
    merged: dict[Any, Any] = {}
    for entry in _need_list(entries, "transformMapEntry"):
        if not isinstance(entry, dict):
            raise CELFunctionError("transformMapEntry: the expression must produce a map")
        for key, value in entry.items():
            if key in merged:
                raise CELFunctionError(f"insert failed: key {key!r} already exists")
            merged[key] = value
    return merged


def _charged_string_arg(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Charge a traversal of the first (string) argument: Kubernetes' CallCost for the
    parsers (quantity, semver, url, ip, cidr and their is* forms)."""

    def charged(*args: Any) -> Any:
        if args and isinstance(args[0], str):
            budget.charge_string(len(args[0]))
        return fn(*args)

    return charged


def _charged_list_arg(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Charge one traversal of the list receiver (Kubernetes' lists library CallCost)."""

    def charged(*args: Any) -> Any:
        if args and isinstance(args[0], list):
            budget.charge(len(args[0]))
        return fn(*args)

    return charged


_CHARGED_PARSERS: Final = ("quantity", "isQuantity", "semver", "isSemver", "url", "isURL", "ip",
                           "isIP", "ip.isCanonical", "cidr", "isCIDR")  # fmt: skip
_CHARGED_TRAVERSALS: Final = ("isSorted", "sum", "min", "max", "indexOf", "lastIndexOf",
                              "includes")  # fmt: skip


def _with_costs(functions: dict[str, Callable[..., Any]]) -> dict[str, Callable[..., Any]]:
    out = dict(functions)
    for name in _CHARGED_PARSERS:
        out[name] = _charged_string_arg(out[name])
    for name in _CHARGED_TRAVERSALS:
        out[name] = _charged_list_arg(out[name])
    return out


_FUNCTIONS: Final[dict[str, Callable[..., Any]]] = {
    # quantity
    "quantity": _quantity,
    "isQuantity": _is_quantity,
    "sign": _sign,
    "isInteger": _is_integer,
    "asInteger": _as_integer,
    "asApproximateFloat": _as_float,
    "add": _add,
    "sub": _sub,
    "isGreaterThan": _is_greater,
    "isLessThan": _is_less,
    "compareTo": _compare_to,
    # semver
    "semver": _semver,
    "isSemver": _is_semver,
    "major": _semver_part(0, "major"),
    "minor": _semver_part(1, "minor"),
    "patch": _semver_part(2, "patch"),
    # k8s lists
    "isSorted": _is_sorted,
    "sum": _sum,
    "min": _min,
    "max": _max,
    "indexOf": _index_of,
    "lastIndexOf": _last_index_of,
    "includes": _includes,
    # regex
    "_dra_matches": _matches,
    "find": _find,
    "findAll": _find_all,
    # ext strings
    "charAt": _char_at,
    "lowerAscii": lambda s: _traversed(s, "lowerAscii").lower(),
    "upperAscii": lambda s: _traversed(s, "upperAscii").upper(),
    "replace": _replace,
    "split": _split,
    "substring": _substring,
    "trim": lambda s: _traversed(s, "trim").strip(),
    "join": _join,
    "format": _format,
    "strings.quote": _quote,
    "reverse": _reverse,
    # ext sets
    "sets.contains": _sets_contains,
    "sets.equivalent": _sets_equivalent,
    "sets.intersects": _sets_intersects,
    # ext lists
    "slice": _slice,
    "flatten": _flatten,
    "lists.range": _range,
    "distinct": _distinct,
    "sort": _sort,
    # ip / cidr
    "ip": _ip,
    "isIP": _is_ip,
    "ip.isCanonical": lambda s: _is_ip(s) and _ip(s)[IP_KEY] == s,
    "cidr": _cidr,
    "isCIDR": _is_cidr,
    "family": _family,
    "isUnspecified": _ip_pred("is_unspecified"),
    "isLoopback": _ip_pred("is_loopback"),
    "isLinkLocalMulticast": _ip_pred("is_link_local_multicast"),
    "isLinkLocalUnicast": _ip_pred("is_link_local"),
    "isGlobalUnicast": _ip_pred("is_global_unicast"),
    "containsIP": _contains_ip,
    "containsCIDR": _contains_cidr,
    "masked": _masked,
    "prefixLength": _prefix_length,
    # url
    "url": _url,
    "isURL": _is_url,
    "getScheme": _url_part("getScheme"),
    "getHost": _url_part("getHost"),
    "getHostname": _url_part("getHostname"),
    "getPort": _url_part("getPort"),
    "getEscapedPath": _url_part("getEscapedPath"),
    "getQuery": _get_query,
    # format
    **{f"format.{name}": _format_constructor(name) for name in _FORMATS},
    "format.named": _format_named,
    "validate": _format_validate,
    # DRA rewrite helpers (see allocator.cel.rewrite)
    "_dra_domain": _dra_domain,
    "_dra_opt": _dra_opt,
    "_dra_iter": _dra_iter,
    "_dra_string": _dra_string,
    "_dra_keys": _dra_keys,
    "_dra_sort_by": _dra_sort_by,
    "_dra_present": _present,
    "_dra_present_map": _present_map,
    "first": _first,
    "last": _last,
    "_dra_to_map": _dra_to_map,
    "_dra_merge_entries": _dra_merge_entries,
}
FUNCTIONS: Final = _with_costs(_FUNCTIONS)
