"""CEL engines for DRA selectors: fidelity probes and speed.

Compares, in one process:

* ``rust``: the Rust-backed ``common-expression-language`` package (import ``cel``), raw;
* ``celpy``: the pure-Python ``cel-python`` package (import ``celpy``), raw;
* ``cel-expr-python``: Google's CEL on cel-cpp (import ``cel_expr_python``), with its C++
  extensions (strings, lists, sets, optional, bindings, two-variable comprehensions) and
  the device declared as ``map(string, dyn)``; no Kubernetes libraries (the binding cannot
  hold Kubernetes' opaque values from Python);
* ``drakit``: ``drakit.allocator.cel`` (the C++ checker with Kubernetes' declarations, then the
  Rust engine plus drakit's rewrite, Kubernetes libraries and cost guard), which is what
  the allocator uses.

Fidelity: each probe is an expression Kubernetes 1.37 evaluates to ``true`` for the sample
device (or rejects, for the "must fail" probes); an engine passes when it agrees.
Speed: compile time per expression and evaluation time per (expression, device) with the
device variable prepared once, as the allocator does.

    .venv/bin/python tests/bench/bench_cel_engines.py [--evals N] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

DEVICE = {
    "driver": "gpu.example.com",
    "attributes": {"gpu.example.com": {"model": "a100", "memory_gb": 80, "numas": [0, 1]}},
    "capacity": {},
    "allowMultipleAllocations": False,
}

# (name, expression, Kubernetes says: True = evaluates to true, False = must fail)
PROBES: list[tuple[str, str, bool]] = [
    ("string equality", 'device.attributes["gpu.example.com"].model == "a100"', True),
    ("int comparison", 'device.attributes["gpu.example.com"].memory_gb >= 40', True),
    ("exists macro", 'device.attributes["gpu.example.com"].numas.exists(n, n == 1)', True),
    ("has()", 'has(device.attributes["gpu.example.com"].model)', True),
    (
        "|| absorbs errors",
        'device.driver == "gpu.example.com" || device.attributes["gpu.example.com"].nope',
        True,
    ),
    ("unknown domain is empty", 'device.attributes["other.io"].size() == 0', True),
    ("unknown id is an error", 'device.attributes["gpu.example.com"].nope == 1', False),
    ("optional field .?", 'device.attributes["gpu.example.com"].?nope.orValue(1) == 1', True),
    ("cel.bind", 'cel.bind(a, device.attributes["gpu.example.com"], a.model == "a100")', True),
    ("ext strings split", '"a,b".split(",").size() == 2', True),
    ("ext strings lowerAscii", '"AB".lowerAscii() == "ab"', True),
    ("k8s quantity", 'quantity("1Gi").isGreaterThan(quantity("1Mi"))', True),
    ("k8s semver", 'semver("1.2.3").isGreaterThan(semver("1.2.0"))', True),
    ("k8s lists sum", "[1, 2].sum() == 3", True),
    ("k8s regex find", '"a12".find("[0-9]+") == "12"', True),
    ("ext sets", "sets.contains([1, 2], [1])", True),
    ("DRA includes", 'device.attributes["gpu.example.com"].numas.includes(1)', True),
    ("int == double rejected", "1 == 1.0", False),
    ("mixed list literal rejected", '[device.attributes["gpu.example.com"].model, 2] == []', False),
    ("q.sign() rejected", 'quantity("1").sign() == 1', False),
    ("non-bool result rejected", "device.driver", False),
    ("two-variable all", "[1, 2].all(i, v, v > i)", True),
    ("transformList", "[1, 2].transformList(i, v, v * 2) == [2, 4]", True),
    ("RE2 \\d is ASCII", '"\\u0661".matches("\\\\d") == false', True),
    ("invalid regex literal rejected", '"a".matches("(") == false', False),
    ("cost limit: lists.range", "lists.range(2000000).size() > 0", False),
]

SPEED_EXPRESSIONS = [
    'device.driver == "gpu.example.com"',
    'device.driver == "gpu.example.com" && device.attributes["gpu.example.com"].model == "a100"',
    'device.attributes["gpu.example.com"].numas.exists(n, n == 1)',
]


# --------------------------------------------------------------------------- engines


class Engine:
    name = ""

    def compile(self, expr: str) -> Any:
        raise NotImplementedError

    def context(self) -> Any:
        raise NotImplementedError

    def evaluate(self, program: Any, context: Any) -> Any:
        raise NotImplementedError


class RustEngine(Engine):
    name = "rust (common-expression-language 0.10.0)"

    def __init__(self) -> None:
        import cel  # noqa: PLC0415

        self.cel = cel

    def compile(self, expr: str) -> Any:
        return self.cel.compile(expr)

    def context(self) -> Any:
        return self.cel.Context(variables={"device": DEVICE})

    def evaluate(self, program: Any, context: Any) -> Any:
        return program.execute(context)


class CelpyEngine(Engine):
    name = "celpy (cel-python 0.5.0)"

    def __init__(self) -> None:
        import celpy  # noqa: PLC0415

        self.celpy = celpy
        self.env = celpy.Environment()

    def compile(self, expr: str) -> Any:
        return self.env.program(self.env.compile(expr))

    def context(self) -> Any:
        return {"device": self.celpy.json_to_cel(DEVICE)}

    def evaluate(self, program: Any, context: Any) -> Any:
        return program.evaluate(context)


class CelExprEngine(Engine):
    name = "cel-expr-python 0.1.3 (cel-cpp, C++ extensions)"

    YAML = """
