"""Generated CEL selector cases for the differential suite: every library function of the
Kubernetes 1.37 DRA environment, two-variable comprehensions, type errors (compile errors),
runtime errors and cost-limit cases.

Every expression becomes one scenario: two devices with attributes of every type, a class
that selects the driver, and one claim whose request carries the expression. The reference
allocator and drakit must agree on the outcome class (allocated / unschedulable / error, and
for errors whether CEL failed to compile or at run time) and on the results.
"""

from __future__ import annotations

import itertools
from typing import Any

Obj = dict[str, Any]
DRIVER = "gpu.example.com"
A = f'device.attributes["{DRIVER}"]'
C = f'device.capacity["{DRIVER}"]'

QUANTITY = [
    'quantity("1Gi") == quantity("1024Mi")',
    'isQuantity("1Gi") && !isQuantity("1 Gi")',
    'quantity("1.5").isInteger() == false',
    'quantity("2k").asInteger() == 2000',
    'quantity("1.5").asApproximateFloat() == 1.5',
    'quantity("1").add(quantity("1")).compareTo(quantity("2")) == 0',
    'quantity("1").add(1).isGreaterThan(quantity("1"))',
    'quantity("3").sub(1).isLessThan(quantity("3"))',
    'quantity("3").sub(quantity("1")) == quantity("2")',
    'sign(quantity("-1")) == -1',
    f'{C}.memory.isGreaterThan(quantity("8Gi"))',
    f'{C}.memory.compareTo(quantity("16Gi")) == 0',
    'quantity("x").sign() == 0',
    'quantity("9223372036854775808").asInteger() > 0',
]
SEMVER = [
    'semver("1.2.3").major() == 1 && semver("1.2.3").minor() == 2',
    'semver("1.2.3").patch() == 3',
    'isSemver("1.0") == false && isSemver("1.0.0")',
    'isSemver("v1.0", true)',
    'semver("v1.0", true) == semver("1.0.0")',
    f'{A}.fw.isGreaterThan(semver("2.0.0"))',
    f'{A}.fw.isLessThan(semver("3.0.0"))',
    f'{A}.fw.compareTo(semver("2.1.0")) == 0',
    'semver("bad").major() == 0',
]
LISTS = [
    "[1, 2, 3].isSorted() && ![3, 1].isSorted()",
    '["a", "b"].isSorted()',
    "[1, 2].sum() == 3 && [1.5, 2.5].sum() == 4.0",
    "[1, 2].min() == 1 && [1, 2].max() == 2",
    "[1, 2, 1].indexOf(1) == 0 && [1, 2, 1].lastIndexOf(1) == 2",
    '["a", "b"].indexOf("c") == -1',
    f"{A}.numas.includes(1)",
    "[1, 2].includes(3) == false",
    f"{A}.numas.sum() == 1",
    f"{A}.numas.max() == 1",
    "[].min() == 0",
]
REGEX = [
    '"abc".matches("^a")',
    '"abc".find("b.") == "bc"',
    '"a1b2".findAll("[0-9]") == ["1", "2"]',
    '"a1b2".findAll("[0-9]", 1) == ["1"]',
    '"baaa".findAll("a*") == ["", "aaa"]',
    '"' + "a" * 48 + 'b".find("^(a+)+$") == ""',
    '"' + "a" * 48 + 'b".matches("^(a+)+$")',
    f'{A}.model.matches("^a[0-9]+$")',
    '"\\u0661".matches("\\\\d")',
    '"x".matches("(")',
    '"x".find("(") == ""',
    '"x".findAll("[") == []',
    f'"x".matches({A}.model.substring(0, 0) + "(")',
    f'"x".find({A}.model.substring(0, 0) + "(?=x)") == ""',
    '"ab".matches("a(?i)B")',
]
STRINGS = [
    '"abc".charAt(1) == "b" && "abc".charAt(3) == ""',
    '"abc".indexOf("c") == 2 && "abcabc".indexOf("a", 1) == 3',
    '"abcabc".lastIndexOf("a") == 3 && "abcabc".lastIndexOf("a", 2) == 0',
    '"ABC".lowerAscii() == "abc" && "abc".upperAscii() == "ABC"',
    '"aaa".replace("a", "b") == "bbb" && "aaa".replace("a", "b", 2) == "bba"',
    '"a,b".split(",") == ["a", "b"] && "a,b,c".split(",", 2) == ["a", "b,c"]',
    '"abc".split("") == ["a", "b", "c"]',
    '"abc".substring(1) == "bc" && "abc".substring(1, 2) == "b"',
    '"  a ".trim() == "a"',
    '["a", "b"].join("-") == "a-b" && ["a", "b"].join() == "ab"',
    '"%s=%d".format(["a", 1]) == "a=1"',
    '"%.2f".format([1.5]) == "1.50"',
    'strings.quote("ab") == "\\"ab\\""',
    '"abc".charAt(5) == ""',
    '"abc".substring(2, 1) == ""',
    '"abc".reverse() == "cba"',
    f'{A}.model.upperAscii() == "A100"',
]
# ``<string>.format(<list>)``: every clause with every CEL type. A constant format string
# with a list literal is checked at compile time; values read from the device (type dyn)
# only at run time, where a refused type fails the allocation.
STRING_FORMAT = [
    '"%s|%s|%s|%s|%s".format(["a", 1, true, null, b"ab"]) == "a|1|true|null|ab"',
    '"%s|%s|%s|%s".format([1.5, 1.0, 1234567.0, 0.00001]) == "1.5|1|1.234567e+06|1e-05"',
    '"%s".format([[1, "a", 1.5, true, null, [2], {"k": 1}]]) '
    '== "[1, \\"a\\", 1.500000, true, null, [2], {\\"k\\":1}]"',
    '"%s".format([{"b": 1, "a": "x"}]) == "{\\"a\\":\\"x\\", \\"b\\":1}"',
    '"%s".format([{2: 1, 10: 2}]) == "{10:2, 2:1}"',
    '"%d|%d".format([1u, -7]) == "1|-7"',
    '"%f|%.2f|%.0f".format([1234.5, -1234.5, 2.5]) == "1,234.500000|-1,234.50|2"',
    '"%f|%f".format(["NaN", "-Infinity"]) == "NaN|-∞"',
    '"%e".format([1234.5678]) == "1.234568\u00d710⁰³"',
    '"%.9e".format([-0.00012]) == "-1.200000\u00d710⁻⁰⁴"',
    '"%b|%b|%b".format([5, -5, true]) == "101|-101|1"',
    '"%x|%X|%x|%x".format([26, 26, "hi", b"\\xff"]) == "1a|1A|6869|ff"',
    '"%o|%o".format([30, -8]) == "36|-10"',
    '"100%%".format([]) == "100%"',
    'string(1234567.0) == "1.234567e+06" && string(-0.0) == "-0"',
    f'"%s-%d".format([{A}.model, {A}.index]) == "a100-3"',
    f'"%s".format([{A}.tags]) == "[\\"a\\", \\"b\\"]"',
    f'"%s-%d".format([{A}.model, {A}.model]) == "a100-3"',
    f'"%d".format([{A}.healthy]) == "1"',
    f'"%f".format([{A}.index]) == "3"',
    f'"%e".format([{A}.model]) == "x"',
    f'"%b".format([{A}.model]) == "1"',
    f'"%x".format([{A}.healthy]) == "1"',
    f'"%o".format([{A}.model]) == "1"',
    f'"%s".format([{A}.fw]) == "2.1.0"',
    f'"%s".format([[{A}.fw]]) == "[2.1.0]"',
    f'"%d".format([{A}.numas]) == "1"',
    f'"%d %d".format({A}.numas.map(x, x)) == "0 1"',
    f'"%d %d %d".format({A}.numas.map(x, x)) == "0 1"',
    f'"%".format({A}.numas.map(x, x)) == ""',
    f'"%z".format({A}.numas.map(x, x)) == ""',
    '"%d".format(["a"]) == "a"',
    '"%s-%d".format(["a", "3"]) == "a-3"',
    '"%f".format([1]) == "1"',
    '"%e".format([true]) == "1"',
    '"%b".format([1.5]) == "1"',
    '"%x".format([1.5]) == "1"',
    '"%o".format(["a"]) == "a"',
    '"%s".format([optional.of(1)]) == ""',
    '"%s".format([[optional.of(1)]]) == ""',
    f'"%s".format([{C}.memory]) == "16Gi"',
    '"%s".format([quantity("1")]) == "1"',
    '"%d %d".format([1]) == "1"',
    '"%d".format([1, 2]) == "1"',
    '"%q".format([1]) == "1"',
    '"%".format([1]) == "1"',
]
SETS = [
    "sets.contains([1, 2], [1]) && !sets.contains([1], [2])",
    "sets.equivalent([1, 2], [2, 1, 1])",
    "sets.intersects([1], [2]) == false",
    f"sets.contains({A}.numas, [0])",
]
EXT_LISTS = [
    "[1, 2, 3].slice(1, 2) == [2]",
    "[[1], [2, 3]].flatten() == [1, 2, 3]",
    "[[[1]], [[2]]].flatten(2) == [1, 2]",
    "lists.range(3) == [0, 1, 2]",
    "lists.range(5000).size() == 5000",
    "[1, 1, 2].distinct() == [1, 2]",
    "[1, 2].reverse() == [2, 1]",
    "[2, 1].sort() == [1, 2]",
    "[2, 1, 3].sortBy(x, -x) == [3, 2, 1]",
    "[1, 2].first().value() == 1",
    "[1, 2].last().orValue(0) == 2",
    "[1, 2, 3].slice(2, 1) == []",
]
URLS = [
    'url("https://x.example.com:8443/p?q=1").getHost() == "x.example.com:8443"',
    'url("https://x.example.com:8443/p").getHostname() == "x.example.com"',
    'url("https://x.example.com:8443/p").getPort() == "8443"',
    'url("https://x.example.com/p").getScheme() == "https"',
    'url("https://x.example.com/a%20b").getEscapedPath() == "/a%20b"',
    'url("https://x.example.com/?q=1&q=2").getQuery()["q"] == ["1", "2"]',
    'isURL("https://x") && !isURL("not a url")',
    'url("relative").getScheme() == ""',
]
IPS = [
    'ip("10.0.0.5").family() == 4 && ip("::1").family() == 6',
    'ip("::1").isLoopback() && ip("0.0.0.0").isUnspecified()',
    'ip("fe80::1").isLinkLocalUnicast() && ip("ff02::1").isLinkLocalMulticast()',
    'ip("8.8.8.8").isGlobalUnicast()',
    'ip.isCanonical("10.0.0.5") && !ip.isCanonical("2001:DB8::1")',
    'isIP("10.0.0.1") && !isIP("x")',
    'cidr("10.0.0.0/8").containsIP(ip("10.1.2.3")) && cidr("10.0.0.0/8").containsIP("10.1.2.3")',
    'cidr("10.0.0.0/8").containsCIDR("10.1.0.0/16")',
    'cidr("10.0.0.0/8").containsCIDR(cidr("10.1.0.0/16"))',
    'cidr("10.1.2.3/8").masked() == cidr("10.0.0.0/8")',
    'cidr("10.0.0.0/8").prefixLength() == 8 && cidr("10.0.0.0/8").ip() == ip("10.0.0.0")',
    'string(ip("10.0.0.5")) == "10.0.0.5" && string(cidr("10.0.0.0/8")) == "10.0.0.0/8"',
    'isCIDR("10.0.0.0/8") && !isCIDR("10.0.0.0/33")',
    f"ip({A}.addr).family() == 4",
    'ip("x").family() == 4',
]
FORMATS = [
    f'format.{name}().validate("{sample}").hasValue() == {bad}'
    for name, sample, bad in [
        ("dns1123Label", "abc", "false"),
        ("dns1123Label", "ABC", "true"),
        ("dns1123Subdomain", "a.b", "false"),
        ("dns1035Label", "1a", "true"),
        ("qualifiedName", "example.com/a", "false"),
        ("dns1123LabelPrefix", "abc-", "false"),
        ("dns1123SubdomainPrefix", "a.b-", "false"),
        ("dns1035LabelPrefix", "a-", "false"),
        ("labelValue", "a_b", "false"),
        ("uri", "https://x", "false"),
        ("uuid", "123e4567-e89b-12d3-a456-426614174000", "false"),
        ("byte", "aGk=", "false"),
        ("date", "2024-01-31", "false"),
        ("datetime", "2024-01-31T00:00:00Z", "false"),
    ]
] + [
    'format.named("uuid").hasValue() && !format.named("nope").hasValue()',
    'format.named("dns1123Label").value().validate("a").hasValue() == false',
]
OPTIONAL_AND_BIND = [
    f'{A}.?model.orValue("") == "a100"',
    f"{A}.?nope.orValue(1) == 1",
    'device.attributes["other.example.com"].?x.hasValue() == false',
    "optional.of(1).value() == 1 && optional.none().hasValue() == false",
    "[?optional.of(1), ?optional.none()] == [1]",
    '{?"a": optional.none(), "b": 2} == {"b": 2}',
    "[?optional.of(1), 2 > 1 ? 3 : 4] == [1, 3]",
    '[?optional.of(1), "a"].size() == 2',
    "[1, 2][?5].orValue(0) == 0",
    "cel.bind(x, 2, x * x == 4)",
    "cel.bind(x, [1, 2], cel.bind(y, x.size(), y == 2))",
]
TWO_VARIABLE = [
    f"{A}.numas.all(i, v, v == i)",
    f"{A}.numas.exists(i, v, i == 1 && v == 1)",
    f"{A}.numas.existsOne(i, v, v == 0)",
    f"{A}.numas.transformList(i, v, v * 10) == [0, 10]",
    f"{A}.numas.transformList(i, v, i > 0, v) == [1]",
    f"{A}.numas.transformMap(i, v, v + 1) == {{0: 1, 1: 2}}",
    f"{A}.numas.transformMap(i, v, v > 0, v) == {{1: 1}}",
    '{"a": 1, "b": 2}.all(k, v, v > 0 && k != "")',
    '{"a": 1}.transformMapEntry(k, v, {v: k}) == {1: "a"}',
    '{"a": 1}.transformMap(k, v, k + "!") == {"a": "a!"}',
    '[1, 2].transformMapEntry(i, v, {"k": v}) == {"k": 1}',
]
CORE = [
    'int("5") == 5 && double(1) == 1.0 && uint(1) == 1u',
    "1 < 1.5 && 2.5 > 2 && 1u < 2",
    'size("abc") == 3 && "abc".startsWith("a") && "abc".endsWith("c") && "abc".contains("b")',
    f"has({A}.model) && !has({A}.nope)",
    "device.allowMultipleAllocations == false",
    f'device.driver == "{DRIVER}" && {A}.index == 3',
    "type(1) == int && dyn(1) == 1",
    f'{A}.tags.exists(t, t == "b") && {A}.healthy',
    f"{A}.index in [1, 2, 3]",
    'device . driver == "gpu.example.com"',
    "has(device.driver) && has(device.attributes)",
    "device.attributes.size() == 1 && device.capacity.size() == 1",
    "device == device",
]
TYPE_ERRORS = [
    "1 == 1.0",
    f"[{A}.index, 2].size() == 2",
    'quantity("1").sign() == 1',
    '"a" + 1 == "a1"',
    "device.driver == 1",
    f"{A}.model",
    "1 + 1",
    "nosuch == 1",
    '{"a": 1, "b": "c"}.size() == 2',
    f"{C}.memory.isGreaterThan(1)",
    "[1].sum() == 1.0",
    "size(1) == 1",
    '"abc".matches(1)',
    '[semver("1.0.0")].max() == semver("1.0.0")',
    "device.attributes[",
    "device.driver ==",
    "device.nosuch == 1",
    "has(device.nosuch)",
    'device["driver"] == "gpu.example.com"',
    "device.size() == 4",
]
RUNTIME_ERRORS = [
    f"{A}.nope == 1",
    f"{A}.index / 0 == 1",
    f"int({A}.model) == 1",
    f"{A}.numas[5] == 1",
    f'{A}.model.substring(9) == ""',
]
COST = [
    "lists.range(2000000).size() > 0",
    "lists.range(2000).all(i, lists.range(2000).all(j, i + j >= 0))",
    'cel.bind(s0, "abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz01", '
    + "".join(f"cel.bind(s{i}, s{i - 1} + s{i - 1}, " for i in range(1, 29))
    + "s28.size() > 0"
    + ")" * 29,
]

