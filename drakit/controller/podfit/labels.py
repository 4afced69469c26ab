"""metav1.LabelSelector matching (``LabelSelectorAsSelector``).

A missing selector (None) matches nothing; an empty one (``{}``) matches everything. Operators
are In, NotIn, Exists and DoesNotExist; NotIn also matches when the key is absent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["LabelSelector", "SelectorError"]


class SelectorError(ValueError):
    """The selector is malformed (an unknown operator or a missing value list)."""


@dataclass(frozen=True)
class _Requirement:
    key: str
    operator: str
    values: frozenset[str]

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        if self.operator == "In":
            return present and labels[self.key] in self.values
        if self.operator == "NotIn":
            return not present or labels[self.key] not in self.values
        if self.operator == "Exists":
            return present
        return not present  # DoesNotExist


@dataclass(frozen=True)
class LabelSelector:
    """A parsed selector; ``nothing`` is the missing selector."""

    requirements: tuple[_Requirement, ...] = ()
    nothing: bool = False

    @classmethod
    def parse(cls, selector: Mapping[str, Any] | None, where: str) -> LabelSelector:
        """Parse ``selector``; raises SelectorError naming ``where``."""
        if selector is None:
            return cls(nothing=True)
        requirements = [
            _Requirement(str(k), "In", frozenset({str(v)}))
            for k, v in (selector.get("matchLabels") or {}).items()
        ]
        for expression in selector.get("matchExpressions") or ():
            operator = expression.get("operator")
            values = frozenset(str(v) for v in expression.get("values") or ())
            if operator not in ("In", "NotIn", "Exists", "DoesNotExist"):
                raise SelectorError(f"{where}: unknown label selector operator {operator!r}")
            if operator in ("In", "NotIn") and not values:
                raise SelectorError(f"{where}: operator {operator} needs values")
            requirements.append(_Requirement(str(expression.get("key")), operator, values))
        return cls(tuple(requirements))

    @property
    def everything(self) -> bool:
        """True for the empty selector, which matches every set of labels."""
        return not self.nothing and not self.requirements

    def with_labels(self, labels: Mapping[str, str]) -> LabelSelector:
        """This selector with ``key In (value)`` added for each of ``labels``."""
        if self.nothing or not labels:
            return self
        extra = tuple(_Requirement(k, "In", frozenset({v})) for k, v in labels.items())
        return LabelSelector(extra + self.requirements)

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.nothing:
            return False
        return all(r.matches(labels) for r in self.requirements)
