"""drakit's public Python API changes only on purpose: the committed snapshot
(public_api.txt) must match the code, and a difference prints the diff and the command that
accepts it."""

from __future__ import annotations

import dataclasses
import difflib

import api_snapshot
import pytest

REGENERATE = "hack/update-api-snapshot.sh"


def test_public_api_matches_the_committed_snapshot() -> None:
    committed = api_snapshot.SNAPSHOT.read_text()
    current = api_snapshot.render()
    if current != committed:
        diff = "".join(
            difflib.unified_diff(
                committed.splitlines(keepends=True),
                current.splitlines(keepends=True),
                "public_api.txt (committed)",
                "drakit.plugin (now)",
            )
        )
        pytest.fail(
            "drakit's public API differs from tests/unit/packaging/public_api.txt.\n"
            f"If the change is deliberate, run {REGENERATE}, review the diff and record it in "
            "CHANGELOG.md (docs/versioning.md).\n" + diff,
            pytrace=False,
        )


def test_snapshot_names_every_public_name_once() -> None:
    import drakit.plugin  # noqa: PLC0415

    text = api_snapshot.render()
    section = text.split("\nmodule drakit.plugin\n")[1].split("\nmodule drakit.plugin.")[0]
    for name in drakit.plugin.__all__:
        declared = [
            line
            for line in section.splitlines()
            if line.startswith(
                (
                    f"class {name}(",
                    f"class {name}:",
                    f"def {name}(",
                    f"{name}: ",
                    f"{name} = ",
                    f"module {name} = ",
                )
            )
        ]
        assert len(declared) == 1, f"{name}: {declared}"


def test_a_public_module_of_drakit_plugin_is_snapshotted_with_its_own_names() -> None:
    from drakit.plugin import plainconfig  # noqa: PLC0415

    text = api_snapshot.render()
    assert "\nmodule plainconfig = drakit.plugin.plainconfig\n" in text
    section = text.split("\nmodule drakit.plugin.plainconfig\n")[1].split("\nmodule ")[0]
    starts = ("class {}(", "class {}:", "def {}(", "{} = ")
    for name in plainconfig.__all__:
        forms = tuple(start.format(name) for start in starts)
        assert any(line.startswith(forms) for line in section.splitlines()), name


def test_a_field_default_or_frozenness_change_changes_the_snapshot() -> None:
    @dataclasses.dataclass(frozen=True)
    class Before:
        name: str
        count: int = 0

    @dataclasses.dataclass
    class After:
        name: str
        count: int = 1

    before = api_snapshot._class("Thing", Before)
    after = api_snapshot._class("Thing", After)
    assert "@dataclass(frozen=True)" in before and "count: int = 0" in before
    assert "@dataclass\n" in after and "count: int = 1" in after
