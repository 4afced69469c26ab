"""``drakit allocate``: allocate claims offline from YAML/JSON files and explain refusals."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from drakit.cli.flags import Subcommands, add_command

DESCRIPTION = """\
Allocate ResourceClaims offline, exactly as the Kubernetes 1.37 scheduler's allocator
would, from files: no cluster needed. For every node, the claims are allocated together
(in file order); the command prints each claim's allocation, or with --explain why the
claims do not fit (per request: devices considered, and how many each check rejected).

Files are YAML or JSON: one object, several YAML documents (---), or a List
(`kubectl get resourceslices -o yaml` output works). resource.k8s.io v1, v1beta2 and
v1beta1 objects are accepted. Claims that already have status.allocation count as
allocated state, like --allocated.

Nodes: --node NAME (repeatable) and/or --nodes FILE with Node objects (their labels
matter for node selectors); without either, every node named by a slice's nodeName.

CEL selectors are type-checked as the API server does and evaluated within Kubernetes'
cost limit; expensive ones run in a child process limited to 2 s of CPU and 256 MiB, so
--timeout holds whatever the files contain ("cost limit exceeded" is a CEL error).

Exit status: 0 when the claims fit on at least one node, 1 when they fit nowhere,
2 for bad input or a fatal allocation error (e.g. a CEL error or an unknown class)."""

EPILOG = """\
examples:
  drakit allocate --slices slices.yaml --classes classes.yaml --claims claim.yaml
  drakit allocate --slices s.yaml --classes c.yaml --claims c.yaml --node node-1 --explain
  kubectl get resourceslices -o yaml > s.yaml && drakit allocate --slices s.yaml ... -o json"""


def add_parser(sub: Subcommands) -> None:
    p = add_command(
        sub,
        "allocate",
        summary="allocate claims offline from YAML/JSON files and explain refusals",
        description=DESCRIPTION,
        epilog=EPILOG,
    )
    p.add_argument(
        "--slices",
        metavar="FILE",
        action="append",
        required=True,
        help="ResourceSlices (repeatable)",
    )
    p.add_argument(
        "--classes",
        metavar="FILE",
        action="append",
        required=True,
        help="DeviceClasses (repeatable)",
    )
    p.add_argument(
        "--claims",
        metavar="FILE",
        action="append",
        required=True,
        help="ResourceClaims to allocate, in order (repeatable)",
    )
    p.add_argument(
        "--allocated",
        metavar="FILE",
        action="append",
        default=[],
        help="ResourceClaims that are already allocated (repeatable)",
    )
    p.add_argument(
        "--node", metavar="NAME", action="append", default=[], help="a node to try (repeatable)"
    )
    p.add_argument(
        "--nodes",
        metavar="FILE",
        action="append",
        default=[],
        help="Node objects to try (names and labels)",
    )
    p.add_argument(
        "--explain", action="store_true", help="for nodes where the claims do not fit, explain why"
    )
    p.add_argument(
        "-o",
        "--output",
        choices=("text", "yaml", "json"),
        default="text",
        help="output format (default: text)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="time limit per node (default: 10, as the scheduler)",
    )
    p.set_defaults(func=run)


class InputError(Exception):
    """Bad input: the message names the file, object and field."""


def run(args: argparse.Namespace) -> int:
    try:
        report, fits = _allocate(args)
    except InputError as exc:
        print(f"drakit allocate: {exc}", file=sys.stderr)
        return 2
    _print(report, args.output)
    if any(n.get("outcome") == "error" for n in report["nodes"]):
        return 2
    return 0 if fits else 1


# --------------------------------------------------------------------------- input


def load_documents(path: str) -> list[tuple[str, dict[str, Any]]]:
    """(where, object) for every object in a YAML/JSON file; Lists are flattened."""
    import yaml  # noqa: PLC0415 (kept out of `drakit --help`)

    from drakit.kubeapi.documents import DocumentError, load_all  # noqa: PLC0415

    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        # Within kubeapi.deepjson's depth bound: a deeper document is refused here, with
        # its line, before anything (the model, its copies) walks it.
        docs = load_all(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(exc, "problem", None) or "invalid YAML/JSON"
        raise InputError(f"{path}{where}: {problem}") from None
    except DocumentError as exc:
        raise InputError(f"{path}: {exc}") from None
    out: list[tuple[str, dict[str, Any]]] = []
    for i, doc in enumerate(docs):
        if doc is None:
            continue
        where = f"{path}: document {i + 1}"
        if not isinstance(doc, dict):
            raise InputError(f"{where}: expected an object, got {type(doc).__name__}")
        if str(doc.get("kind", "")).endswith("List") and "items" in doc:
            items = doc.get("items") or []
            if not isinstance(items, list):
                raise InputError(f"{where}: items must be a list")
            for j, item in enumerate(items):
                if not isinstance(item, dict):
                    raise InputError(f"{where}: items[{j}]: expected an object")
                out.append((f"{where}: items[{j}]", item))
        else:
            out.append((where, doc))
    return out


def _describe(where: str, obj: dict[str, Any]) -> str:
    kind = obj.get("kind") or "object"
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    name = meta.get("name", "") if meta else ""
    ns = meta.get("namespace", "") if meta else ""
    label = f"{ns}/{name}" if ns else name
    return f"{where} ({kind} {label or '(unnamed)'})"


def _load(paths: list[str], kind: str, cls: Any) -> list[Any]:
    from drakit.allocator import ModelError, to_v1  # noqa: PLC0415

    objects = []
    for path in paths:
        for where, obj in load_documents(path):
            found = obj.get("kind")
            if found and found != kind:
                raise InputError(f"{_describe(where, obj)}: expected kind {kind}")
            try:
                objects.append(cls.from_dict(to_v1(obj)))
            except ModelError as exc:
                raise InputError(f"{_describe(where, obj)}: {exc}") from None
    return objects


def _check(objects: list[Any], validate: Any, **options: Any) -> None:
    from drakit.allocator import ValidationError  # noqa: PLC0415

    for obj in objects:
        errors = validate(obj, **options)
        if errors:
            raise InputError(str(ValidationError(errors)))


def _allocate(args: argparse.Namespace) -> tuple[dict[str, Any], bool]:
    from drakit.allocator import (  # noqa: PLC0415
        AllocatedState,
        Allocator,
        DeviceClass,
        Inventory,
        Node,
        ResourceClaim,
        ResourceSlice,
        validate_device_class,
        validate_resource_claim,
        validate_resource_slice,
        with_api_defaults,
    )

    slices = _load(args.slices, "ResourceSlice", ResourceSlice)
    classes = _load(args.classes, "DeviceClass", DeviceClass)
    claims = _load(args.claims, "ResourceClaim", ResourceClaim)
    allocated = _load(args.allocated, "ResourceClaim", ResourceClaim)
    nodes = _load(args.nodes, "Node", Node)
    _check(slices, validate_resource_slice)
    # like the API server: selectors must compile, even where no device is evaluated
    _check(classes, validate_device_class, compile_cel=True)
    _check(claims, validate_resource_claim, compile_cel=True)
    allocated += [c for c in claims if c.status.allocation is not None]
    to_allocate = [with_api_defaults(c) for c in claims if c.status.allocation is None]
    if not to_allocate:
        raise InputError("no claims to allocate: every claim given already has an allocation")
    by_name = {n.name: n for n in nodes}
    if args.node:
        chosen = [by_name.get(name) or Node.named(name) for name in args.node]
    else:
        chosen = list(nodes)
    if not chosen:
        names = sorted({s.spec.node_name for s in slices if s.spec.node_name})
        if not names:
            raise InputError(
                "no nodes to try: give --node NAME or --nodes FILE (no slice names a node)"
            )
        chosen = [Node.named(n) for n in names]
    state = AllocatedState(allocated)
    allocator = Allocator(Inventory(slices), classes, state)
    report_nodes = []
    fits = False
    for node in chosen:
        entry = _allocate_on(allocator, node, to_allocate, args)
        fits = fits or entry["outcome"] == "allocated"
        report_nodes.append(entry)
    return {"nodes": report_nodes}, fits


def _allocate_on(
    allocator: Any, node: Any, claims: list[Any], args: argparse.Namespace
) -> dict[str, Any]:
    from drakit.allocator import (  # noqa: PLC0415
        AllocationCancelledError,
        AllocationError,
        NodeUnsuitableError,
    )
    from drakit.allocator.explain import explain, render  # noqa: PLC0415

    entry: dict[str, Any] = {"node": node.name}
    try:
        results = allocator.allocate(node, claims, timeout=args.timeout)
    except NodeUnsuitableError as exc:
        entry.update(outcome="unschedulable", reason=str(exc))
        results = None
    except AllocationCancelledError as exc:
        entry.update(outcome="unschedulable", reason=str(exc))
        results = None
    except AllocationError as exc:
        entry.update(outcome="error", error=str(exc))
        return entry
    if results is not None:
        entry["outcome"] = "allocated"
        entry["allocations"] = [
            {"claim": c.key, "allocation": r.to_dict()}
            for c, r in zip(claims, results, strict=True)
        ]
        return entry
    entry.setdefault("outcome", "unschedulable")
    if args.explain:
        explanation = explain(allocator, node, claims)
        entry["explanation"] = explanation.to_dict()
        entry["explanationText"] = render(explanation)
    return entry


# --------------------------------------------------------------------------- output


def _print(report: dict[str, Any], fmt: str) -> None:
    if fmt == "json":
        for n in report["nodes"]:
            n.pop("explanationText", None)
        print(json.dumps(report, indent=2))
        return
    if fmt == "yaml":
        import yaml  # noqa: PLC0415

        for n in report["nodes"]:
            n.pop("explanationText", None)
        print(yaml.safe_dump(report, sort_keys=False), end="")
        return
    for n in report["nodes"]:
        print(_text(n))


def _text(entry: dict[str, Any]) -> str:
    node = entry["node"]
    outcome = entry["outcome"]
    if outcome == "error":
        return f"node {node}: error: {entry['error']}"
    if outcome == "allocated":
        lines = [f"node {node}: fits"]
        for a in entry["allocations"]:
            lines.append(f"  claim {a['claim']}:")
            alloc = a["allocation"]
            for r in (alloc.get("devices") or {}).get("results") or []:
                extra = []
                if r.get("adminAccess"):
                    extra.append("admin access")
                if r.get("shareID"):
                    extra.append(f"share {r['shareID']}")
                for k, v in (r.get("consumedCapacity") or {}).items():
                    extra.append(f"{k}={v}")
                tail = f" ({', '.join(extra)})" if extra else ""
                lines.append(f"    {r['request']}: {r['driver']}/{r['pool']}/{r['device']}{tail}")
            for c in (alloc.get("devices") or {}).get("config") or []:
                reqs = ", ".join(c.get("requests") or []) or "all requests"
                driver = (c.get("opaque") or {}).get("driver", "")
                lines.append(f"    config {c['source']} for {reqs} ({driver})")
        return "\n".join(lines)
    if "explanationText" in entry:
        text: str = entry["explanationText"]
        if entry.get("reason"):
            text += f"\n  ({entry['reason']})"
        return text
    reason = f" ({entry['reason']})" if entry.get("reason") else ""
    return f"node {node}: does not fit{reason} (use --explain for details)"
