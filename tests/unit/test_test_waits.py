"""Tests wait with ``helpers.waiting.eventually``, not with loops of their own that sleep.

A hand-rolled poll (``while not ready(): time.sleep(0.2)``) forgets the deadline, or fails
with a bare "timed out", or gives up in silence and lets the test go on; ``eventually`` has
one deadline policy and names what it waited for, and what it saw instead. So in the test
sources, outside ``tests/helpers/waiting.py``, there is no sleep in a loop (``while`` or
``for``): no ``time.sleep`` (nor ``from time import sleep``) and no wait on a fresh
``Event()``, which is a sleep under another name. A loop that is no poll, or that cannot
fail a test where it runs, is named in :data:`MAY_SLEEP_IN_A_LOOP` with the reason.

A check of the source, not of a run: a poll on a rare path is held to it as much as one on
every run. Code in strings (a child process's script) is not parsed; such a loop says why
it stays in a comment of its own.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
HOME = "tests/helpers/waiting.py"

#: Folders of tests/ not held to the rule, and why.
NOT_CHECKED = {
    "tests/bench": "benchmarks pace their load and measure durations: time is their subject",
    "tests/soak": (
        "the soak drives load and faults for set durations, and its checker watches a live"
        " stack outside any test"
    ),
}

ROTATION_WINDOW = (
    "not a poll: requests go on for a fixed window of several certificate rotations, and"
    " every one of them must be admitted"
)

#: Functions (``path::qualified name``) that may sleep in a loop, and why.
MAY_SLEEP_IN_A_LOOP = {
    "tests/unit/node_plugin/test_grpc_direct.py::wait_until": (
        "polls inside gRPC handler threads, where failing the test would only end the handler;"
        " the handler records the answer and the test asserts it"
    ),
    "tests/integration/webhook/test_webhook_admission.py::"
    "test_certificates_rotate_with_an_overlapping_bundle_and_no_refused_request": ROTATION_WINDOW,
    "tests/integration/webhook/test_webhook_admission.py::"
    "test_replicas_sharing_a_secret_rotate_together_with_no_refused_request": ROTATION_WINDOW,
    "tests/integration/kubeapi/test_leaderelection.py::test_of_two_candidates_exactly_one_leads": (
        "not a poll: no second leader may appear during six renew periods, a property of a"
        " span of time"
    ),
}


def _time_names(tree: ast.AST) -> tuple[set[str], set[str]]:
    """The names ``time`` goes by, and the names ``time.sleep`` goes by, in ``tree``."""
    modules, sleeps = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules |= {a.asname or a.name for a in node.names if a.name == "time"}
        elif isinstance(node, ast.ImportFrom) and node.module == "time":
            sleeps |= {a.asname or a.name for a in node.names if a.name == "sleep"}
    return modules, sleeps


SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
LOOPS = (ast.While, ast.For, ast.AsyncFor)


def _sleep(func: ast.expr, modules: set[str], sleeps: set[str]) -> str | None:
    """What kind of sleep a call of ``func`` is, if it is one."""
    if isinstance(func, ast.Name) and func.id in sleeps:
        return "time.sleep"
    if not isinstance(func, ast.Attribute):
        return None
    if func.attr == "sleep" and isinstance(func.value, ast.Name):
        return "time.sleep" if func.value.id in modules else None
    if func.attr == "wait" and isinstance(func.value, ast.Call):
        made = func.value.func  # Event().wait(t): no one else holds the event to set it
        name = made.attr if isinstance(made, ast.Attribute) else getattr(made, "id", "")
        return "Event().wait" if name == "Event" else None
    return None


def violations(source: str, path: str) -> list[str]:
    """Each sleep in a loop of ``source`` (the file at ``path``, relative to the repository)
    that :data:`MAY_SLEEP_IN_A_LOOP` does not allow, as ``path:line: what``."""
    tree = ast.parse(source)
    modules, sleeps = _time_names(tree)
    found: list[str] = []

    def visit(node: ast.AST, scope: tuple[str, ...], in_loop: bool) -> None:
        if isinstance(node, SCOPES):
            # A function defined in a loop runs when called, not once per turn of the loop.
            scope, in_loop = (*scope, node.name), False
        elif isinstance(node, LOOPS):
            in_loop = True
        elif isinstance(node, ast.Call) and in_loop:
            what = _sleep(node.func, modules, sleeps)
            name = ".".join(scope)
            if what and f"{path}::{name}" not in MAY_SLEEP_IN_A_LOOP:
                found.append(
                    f"{path}:{node.lineno}: {what} in a loop ({name or 'module'}):"
                    " wait with helpers.waiting.eventually"
                )
        for child in ast.iter_child_nodes(node):
            visit(child, scope, in_loop)

    visit(tree, (), False)
    return found


def _sources() -> list[tuple[str, str]]:
    files = []
    for module in sorted(TESTS.rglob("*.py")):
        path = module.relative_to(ROOT).as_posix()
        if path == HOME or "__pycache__" in module.parts:
            continue
        if not any(path.startswith(folder + "/") for folder in NOT_CHECKED):
            files.append((path, module.read_text()))
    return files


def test_tests_wait_with_eventually_not_with_a_sleep_in_a_loop() -> None:
    sources = _sources()
    assert any(path.startswith("tests/node/") for path, _ in sources)
    found = [line for path, text in sources for line in violations(text, path)]
    assert found == []


def test_every_allowed_sleep_in_a_loop_is_still_there() -> None:
    for where in list(MAY_SLEEP_IN_A_LOOP):
        path = where.split("::")[0]
        reason = MAY_SLEEP_IN_A_LOOP.pop(where)
        try:
            assert violations((ROOT / path).read_text(), path), f"{where} needs no exception"
        finally:
            MAY_SLEEP_IN_A_LOOP[where] = reason


def test_a_poll_that_sleeps_in_a_loop_is_refused() -> None:
    planted = (
        "import time\n"
        "def wait_ready(server):\n"
        "    deadline = time.monotonic() + 60\n"
        "    while not server.ready():\n"
        "        assert time.monotonic() < deadline\n"
        "        time.sleep(0.2)\n"
    )
    assert violations(planted, "tests/integration/planted.py") == [
        "tests/integration/planted.py:6: time.sleep in a loop (wait_ready):"
        " wait with helpers.waiting.eventually"
    ]


def test_the_other_ways_to_sleep_in_a_loop_are_refused() -> None:
    planted = (
        "import threading\n"
        "import time as clock\n"
        "from time import sleep as pause\n"
        "class Rig:\n"
        "    def connect(self):\n"
        "        for _ in range(10):\n"
        "            try:\n"
        "                return self.dial()\n"
        "            except OSError:\n"
        "                pause(1)\n"
        "while queue.empty():\n"
        "    threading.Event().wait(0.01)\n"
        "while not done():\n"
        "    clock.sleep(0.1)\n"
    )
    found = violations(planted, "tests/unit/planted.py")
    assert [line.split(": ", 1)[1].split(":")[0] for line in found] == [
        "time.sleep in a loop (Rig.connect)",
        "Event().wait in a loop (module)",
        "time.sleep in a loop (module)",
    ]


def test_eventually_and_loops_that_do_not_sleep_pass() -> None:
    clean = (
        "import time\n"
        "from helpers.waiting import eventually\n"
        "eventually(lambda: server.ready(), 'the server ready')\n"
        "while not stop.wait(0.2):  # a sampler until the test stops it\n"
        "    seen.append(sample())\n"
        "for line in stream:\n"
        "    def later():\n"
        "        time.sleep(1)\n"
        "    handlers.append(later)\n"
    )
    assert violations(clean, "tests/unit/planted.py") == []