name: probes
extensions:
  - {name: strings, version: 2}
  - {name: lists, version: 2}
  - {name: sets}
  - {name: optional}
  - {name: bindings}
  - {name: two-var-comprehensions}
"""

    def __init__(self) -> None:
        from cel_expr_python import cel  # noqa: PLC0415

        self.cel = cel
        device_type = cel.Type.Map(cel.Type.STRING, cel.Type.DYN)
        self.env = cel.NewEnv(
            config=cel.NewEnvConfigFromYaml(self.YAML), variables={"device": device_type}
        )

    def compile(self, expr: str) -> Any:
        return self.env.compile(expr)

    def context(self) -> Any:
        return self.env.Activation({"device": DEVICE})

    def evaluate(self, program: Any, context: Any) -> Any:
        return program.eval(context).value()


class DrakitEngine(Engine):
    name = "drakit allocator.cel (rust + rewrite + k8s libraries)"

    def __init__(self) -> None:
        from drakit.allocator.cel import compile_selector, device_context  # noqa: PLC0415
        from drakit.allocator.model import DeviceAttribute  # noqa: PLC0415

        self.compile_selector = compile_selector
        attrs = {
            "model": DeviceAttribute("string", "a100"),
            "memory_gb": DeviceAttribute("int", 80),
            "numas": DeviceAttribute("ints", (0, 1)),
        }
        self.ctx = device_context("gpu.example.com", attrs, {}, False)

    def compile(self, expr: str) -> Any:
        from drakit.allocator.cel.engine import _compile  # noqa: PLC0415 (bypass the cache)

        return _compile(expr)

    def context(self) -> Any:
        return self.ctx

    def evaluate(self, program: Any, context: Any) -> Any:
        return program.matches(context)


# --------------------------------------------------------------------------- measurements


def fidelity(engine: Engine) -> dict[str, bool]:
    out = {}
    ctx = engine.context()
    for name, expr, expected in PROBES:
        try:
            value = engine.evaluate(engine.compile(expr), ctx)
            ok = expected and type(value).__name__ in ("bool", "BoolType") and bool(value)
        except Exception:
            ok = not expected
        out[name] = ok
    return out


def _timed(fn: Callable[[], Any], repeat: int) -> float:
    samples = []
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(repeat):
            fn()
        samples.append((time.perf_counter() - start) / repeat)
    return statistics.median(samples)


def speed(engine: Engine, evals: int) -> dict[str, dict[str, float]]:
    out = {}
    ctx = engine.context()
    for expr in SPEED_EXPRESSIONS:
        program = engine.compile(expr)
        compile_s = _timed(lambda e=expr: engine.compile(e), max(5, evals // 200))
        eval_s = _timed(lambda p=program: engine.evaluate(p, ctx), evals)
        out[expr] = {"compileMicros": compile_s * 1e6, "evalMicros": eval_s * 1e6}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--evals", type=int, default=20000, help="evaluations per expression")
    parser.add_argument("--json", help="also write the report to this file")
    args = parser.parse_args()
    engines: list[Engine] = [RustEngine(), CelpyEngine(), CelExprEngine(), DrakitEngine()]
    report = []
    for engine in engines:
        fid = fidelity(engine)
        spd = speed(engine, args.evals if not isinstance(engine, CelpyEngine) else args.evals // 20)
        report.append({"engine": engine.name, "fidelity": fid, "speed": spd})
        passed = sum(fid.values())
        print(f"{engine.name}: fidelity {passed}/{len(fid)}")
        for name, ok in fid.items():
            if not ok:
                print(f"    fails: {name}")
        for expr, s in spd.items():
            compile_us, eval_us = s["compileMicros"], s["evalMicros"]
            print(f"    compile {compile_us:9.1f} us   eval {eval_us:8.2f} us   {expr}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:  # noqa: PTH123
            json.dump(report, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
