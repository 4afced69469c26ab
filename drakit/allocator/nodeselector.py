"""core/v1 NodeSelector matching against a node's name and labels (node affinity rules)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

from drakit.allocator.model import NodeSelector, NodeSelectorRequirement, NodeSelectorTerm

__all__ = ["NodeSelectorError", "node_selector_matches", "validate_node_selector"]

_LABEL_NAME: Final = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)$")


class NodeSelectorError(ValueError):
    """The selector cannot be evaluated (bad operator, values or field)."""


def node_selector_matches(selector: NodeSelector, name: str, labels: Mapping[str, str]) -> bool:
    """True if any term matches; a term with no requirements matches nothing.

    Raises NodeSelectorError for selectors Kubernetes refuses to parse.
    """
    validate_node_selector(selector)
    return any(_term_matches(t, name, labels) for t in selector.node_selector_terms)


def validate_node_selector(selector: NodeSelector) -> None:
    for i, term in enumerate(selector.node_selector_terms):
        for req in term.match_expressions:
            _check_requirement(req, f"nodeSelectorTerms[{i}].matchExpressions")
        for req in term.match_fields:
            if req.key != "metadata.name":
                raise NodeSelectorError(
                    f"nodeSelectorTerms[{i}].matchFields: unsupported field {req.key!r} "
                    "(only metadata.name)"
                )
            if req.operator not in ("In", "NotIn"):
                raise NodeSelectorError(
                    f"nodeSelectorTerms[{i}].matchFields: operator {req.operator!r} is not "
                    "supported for metadata.name (In, NotIn)"
                )
            if len(req.values) != 1:
                raise NodeSelectorError(
                    f"nodeSelectorTerms[{i}].matchFields: metadata.name needs exactly one value"
                )


def _check_requirement(req: NodeSelectorRequirement, where: str) -> None:
    op = req.operator
    if op in ("In", "NotIn"):
        if not req.values:
            raise NodeSelectorError(f"{where}: values must be non-empty for {op}")
    elif op in ("Exists", "DoesNotExist"):
        if req.values:
            raise NodeSelectorError(f"{where}: values must be empty for {op}")
    elif op in ("Gt", "Lt"):
        if len(req.values) != 1:
            raise NodeSelectorError(f"{where}: {op} needs exactly one value")
        try:
            int(req.values[0])
        except ValueError:
            raise NodeSelectorError(f"{where}: {op} value must be an integer") from None
    else:
        raise NodeSelectorError(f"{where}: {op!r} is not a valid node selector operator")
    name = req.key.rsplit("/", 1)[-1]
    if not req.key or len(name) > 63 or not _LABEL_NAME.match(name):
        raise NodeSelectorError(f"{where}: {req.key!r} is not a valid label key")


def _term_matches(term: NodeSelectorTerm, name: str, labels: Mapping[str, str]) -> bool:
    if not term.match_expressions and not term.match_fields:
        return False
    for req in term.match_expressions:
        if not _label_requirement_matches(req, labels):
            return False
    for req in term.match_fields:
        inside = name in req.values
        if (req.operator == "In") != inside:
            return False
    return True


def _label_requirement_matches(req: NodeSelectorRequirement, labels: Mapping[str, str]) -> bool:
    op = req.operator
    present = req.key in labels
    if op == "In":
        return present and labels[req.key] in req.values
    if op == "NotIn":
        return not present or labels[req.key] not in req.values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if not present:
        return False
    try:
        have = int(labels[req.key])
    except ValueError:
        return False
    want = int(req.values[0])
    return have > want if op == "Gt" else have < want
