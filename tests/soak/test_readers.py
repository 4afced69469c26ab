"""The checker's own readers, on files and values written by drakit's real writers."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

from drakit.node_plugin.checkpoint import COMPLETED, STARTED, Checkpoint, ClaimEntry
from drakit.node_plugin.driver import PreparedDevice
from soak.clusterstate import parse_pod, selector_matches
from soak.nodefiles import UnreadableFileError, read_cdi_specs, read_checkpoint
from soak.quantity import parse_quantity

A = "0b6c1a52-3e0e-4a47-9d56-aaaaaaaaaaaa"
B = "0b6c1a52-3e0e-4a47-9d56-bbbbbbbbbbbb"


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("40Gi", 40 * 2**30),
        ("500m", Fraction(1, 2)),
        ("1.5k", 1500),
        ("1e3", 1000),
        ("2E-2", Fraction(2, 100)),
        ("-3", -3),
        (".5", Fraction(1, 2)),
        (7, 7),
    ],
)
def test_quantities_read_exactly(text: object, value: Fraction) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["", "Gi", "1Q", "1e99", "1 Gi", True, None, "9" * 100])
def test_malformed_quantities_are_refused(text: object) -> None:
    with pytest.raises(ValueError, match="quantity"):
        parse_quantity(text)


def entry(uid: str, state: str = COMPLETED) -> ClaimEntry:
    device = PreparedDevice(("gpu",), "pool", "gpu-0", (f"k8s.d/claim={uid}-gpu-0",))
    return ClaimEntry(uid, "ns", f"claim-{uid[-4:]}", state, devices=(device,))


def test_a_checkpoint_is_read_with_its_journal(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint.json"
    checkpoint = Checkpoint(path, boot_id=lambda: "boot")
    checkpoint.refresh()
    checkpoint.put(entry(A, STARTED))
    checkpoint.save()  # a snapshot
    checkpoint.put(entry(A), entry(B))
    checkpoint.save()  # a journal record
    checkpoint.remove(B)
    checkpoint.save()  # another
    assert path.with_name("checkpoint.json.journal").stat().st_size > 0
    read = read_checkpoint(path)
    assert set(read) == {A}
    assert read[A].completed and read[A].cdi_ids == (f"k8s.d/claim={A}-gpu-0",)


def test_a_torn_last_journal_record_is_ignored_and_a_damaged_earlier_one_refused(
    tmp_path: Path,
) -> None:
    path = tmp_path / "checkpoint.json"
    checkpoint = Checkpoint(path, boot_id=lambda: "boot")
    checkpoint.refresh()
    checkpoint.put(entry(A))
    checkpoint.save()
    checkpoint.put(entry(B))
    checkpoint.save()
    journal = path.with_name("checkpoint.json.journal")
    whole = journal.read_bytes()
    journal.write_bytes(whole + b'{"put": {"torn')  # a crash in the middle of an append
    assert set(read_checkpoint(path)) == {A, B}
    header, record, _ = whole.split(b"\n")
    journal.write_bytes(b"\n".join([header, record.replace(b"ns", b"xx"), record, b""]))
    with pytest.raises(UnreadableFileError, match="record 1 is damaged"):
        read_checkpoint(path)


def test_no_checkpoint_reads_as_empty_and_a_foreign_file_is_refused(tmp_path: Path) -> None:
    assert read_checkpoint(tmp_path / "checkpoint.json") == {}
    (tmp_path / "checkpoint.json").write_text('{"kind": "Other"}')
    with pytest.raises(UnreadableFileError, match=r"not a drakit\.dev NodePluginCheckpoint"):
        read_checkpoint(tmp_path / "checkpoint.json")


def test_cdi_specs_are_found_by_claim_uid_and_temp_files_ignored(tmp_path: Path) -> None:
    (tmp_path / f"k8s.d-claim_{A}.json").write_text(
        '{"kind": "k8s.d/claim", "devices": [{"name": "x"}]}'
    )
    (tmp_path / f".k8s.d-claim_{B}.json.123.tmp").write_text("partial")
    (tmp_path / f"k8s.d-claim_{B}.json").write_text("{not json")
    (tmp_path / "k8s.other-claim_x.json").write_text("{}")
    specs = read_cdi_specs(tmp_path, "d")
    assert set(specs) == {A, B}
    assert specs[A].defines("k8s.d/claim=x") and not specs[A].defines("k8s.d/claim=y")
    assert specs[B].problem.startswith("unreadable")


def test_node_selectors_select_by_name_and_labels() -> None:
    by_name = {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a"]}]}
        ]
    }
    by_label = {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["z1"]}]},
            {"matchExpressions": [{"key": "gpus", "operator": "Gt", "values": ["3"]}]},
        ]
    }
    assert selector_matches(by_name, "a", {}) and not selector_matches(by_name, "b", {})
    assert selector_matches(by_label, "n", {"zone": "z2"})
    assert selector_matches(by_label, "n", {"zone": "z1", "gpus": "4"})
    assert not selector_matches(by_label, "n", {"zone": "z1", "gpus": "3"})
    assert not selector_matches({"nodeSelectorTerms": [{}]}, "a", {})
    assert selector_matches(None, "anything", {})


def test_a_pod_claim_that_needed_no_claim_is_not_expected() -> None:
    pod = parse_pod(
        {
            "metadata": {"name": "p", "namespace": "ns", "uid": "u"},
            "spec": {
                "nodeName": "n",
                "resourceClaims": [
                    {"name": "skipped", "resourceClaimTemplateName": "t"},
                    {"name": "made", "resourceClaimTemplateName": "t"},
                    {"name": "pending", "resourceClaimTemplateName": "t"},
                    {"name": "own", "resourceClaimName": "c"},
                ],
            },
            "status": {
                "phase": "Running",
                "resourceClaimStatuses": [
                    {"name": "skipped"},
                    {"name": "made", "resourceClaimName": "p-made"},
                ],
            },
        }
    )
    assert [(c.entry, c.claim_name) for c in pod.claims] == [
        ("made", "p-made"),
        ("pending", None),
        ("own", "c"),
    ]
    assert pod.running
