"""The demo's small helpers: tables, metric samples, harness events, example files."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from drakit.demo import stack
from drakit.demo.events import HarnessEvents
from drakit.demo.text import Printer, table
from drakit.localcluster import StartError


def test_table_aligns_columns_under_the_header() -> None:
    assert table(("SLICE", "DEVICES"), [("a-long-name", "8"), ("b", "128")]) == [
        "SLICE        DEVICES",
        "a-long-name  8",
        "b            128",
    ]


def test_metric_value_matches_name_and_labels_exactly() -> None:
    text = "\n".join(
        [
            "# HELP drakit_node_plugin_claims_total Claims.",
            'drakit_node_plugin_claims_total{operation="prepare",result="error"} 2.0',
            'drakit_node_plugin_claims_total{operation="prepare",result="success"} 5.0',
            "drakit_node_plugin_prepared_claims 3.0",
            "drakit_node_plugin_prepared_claims_extra 9.0",
        ]
    )
    labels = {"operation": "prepare", "result": "success"}
    assert stack.metric_value(text, "drakit_node_plugin_claims_total", labels) == 5.0
    assert stack.metric_value(text, "drakit_node_plugin_prepared_claims") == 3.0
    assert stack.metric_value(text, "drakit_node_plugin_missing") is None


def test_harness_events_are_read_as_the_file_grows_including_split_lines(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    events = HarnessEvents(path)
    assert events.mark() == 0  # no file yet
    first = json.dumps({"event": "ready"}) + "\n"
    second = json.dumps({"event": "prepared", "pod": "ns/p", "containers": {"main": ["x"]}})
    path.write_text(first + second[:10])
    assert events.mark() == 1
    with path.open("a") as f:
        f.write(second[10:] + "\n")
    assert events.wait("prepared", timeout=1, pod="ns/p")["containers"] == {"main": ["x"]}
    with pytest.raises(StartError, match="no 'unprepared'"):
        events.wait("unprepared", timeout=0.2)


def test_examples_hold_only_the_kinds_the_demo_creates() -> None:
    kinds = [obj["kind"] for obj in stack.load_example("gpu-pod.yaml")]
    assert kinds == ["ResourceClaimTemplate", "Pod"]
    shared = [obj["kind"] for obj in stack.load_example("shared-claim.yaml")]
    assert shared == ["ResourceClaim", "Pod", "Pod"]


def test_a_missing_example_is_an_error_naming_the_file() -> None:
    with pytest.raises(StartError, match=r"no-such\.yaml"):
        stack.load_example("no-such.yaml")


def test_the_demo_prints_no_control_character_it_read_from_the_cluster() -> None:
    stream = io.StringIO()
    printer = Printer(stream)
    hostile = "pod\x1b]0;owned\x07\x1b[2K\u202egnp\rEVIL"
    printer.line(hostile)
    printer.fail(f"first\n{hostile}")
    printer.block(table(["NAME"], [[hostile]]))
    assert not any(ch in stream.getvalue() for ch in "\x1b\x07\u202e\r")
    first = stream.getvalue().splitlines()[0]
    assert "pod" in first and "EVIL" in first  # the carriage return rewrote nothing
