"""Configuration documents that may be JSON or YAML (kubeconfigs, ``--backend-config``).

JSON is read with the standard library and PyYAML is imported only for text that is not a
JSON object or array: a node plugin whose kubeconfig and backend configuration are JSON (or
absent, in a pod) does not pay PyYAML's memory (about 1.1 MiB). A JSON document means the
same in YAML (JSON is YAML 1.2), so parsing it as JSON gives what PyYAML would give, except
where PyYAML follows YAML 1.1 (``1e3`` is a number in JSON and YAML 1.2, a string for
PyYAML): the JSON meaning wins, as it does for Kubernetes' own YAML reader.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["DocumentError", "parse_document"]


class DocumentError(ValueError):
    """The text is neither JSON nor YAML; the message is the parser's (line and column)."""


def _no_constant(name: str) -> Any:
    # NaN and Infinity are not JSON; leave such text to the YAML reader, as before.
    raise ValueError(f"{name} is not JSON")


def parse_document(text: str) -> Any:
    """The value of one JSON or YAML document (YAML read safely: plain data only);
    None for an empty YAML document. DocumentError if it is neither."""
    if text.lstrip()[:1] in ("{", "["):
        try:
            return json.loads(text, parse_constant=_no_constant)
        except ValueError:
            pass  # YAML flow style ({a: 1}) or broken: the YAML reader decides and explains
    import yaml  # noqa: PLC0415 (only for YAML text; see the module docstring)

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        return yaml.load(text, Loader=loader)
    except yaml.YAMLError as err:
        raise DocumentError(str(err)) from err
