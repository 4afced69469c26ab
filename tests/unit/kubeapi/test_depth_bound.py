"""The depth bound of kubeapi.deepjson holds for the whole of drakit.

Three parts: every place in drakit's runtime that turns text into values is listed here
with the reason it keeps the bound (a new one fails the test until it is listed); each of
those entry points, fed 600 levels, gives a value within the bound or refuses it with the
field path, never a RecursionError; and every recursive walk drakit does over decoded values
works at the bound from a stack already half of Python's recursion limit deep.
"""

from __future__ import annotations

import ast
import copy
import json
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import drakit
from drakit.allocator import ModelError, ResourceClaim, to_v1
from drakit.cli.allocate import InputError, load_documents
from drakit.controller.bindingconditions import apply_verdicts
from drakit.controller.claimgen import claim_from_template
from drakit.kubeapi import deepjson, documents, gojson, lightclient
from drakit.kubeapi.deepjson import MAX_DEPTH, DeepJSON, depth_problem
from drakit.kubeapi.errors import ApiError, error_from_status
from drakit.node_plugin.device_status import merged_devices
from drakit.node_plugin.publisher.sync import _dropped_paths
from drakit.webhook.jsonbudget import BodyRefusedError, check
from drakit.webhook.review import answer, decode_review

ROOT = Path(drakit.__file__).resolve().parent
#: Development tools, not part of what runs in a cluster (import-linter keeps the runtime
#: from importing them): they read files they or their own tests wrote.
DEVELOPMENT_TOOLS = ("localcluster/", "demo/", "testing/")
DECODERS = {
    "json": {"loads", "load"},
    "orjson": {"loads"},
    "yaml": {"load", "load_all", "safe_load", "safe_load_all", "full_load", "full_load_all",
             "unsafe_load", "unsafe_load_all", "compose", "compose_all"},
}  # fmt: skip

#: (file under drakit/, enclosing function, decoder) -> why what it decodes keeps the bound.
ENTRY_POINTS = {
    ("kubeapi/deepjson.py", "<module>", "json.loads"): (
        "deepjson.loads = depth_safe(json.loads): the bound itself"
    ),
    ("kubeapi/deepjson.py", "loads_bounded", "json.loads"): (
        "the bound itself: parts deeper than the limit are placeholders when it runs"
    ),
    ("kubeapi/resources.py", "Resource.__init__", "json.loads"): (
        "wrapped in depth_safe: every answer, List page and watch event of every Resource"
    ),
    ("kubeapi/lightclient.py", "LightApiClient.__init__", "json.loads"): (
        "the client's raw decoder (json_loads), read by Resource only, which wraps it"
    ),
    ("kubeapi/lightclient.py", "LightApiClient.__init__", "orjson.loads"): (
        "the client's raw decoder (json_loads), read by Resource only, which wraps it"
    ),
    ("webhook/review.py", "<module>", "json.loads"): (
        "AdmissionReviews: depth_safe(json.loads with the repeated-keys hook), after "
        "webhook.jsonbudget refused bodies nested past the bound plus the review's wrapping"
    ),
    ("kubeapi/documents.py", "parse_document", "json.loads"): "only text within_depth passes",
    ("kubeapi/documents.py", "parse_document", "yaml.load"): (
        "the bounded composer, then depth_problem (aliases)"
    ),
    ("kubeapi/documents.py", "parse_json", "json.loads"): "only text within_depth passes",
    ("kubeapi/documents.py", "load_all", "yaml.load_all"): (
        "the bounded composer, then depth_problem (aliases)"
    ),
    ("node_plugin/device_status.py", "_data", "json.loads"): (
        "text json.dumps just wrote from a backend's data that depth_problem checked"
    ),
    ("node_plugin/checkpoint.py", "read_document", "json.loads"): "the plugin's own checkpoint",
    ("node_plugin/checkpoint.py", "_decode_record", "json.loads"): "the plugin's own checkpoint",
    ("node_plugin/checkpoint.py", "_parse", "json.loads"): "the plugin's own checkpoint",
    ("node_plugin/cdi.py", "CDISpecs.read_all", "json.loads"): (
        "CDI specs the plugin wrote (named after claim UIDs, in its own directory)"
    ),
    ("node_plugin/prepare/cdi_output.py", "CDISpecOutput.recorded", "json.loads"): (
        "the annotation the plugin wrote into its own CDI spec"
    ),
    ("allocator/cel/sandbox.py", "_message", "json.loads"): (
        "the answer of the CEL sandbox's own child process"
    ),
}


