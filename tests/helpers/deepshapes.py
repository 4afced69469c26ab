"""Opaque parameters nested past kubeapi.deepjson's bound, as JSON text.

The apiserver has no depth limit of its own for opaque parameters (or status ``data``): only
their 10 KiB size limit bounds them, so objects nest up to about 1,700 levels and arrays up to
about 5,100 (tests/integration/kubeapi/test_deep_objects.py). ``SHAPES`` are the band between
the bound and that, each as the text of a parameters object that makes the object holding
it at ``level`` (the parameters' own level in it: 7 in a claim, 8 in a template) exactly
``depth`` levels deep.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from drakit.kubeapi.deepjson import MAX_DEPTH

__all__ = ["CLAIM_LEVEL", "SHAPES", "TEMPLATE_LEVEL", "nested_lists", "nested_objects"]

#: The level of ``opaque.parameters`` in a claim (claim, spec, devices, config, [0], opaque,
#: parameters) and in a template (one ``spec`` more).
CLAIM_LEVEL = 7
TEMPLATE_LEVEL = 8


def nested_objects(levels: int) -> str:
    """An object ``levels`` objects deep: ``{"n":{"n":…{}}}``."""
    return '{"n":' * (levels - 1) + "{}" + "}" * (levels - 1)


def nested_lists(levels: int) -> str:
    """An object holding arrays, ``levels`` deep in all: ``{"l":[[…]]}``."""
    return '{"l":' + "[" * (levels - 1) + "]" * (levels - 1) + "}"


#: name -> (depth of the object, parameters text for the parameters' level).
SHAPES: dict[str, tuple[int, Callable[[int], str]]] = {
    "one-past-the-bound": (MAX_DEPTH + 1, lambda level: nested_objects(MAX_DEPTH + 2 - level)),
    "objects-600": (600, lambda level: nested_objects(601 - level)),
    "lists-4500": (4500, lambda level: nested_lists(4501 - level)),
}


def plain_depth(value: Any) -> int:
    """Levels of plain dicts and lists (a DeepJSON leaf counts as none), iteratively."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, depth)
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return deepest
