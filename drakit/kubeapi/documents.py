"""Configuration and input documents that may be JSON or YAML (kubeconfigs,
``--backend-config``, ``drakit allocate``'s files), read within the depth bound.

JSON is read with the standard library and PyYAML is imported only for text that is not a
JSON object or array: a node plugin whose kubeconfig and backend configuration are JSON (or
absent, in a pod) does not pay PyYAML's memory (about 1.1 MiB). A JSON document means the
same in YAML (JSON is YAML 1.2), so parsing it as JSON gives what PyYAML would give, except
where PyYAML follows YAML 1.1 (``1e3`` is a number in JSON and YAML 1.2, a string for
PyYAML): the JSON meaning wins, as it does for Kubernetes' own YAML reader.

Nothing nests deeper than :data:`drakit.kubeapi.deepjson.MAX_DEPTH`: JSON text is measured
before it is parsed, and YAML composition stops at the bound (PyYAML's composer recurses
once per level, and libyaml's, behind ``CSafeLoader``, overflows the C stack: a 100,000-deep
``[[[…`` crashed the process with SIGSEGV). Aliases can build deeper values out of shallow
nodes (``&a [*b]``), so the value is measured once more after it is built. Too deep is a
:class:`DocumentError` (YAML: with line and column, from ``yaml.YAMLError``).
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from drakit.kubeapi.deepjson import MAX_DEPTH, depth_problem, within_depth

__all__ = ["DocumentError", "load_all", "parse_document", "parse_json", "yaml_loader"]


class DocumentError(ValueError):
    """The text is neither JSON nor YAML, or nests too deep; the message says where."""


def _no_constant(name: str) -> Any:
    # NaN and Infinity are not JSON; leave such text to the YAML reader, as before.
    raise ValueError(f"{name} is not JSON")


def parse_document(text: str) -> Any:
    """The value of one JSON or YAML document (YAML read safely: plain data only);
    None for an empty YAML document. DocumentError if it is neither, or too deep."""
    if text.lstrip()[:1] in ("{", "[") and within_depth(text):
        try:
            return json.loads(text, parse_constant=_no_constant)
        except ValueError:
            pass  # YAML flow style ({a: 1}) or broken: the YAML reader decides and explains
    import yaml  # noqa: PLC0415 (only for YAML text; see the module docstring)

    try:
        value = yaml.load(text, Loader=yaml_loader())
    except yaml.YAMLError as err:
        raise DocumentError(str(err)) from err
    problem = depth_problem(value)
    if problem is not None:
        raise DocumentError(problem)
    return value


def parse_json(text: str) -> Any:
    """The value of a JSON document; DocumentError when it is not JSON or too deep."""
    if not within_depth(text):
        raise DocumentError(f"nested more than {MAX_DEPTH} levels deep")
    try:
        return json.loads(text)
    except ValueError as err:
        raise DocumentError(str(err)) from err


def load_all(text: str) -> list[Any]:
    """Every document of a YAML stream (JSON is YAML), within the depth bound.

    Raises ``yaml.YAMLError`` (a ``MarkedYAMLError`` with ``problem`` and ``problem_mark``
    for a document that nests too deep while being read), DocumentError for a value that
    aliases made too deep.
    """
    import yaml  # noqa: PLC0415

    docs = list(yaml.load_all(text, Loader=yaml_loader()))
    for index, doc in enumerate(docs):
        problem = depth_problem(doc)
        if problem is not None:
            raise DocumentError(f"document {index + 1}: {problem}")
    return docs


@cache
def yaml_loader() -> type[Any]:
    """PyYAML's SafeLoader, refusing to compose a collection deeper than MAX_DEPTH."""
    import yaml  # noqa: PLC0415

    class BoundedSafeLoader(yaml.SafeLoader):
        """SafeLoader whose composer counts the collections it is inside."""

        _depth = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            if not self.check_event(yaml.SequenceStartEvent, yaml.MappingStartEvent):
                return super().compose_node(parent, index)
            if self._depth >= MAX_DEPTH:
                raise yaml.composer.ComposerError(
                    None, None, f"nested more than {MAX_DEPTH} levels deep",
                    self.peek_event().start_mark,  # type: ignore[no-untyped-call]
                )  # fmt: skip
            self._depth += 1
            try:
                return super().compose_node(parent, index)
            finally:
                self._depth -= 1

    return BoundedSafeLoader
