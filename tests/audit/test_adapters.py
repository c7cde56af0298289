"""Claude Code and Codex logs, as the real CLIs wrote them in the real-agent tests (their
offline runs against the scripted providers), read into the audit's usage records."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from agent_harness.audit.adapters import claude_code, codex, ingest_logs
from agent_harness.audit.cost import cost
from agent_harness.audit.ingest import ingest_work_store
from agent_harness.store.database import Store
from agent_harness.store.events import WorktreeReady
from agent_harness.testing.clock import FakeClock
from tests.audit.conftest import PROJECT

pytestmark = pytest.mark.integration

RECORDED = Path(__file__).parent / "transcripts"
CLAUDE = RECORDED / "claude-code-implementer.jsonl"
CODEX = RECORDED / "codex-implementer.jsonl"


def _cwd(path: Path, key: str) -> str:
    for line in path.read_text().splitlines():
        data = json.loads(line)
        found = data.get(key) or (data.get("payload") or {}).get(key)
        if isinstance(found, str):
            return found
    raise AssertionError(f"no {key} in {path}")


def test_claude_code_usage_counts_each_message_once_with_its_cache_fields() -> None:
    found = claude_code.read(CLAUDE)
    assert found.skipped == []
    # The transcript writes its first message on two lines (one per content block).
    lines = [json.loads(x) for x in CLAUDE.read_text().splitlines()]
    assistant = [x for x in lines if x.get("type") == "assistant"]
    assert len(assistant) == 3
    assert len(found.usages) == 2
    assert {u.model for u in found.usages} == {"claude-opus-5-5"}
    first = assistant[0]["message"]["usage"]
    prompt = (
        first["input_tokens"]
        + first["cache_creation_input_tokens"]
        + first["cache_read_input_tokens"]
    )
    assert found.usages[0].usage.tokens_in == prompt


def test_codex_takes_the_cumulative_total_and_never_adds_turns_on_top() -> None:
    found = codex.read(CODEX)
    assert found.skipped == []
    totals = [
        json.loads(x)["payload"]["info"]["total_token_usage"]
        for x in CODEX.read_text().splitlines()
        if '"token_count"' in x
    ]
    assert sum(u.usage.tokens_in or 0 for u in found.usages) == totals[-1]["input_tokens"]
    assert sum(u.usage.tokens_out or 0 for u in found.usages) == totals[-1]["output_tokens"]
    assert {u.model for u in found.usages} == {"gpt-5.5"}


def test_a_session_in_an_items_worktree_is_that_items(
    sqlite_work: Store, sqlite_audit: Store, clock: FakeClock, db_dir: Path
) -> None:
    worktree = _cwd(CLAUDE, "cwd")
    sqlite_work.append_event(
        PROJECT, "A1", WorktreeReady(path=worktree, branch="agent/A1", base="abc")
    )
    ingest_work_store(sqlite_work, sqlite_audit)
    root = db_dir / "claude" / "projects"
    shutil.copytree(RECORDED, root, ignore=shutil.ignore_patterns("codex-*"))
    first = ingest_logs(sqlite_audit, "claude-code", root)
    assert (first.added, first.skipped) == (2, [])
    assert ingest_logs(sqlite_audit, "claude-code", root).added == 0
    lines = [line for line in cost(sqlite_audit).lines if line.usage_source == "claude-code"]
    assert [(line.project, line.calls) for line in lines] == [(PROJECT, 2)]
    with sqlite_audit.transaction(write=False) as tx:
        assert tx.all("SELECT DISTINCT item FROM audit_events WHERE source = 'claude-code'") == [
            ("A1",)
        ]


def test_a_bad_line_is_counted_by_number_and_an_unknown_format_is_reported(
    sqlite_audit: Store, db_dir: Path
) -> None:
    logs = db_dir / "sessions"
    logs.mkdir()
    broken = logs / "rollout-broken.jsonl"
    broken.write_text(CODEX.read_text() + "{not json\n")
    stranger = logs / "rollout-other.jsonl"
    stranger.write_text('{"event": "something else"}\n')
    report = ingest_logs(sqlite_audit, "codex", logs)
    assert report.added == 2
    where = {skipped.where: skipped.reason for skipped in report.skipped}
    lines = len(CODEX.read_text().splitlines())
    assert where[f"{broken}:{lines + 1}"] == "not JSON"
    assert "not a Codex session log" in where[str(stranger)]
