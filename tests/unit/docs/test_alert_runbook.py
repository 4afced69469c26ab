"""docs/alerts.md has one runbook entry per alert rule of deploy/monitoring/drakit-alerts.yaml,
each saying what the alert means, what to check and what to do."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[3]
RUNBOOK = ROOT / "docs" / "alerts.md"
PARTS = ("**What it means.**", "**What to check.**", "**What to do.**")


def _rules() -> list[dict[str, object]]:
    groups = yaml.safe_load((ROOT / "deploy" / "monitoring" / "drakit-alerts.yaml").read_text())
    return [rule for group in groups["groups"] for rule in group["rules"]]


def _entries() -> dict[str, str]:
    """Runbook entry text by alert name (one `## Name` section each)."""
    sections = re.split(r"^## ", RUNBOOK.read_text(), flags=re.M)[1:]
    return {s.split("\n", 1)[0].strip(): s for s in sections}


def test_every_alert_rule_has_exactly_one_runbook_entry_and_no_entry_is_stale() -> None:
    alerts = [str(rule["alert"]) for rule in _rules()]
    assert sorted(_entries()) == sorted(alerts)
    assert len(set(alerts)) == len(alerts)


def test_every_entry_says_what_it_means_what_to_check_and_what_to_do() -> None:
    missing = {name: [p for p in PARTS if p not in text] for name, text in _entries().items()}
    assert {name: parts for name, parts in missing.items() if parts} == {}


def test_every_entry_names_its_rules_severity() -> None:
    entries = _entries()
    for rule in _rules():
        labels = rule.get("labels")
        severity = labels.get("severity") if isinstance(labels, dict) else None
        assert f"**Severity:** {severity}." in entries[str(rule["alert"])], rule["alert"]
