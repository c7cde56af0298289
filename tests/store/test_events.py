"""The event schema: one enum of kinds, a typed payload each, and a reference that cannot drift."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from agent_harness.store.events import (
    ALL_KINDS,
    NOTE_MODELS,
    STORED_MODELS,
    Claimed,
    FeedbackGiven,
    RawPayload,
    payload_of,
    read_payload,
    reference_markdown,
)

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[2]


def test_docs_events_md_is_generated_from_the_models() -> None:
    written = (ROOT / "docs" / "EVENTS.md").read_text(encoding="utf-8")
    assert written == reference_markdown(), (
        "docs/EVENTS.md is stale: python -m agent_harness.store.events > docs/EVENTS.md"
    )


def test_every_kind_has_exactly_one_model_and_every_model_a_kind() -> None:
    kinds = {kind.value for kind in ALL_KINDS}
    assert set(STORED_MODELS) | set(NOTE_MODELS) == kinds
    for kind, model in STORED_MODELS.items():
        assert model.KIND.value == kind and model.STORED


def test_payloads_are_stored_under_their_written_names_and_read_back_typed() -> None:
    claimed = Claimed(from_="pending", to="claimed", worker="w", attempt=1, token=7, expires_at=9.5)
    stored = claimed.as_dict()
    assert stored == {
        "from": "pending",
        "to": "claimed",
        "worker": "w",
        "attempt": 1,
        "token": 7,
        "expires_at": 9.5,
    }
    assert read_payload("claimed", json.loads(json.dumps(stored))) == claimed
    feedback = read_payload("feedback", {"kind": "checks", "summary": "s", "detail": "d"})
    assert isinstance(feedback, FeedbackGiven) and feedback.source == "checks"
    assert feedback.as_dict()["kind"] == "checks"


def test_unknown_kinds_and_misfits_are_kept_whole() -> None:
    outside = read_payload("ci.run", {"run": 12, "status": "green"})
    assert isinstance(outside, RawPayload) and outside.as_dict() == {"run": 12, "status": "green"}
    bad = read_payload("review", {"approved": "perhaps"})
    assert isinstance(bad, RawPayload) and bad.problem and "approved" in bad.problem
    with pytest.raises(ValueError, match="no event kind"):
        payload_of("made.up", {})


def test_a_field_added_by_a_newer_version_survives_a_round_trip() -> None:
    newer = read_payload("pushed", {"branch": "b", "sha": "s", "remote": "origin"})
    assert newer.as_dict() == {"branch": "b", "sha": "s", "remote": "origin"}


def test_no_reader_outside_the_events_module_indexes_a_payload_by_key() -> None:
    offenders = []
    for path in sorted((ROOT / "agent_harness").rglob("*.py")):
        if path.name == "events.py" and path.parent.name == "store":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            target = None
            if isinstance(node, ast.Subscript):
                target = node.value
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "get"
            ):
                target = node.func.value
            if isinstance(target, ast.Attribute) and target.attr == "payload":
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == []
