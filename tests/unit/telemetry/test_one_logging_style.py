"""drakit logs in one style (docs/architecture.md, "One logging style"): every logger comes
from ``get_logger`` and a line's fields are keywords. In the runtime (``drakit/``) and the
development tools (their own source root), outside ``drakit/telemetry/logs.py``, which owns
the stdlib logging machinery, there is:

* no ``logging.getLogger`` (nor ``from logging import getLogger``, ``logging.info``, ...):
  a stdlib logger takes ``extra=`` and ``%`` arguments, the style this rules out;
* no logging call with ``extra=``: the fields are the call's keywords;
* no ``%`` arguments to a logger: the message names the event, the facts are fields.

A check of the source, not of a run: a line logged only on a rare failure path is held to
the style as much as one logged on every call.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SOURCE_ROOTS = (ROOT / "drakit", ROOT / "distributions" / "drakit-localcluster" / "src" / "drakit")
HOME = "drakit/telemetry/logs.py"

#: Files that may call ``logging.getLogger``, and why.
MAY_GET_A_STDLIB_LOGGER = {
    "drakit/allocator/cel/engine.py": (
        "sets the cel library's own logger to ERROR (its warnings repeat errors the engine"
        " raises); the allocator imports nothing of drakit, telemetry included"
    ),
}

LOG_METHODS = frozenset({"debug", "info", "warning", "warn", "error", "exception", "critical"})
#: The stdlib's module-level ways to a logger or a line, each bypassing ``get_logger``.
STDLIB_WAYS = LOG_METHODS | {"getLogger", "Logger", "LoggerAdapter", "log", "basicConfig"}


def _is_logger(receiver: ast.expr) -> bool:
    """True for a receiver named like a logger (``log``, ``_log``, ``logger``,
    ``self._log``, ``context.log``): only those take ``%`` arguments in the stdlib style
    (an EventRecorder's ``warning(obj, reason, action, note)`` is no logger)."""
    name = receiver.attr if isinstance(receiver, ast.Attribute) else getattr(receiver, "id", "")
    return name.lstrip("_") in {"log", "logger"}


def _stdlib_use(node: ast.AST, aliases: set[str]) -> str | None:
    if isinstance(node, ast.ImportFrom) and node.module == "logging":
        names = sorted(a.name for a in node.names if a.name in STDLIB_WAYS)
        return f"from logging import {', '.join(names)}" if names else None
    if (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id in aliases
        and node.attr in STDLIB_WAYS
    ):
        return f"logging.{node.attr}"
    return None


def _call_problem(node: ast.Call) -> str | None:
    func = node.func
    if not isinstance(func, ast.Attribute) or func.attr not in LOG_METHODS | {"log"}:
        return None
    if any(keyword.arg == "extra" for keyword in node.keywords):
        return f".{func.attr}(..., extra=...): pass the fields as keywords"
    if _is_logger(func.value) and func.attr in LOG_METHODS and len(node.args) > 1:
        return f".{func.attr}(msg, %-arguments): name the facts as keyword fields"
    return None


def violations(source: str, path: str) -> list[str]:
    """Each place in ``source`` (the file at ``path``, relative to the repository) that
    leaves the one logging style, as ``path:line: what``."""
    tree = ast.parse(source)
    aliases = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
        if alias.name == "logging"
    }
    found: list[str] = []
    for node in ast.walk(tree):
        problem = _stdlib_use(node, aliases)
        if problem == "logging.getLogger" and path in MAY_GET_A_STDLIB_LOGGER:
            problem = None
        if problem is not None:
            problem += ": use get_logger (drakit.telemetry.logs; drakit.plugin for a backend)"
        elif isinstance(node, ast.Call):
            problem = _call_problem(node)
        if problem is not None:
            found.append(f"{path}:{getattr(node, 'lineno', 0)}: {problem}")
    return sorted(found)


def _sources() -> list[tuple[str, str]]:
    files = []
    for root in SOURCE_ROOTS:
        for module in sorted(root.rglob("*.py")):
            path = module.relative_to(ROOT).as_posix()
            if path != HOME and "kubeletapi/gen" not in path:
                files.append((path, module.read_text()))
    return files


def test_the_runtime_and_the_dev_tools_log_in_the_keyword_style_only() -> None:
    sources = _sources()
    assert any(path.startswith("distributions/") for path, _ in sources)
    found = [line for path, text in sources for line in violations(text, path)]
    assert found == []


def test_every_allowed_stdlib_logger_is_still_needed() -> None:
    for path in MAY_GET_A_STDLIB_LOGGER:
        source = (ROOT / path).read_text()
        allowed = dict(MAY_GET_A_STDLIB_LOGGER)
        MAY_GET_A_STDLIB_LOGGER.pop(path)
        try:
            assert violations(source, path), f"{path} no longer needs its exception"
        finally:
            MAY_GET_A_STDLIB_LOGGER.update(allowed)


def test_a_stdlib_logger_with_extra_fields_is_refused() -> None:
    planted = (
        "import logging\n"
        "logger = logging.getLogger(__name__)\n"
        "logger.info('Created claim', extra={'claim': 'ns/a'})\n"
    )
    assert violations(planted, "drakit/controller/planted.py") == [
        "drakit/controller/planted.py:2: logging.getLogger: use get_logger"
        " (drakit.telemetry.logs; drakit.plugin for a backend)",
        "drakit/controller/planted.py:3: .info(..., extra=...): pass the fields as keywords",
    ]


def test_the_other_ways_round_the_style_are_refused() -> None:
    planted = (
        "import logging as lg\n"
        "from logging import getLogger\n"
        "lg.warning('loose line')\n"
        "self._log.warning('node %s unknown (%s)', node, err)\n"
        "context.log.exception('failed', extra=fields)\n"
    )
    found = violations(planted, "distributions/x/src/drakit/demo/planted.py")
    assert [line.split(": ", 1)[1].split(":")[0] for line in found] == [
        "from logging import getLogger",
        "logging.warning",
        ".warning(msg, %-arguments)",
        ".exception(..., extra=...)",
    ]


def test_the_keyword_style_passes() -> None:
    clean = (
        "from drakit.telemetry.logs import get_logger\n"
        "log = get_logger(__name__).bind(informer='pods')\n"
        "log.info('Watch expired', cause='410')\n"
        "log.warning('Sync failed', exc_info=True, key='ns/a')\n"
        "events.warning(claim, 'Reason', 'Action', 'note')\n"
    )
    assert violations(clean, "drakit/kubeapi/planted.py") == []