FAMILIES: dict[str, list[str]] = {
    "quantity": QUANTITY,
    "semver": SEMVER,
    "lists": LISTS,
    "regex": REGEX,
    "strings": STRINGS,
    "string-format": STRING_FORMAT,
    "sets": SETS,
    "ext-lists": EXT_LISTS,
    "urls": URLS,
    "ip-cidr": IPS,
    "formats": FORMATS,
    "optional-bind": OPTIONAL_AND_BIND,
    "two-variable": TWO_VARIABLE,
    "core": CORE,
    "type-errors": TYPE_ERRORS,
    "runtime-errors": RUNTIME_ERRORS,
    "cost": COST,
}


def _device(name: str, index: int, model: str) -> Obj:
    def attr(**value: Any) -> Obj:
        return value

    return {
        "name": name,
        "attributes": {
            "model": attr(string=model),
            "index": attr(int=index),
            "healthy": attr(bool=True),
            "fw": attr(version="2.1.0"),
            "numas": attr(ints=[0, 1]),
            "tags": attr(strings=["a", "b"]),
            "addr": attr(string="10.0.0.5"),
        },
        "capacity": {"memory": {"value": "16Gi"}},
    }


def cel_scenario(expression: str) -> Obj:
    """One scenario in the oracle's format whose only claim uses ``expression``."""
    selector = {"cel": {"expression": expression}}
    return {
        "slices": [
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {"name": "node-a-gpus"},
                "spec": {
                    "driver": DRIVER,
                    "nodeName": "node-a",
                    "pool": {"name": "node-a", "generation": 1, "resourceSliceCount": 1},
                    "devices": [_device("gpu-0", 3, "a100"), _device("gpu-1", 4, "h100")],
                },
            }
        ],
        "classes": [
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "DeviceClass",
                "metadata": {"name": "gpu"},
                "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
            }
        ],
        "claims": [
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {"name": "c", "namespace": "default", "uid": "uid-c"},
                "spec": {
                    "devices": {
                        "requests": [
                            {
                                "name": "r",
                                "exactly": {"deviceClassName": "gpu", "selectors": [selector]},
                            }
                        ]
                    }
                },
            }
        ],
        "allocated": [],
        "node": {"metadata": {"name": "node-a"}},
    }


def cel_cases() -> list[tuple[str, Obj]]:
    """(label, scenario) for every generated expression, labelled family#index."""
    return [
        (f"{family}#{i}", cel_scenario(expr))
        for family, exprs in FAMILIES.items()
        for i, expr in zip(itertools.count(), exprs, strict=False)
    ]