class _Decodes(ast.NodeVisitor):
    """Every reference to a decoder function (called or passed on), with its scope."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.scope: list[str] = []
        self.found: list[tuple[str, str, str]] = []

    def _enter(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        self.scope.append(node.name)
        self.generic_visit(node)
        self.scope.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._enter(node)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self._enter(node)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._enter(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if isinstance(node.value, ast.Name) and node.attr in DECODERS.get(node.value.id, ()):
            where = ".".join(self.scope) or "<module>"
            self.found.append((self.path, where, f"{node.value.id}.{node.attr}"))
        self.generic_visit(node)


def decoding_sites() -> set[tuple[str, str, str]]:
    sites: set[tuple[str, str, str]] = set()
    for folder, _dirs, files in os.walk(ROOT):
        for name in files:
            path = Path(folder) / name
            relative = path.relative_to(ROOT).as_posix()
            if not name.endswith(".py") or relative.startswith(DEVELOPMENT_TOOLS):
                continue
            visitor = _Decodes(relative)
            visitor.visit(ast.parse(path.read_text(encoding="utf-8")))
            sites.update(visitor.found)
    return sites


def test_every_place_the_runtime_decodes_json_or_yaml_is_listed_with_why_it_keeps_the_bound():
    found = decoding_sites()
    unlisted = sorted(found - set(ENTRY_POINTS))
    assert not unlisted, (
        f"{unlisted}: new decoding sites. Decode API data with kubeapi.deepjson "
        "(deepjson.loads, a Resource) and input files with kubeapi.documents, or list the "
        "site in ENTRY_POINTS with the reason its text cannot nest past the bound."
    )
    assert not sorted(set(ENTRY_POINTS) - found), "listed sites that no longer exist"


def test_the_clients_raw_decoder_is_read_only_by_resource():
    readers = []
    for folder, _dirs, files in os.walk(ROOT):
        for name in files:
            if name.endswith(".py") and '"json_loads"' in (Path(folder) / name).read_text():
                readers.append((Path(folder) / name).relative_to(ROOT).as_posix())
    assert readers == ["kubeapi/resources.py"]


# -- each entry point, 600 levels deep -------------------------------------------------------

DEEP = 600


def deep_object_text(levels: int = DEEP) -> str:
    return '{"n":' * (levels - 1) + "{}" + "}" * (levels - 1)


def deep_claim(levels: int = DEEP) -> str:
    """A ResourceClaim whose opaque parameters make it ``levels`` deep."""
    parameters = deep_object_text(levels - 6)  # claim, spec, devices, config, [0], opaque
    return (
        '{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":"c",'
        '"namespace":"default"},"spec":{"devices":{"requests":[],"config":[{"opaque":'
        f'{{"driver":"gpu.example.com","parameters":{parameters}}}}}]}}}}}}'
    )


def test_a_deep_claim_decodes_within_the_bound_through_the_api_decoders():
    text = deep_claim()
    for decode in (deepjson.loads, deepjson.depth_safe(lightclient_fast_loads())):
        claim = decode(text.encode())
        assert depth_problem(claim) == (
            "spec.devices.config[0].opaque.parameters.n.n.n.n.n.n…: "
            f"nested more than {MAX_DEPTH} levels deep"
        )


def lightclient_fast_loads() -> Callable[[bytes], Any]:
    client = lightclient.LightApiClient("https://127.0.0.1:1", None, fast_json=True)
    try:
        return client.json_loads
    finally:
        client.close()


def admission_review(obj: str) -> bytes:
    return (
        '{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u",'
        '"resource":{"group":"resource.k8s.io","version":"v1","resource":"resourceclaims"},'
        f'"operation":"CREATE","object":{obj}}}}}'
    ).encode()


def test_a_deep_admission_review_is_refused_undecoded_or_denied_with_the_field():
    # 600 levels: past the bound plus the review's wrapping, refused before decoding.
    with pytest.raises(BodyRefusedError, match="nested more than"):
        check(admission_review(deep_claim()))
    # Just past the bound: decoded (the deep part as a DeepJSON leaf) and denied by field.
    body = admission_review(deep_claim(MAX_DEPTH + 1))
    check(body)
    reply = answer(decode_review(body), "gpu.example.com", lambda _p: None)
    assert reply["response"]["allowed"] is False
    assert (
        f"spec.devices.config[0].opaque.parameters: nested more than {MAX_DEPTH} levels deep"
        in reply["response"]["status"]["message"]
    )


def test_a_deep_error_status_is_an_error_not_a_recursion_error():
    # A pod's answer through the pod proxy (drakit devices --node) is decoded the same way.
    body = '{"kind":"Status","code":500,"message":"m","details":' + "[" * 5000 + "]" * 5000 + "}"
    error = error_from_status(500, body.encode())
    assert isinstance(error, ApiError) and "m" in str(error)


@pytest.mark.parametrize(
    "text", [deep_claim(), "[" * 100_000 + "]" * 100_000, "a:\n" + "".join(
        f"{'  ' * i}b:\n" for i in range(1, DEEP)
    )], ids=["json-objects", "flow-lists-100000", "yaml-block"],
)  # fmt: skip
def test_configuration_documents_deeper_than_the_bound_are_refused(text: str):
    # libyaml's composer (CSafeLoader) crashed the process with SIGSEGV at 100,000 levels.
    with pytest.raises(documents.DocumentError, match=f"nested more than {MAX_DEPTH} levels"):
        documents.parse_document(text)


def test_a_json_configuration_file_deeper_than_the_bound_is_refused():
    with pytest.raises(documents.DocumentError, match=f"nested more than {MAX_DEPTH} levels"):
        documents.parse_json(deep_object_text())


def test_yaml_aliases_cannot_build_a_value_past_the_bound():
    anchors = "a0: &a0 " + "[" * 90 + "]" * 90 + "\n"
    anchors += "".join(f"a{i}: &a{i} [*a{i - 1}]\n" for i in range(1, 20))
    with pytest.raises(documents.DocumentError, match="nested more than"):
        documents.parse_document(anchors)
    with pytest.raises(documents.DocumentError, match="nested more than"):
        documents.parse_document("&loop [*loop]")


@pytest.mark.parametrize("levels", [MAX_DEPTH + 1, DEEP, 3000])
def test_allocate_input_deeper_than_the_bound_is_an_input_error_naming_the_place(
    tmp_path: Path, levels: int
):
    path = tmp_path / "claims.json"
    path.write_text(deep_claim(levels))
    with pytest.raises(InputError, match=rf"{path} \(line 1, column \d+\): nested more than"):
        load_documents(str(path))


# -- every recursive walk, at the bound --------------------------------------------------------


def at_the_bound() -> Any:
    """A decoded value as deep as the bound lets through, with a DeepJSON leaf below it."""
    value = deepjson.loads(deep_object_text(DEEP).encode())
    assert isinstance(value, dict) and depth_problem(value, MAX_DEPTH + 1) is not None
    return value


def claim_at_the_bound() -> dict[str, Any]:
    config = {"opaque": {"driver": "gpu.example.com", "parameters": at_the_bound()}}
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {},
            "spec": {"devices": {"config": [config]}}}  # fmt: skip


def model_refuses(claim: dict[str, Any]) -> None:
    with pytest.raises(ModelError, match="nested more than"):
        ResourceClaim.from_dict(claim)


WALKS: dict[str, Callable[[], Any]] = {
    "copy.deepcopy": lambda: copy.deepcopy(at_the_bound()),
    "==": lambda: at_the_bound() == at_the_bound(),
    "repr (log lines)": lambda: repr(at_the_bound()),
    "json.dumps": lambda: deepjson.encode(at_the_bound(), json.dumps),
    "the clients' encoders (kubeapi.gojson)": lambda: (
        gojson.dumps(at_the_bound()), gojson.dumps_fast(at_the_bound())
    ),
    "claimgen.claim_from_template": lambda: claim_from_template(
        {"metadata": {"name": "p", "namespace": "n", "uid": "u"}}, "gpu",
        {"spec": {"spec": at_the_bound()}},
    ),
    "bindingconditions.apply_verdicts": lambda: apply_verdicts(
        [{"driver": "d", "pool": "p", "device": "x", "data": at_the_bound()}], [], "now"
    ),
    "device_status.merged_devices": lambda: merged_devices(
        [{"driver": "d", "pool": "p", "device": "x", "data": at_the_bound()}], "d", []
    ),
    "publisher.sync._dropped_paths": lambda: _dropped_paths(at_the_bound(), at_the_bound()),
    "allocator.to_v1": lambda: to_v1(claim_at_the_bound()),
    "the allocator's model": lambda: model_refuses(claim_at_the_bound()),
    "documents.load_all (PyYAML's composer)": lambda: documents.load_all(
        deep_object_text(MAX_DEPTH)
    ),
    "depth_problem": lambda: depth_problem(at_the_bound()),
}  # fmt: skip


@pytest.mark.parametrize("walk", sorted(WALKS))
def test_every_recursive_walk_works_at_the_bound_with_half_the_recursion_limit_used(walk: str):
    assert run_with_stack_used(sys.getrecursionlimit() // 2, WALKS[walk]) is None


def run_with_stack_used(frames: int, work: Callable[[], Any]) -> BaseException | None:
    """Run ``work`` in a fresh thread once ``frames`` frames are on its stack; the error
    it raised, or None."""
    failure: list[BaseException] = []

    def descend() -> None:
        if _stack_depth() < frames:
            descend()
            return
        try:
            work()
        except BaseException as err:  # reported to the test
            failure.append(err)

    thread = threading.Thread(target=descend)
    thread.start()
    thread.join()
    return failure[0] if failure else None


def _stack_depth() -> int:
    frame, depth = sys._getframe(), 0
    while frame is not None:
        frame, depth = frame.f_back, depth + 1
    return depth


def test_the_walk_harness_does_see_a_recursion_error_past_the_bound():
    # The same walks on a plain value 300 levels deep (what orjson used to hand out).
    too_deep = json.loads(deep_object_text(300))
    error = run_with_stack_used(sys.getrecursionlimit() // 2, lambda: copy.deepcopy(too_deep))
    assert isinstance(error, RecursionError)


def test_a_deep_json_leaf_is_shared_by_copies_not_walked():
    leaf = DeepJSON("[" * 5000 + "]" * 5000)
    assert copy.deepcopy({"a": leaf})["a"] is leaf
