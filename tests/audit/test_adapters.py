"""Claude Code and Codex logs, as the real CLIs wrote them in the real-agent tests (their
offline runs against the scripted providers), read into the audit's usage records."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from agent_harness.audit.adapters import claude_code, codex, ingest_logs
from agent_harness.audit.cost import cost
from agent_harness.audit.ingest import ingest_work_store
from agent_harness.cli import main
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


def _codex_count(**usage: object) -> str:
    payload = {"type": "token_count", "info": {"total_token_usage": usage}}
    return json.dumps(
        {"timestamp": "2026-12-01T00:00:00Z", "type": "event_msg", "payload": payload}
    )


def _claude_call(n: int, timestamp: str = "2026-12-01T00:00:00Z", **usage: object) -> str:
    message = {"id": f"msg_hostile_{n}", "model": "claude-sonnet-4-5", "usage": usage}
    line = {"type": "assistant", "sessionId": "s1", "timestamp": timestamp, "message": message}
    return json.dumps(line)


# Each hostile line with whether it is skipped by number. A Codex total that falls is read as
# the count starting again (its new base), as a real restart is: nothing is recorded for it.
HOSTILE: dict[str, list[tuple[str, bool]]] = {
    "codex": [
        (_codex_count(input_tokens="abc"), True),
        (_codex_count(input_tokens=[1]), True),
        (_codex_count(input_tokens=1e308), True),
        (json.dumps({"type": "turn_context", "payload": {"model": {"x": 1}, "cwd": ["a"]}}), False),
        (_codex_count(input_tokens=0, output_tokens=0), False),  # a restart: the new base
        (_codex_count(input_tokens=10**30, output_tokens=1), True),  # grew past any call
    ],
    "claude-code": [
        (_claude_call(1, "9999-12-31T23:59:59-23:59", input_tokens=5), True),
        (_claude_call(2, "0001-01-01T00:00:00+23:59", input_tokens=5), True),
        (_claude_call(3, cache_read_input_tokens=-(10**20)), True),
        (_claude_call(4, input_tokens=10**30), True),
    ],
}


@pytest.mark.parametrize("tool", ["codex", "claude-code"])
def test_hostile_lines_are_skipped_by_number_and_the_rest_is_recorded(
    sqlite_audit: Store, db_dir: Path, tool: str
) -> None:
    # Each skipped line once ended the whole ingest with an internal error (exit 70).
    logs = db_dir / "logs"
    logs.mkdir()
    recorded = CODEX if tool == "codex" else CLAUDE
    hostile = logs / "rollout-hostile.jsonl"
    hostile.write_text(recorded.read_text() + "\n".join(line for line, _ in HOSTILE[tool]) + "\n")
    report = ingest_logs(sqlite_audit, tool, logs)
    assert report.added >= 1  # the recorded calls before the hostile lines
    first = len(recorded.read_text().splitlines()) + 1
    skipped = {s.where for s in report.skipped}
    expected = {f"{hostile}:{first + n}" for n, (_, skip) in enumerate(HOSTILE[tool]) if skip}
    assert skipped == expected, report.skipped
    with sqlite_audit.transaction(write=False) as tx:
        biggest = tx.one("SELECT MAX(tokens_in + tokens_out) FROM audit_events")
    assert biggest is not None and biggest[0] is not None and biggest[0] < 10**12


def _assistant(message_id: str, out: int, stop: str | None, ts: str = "2026-12-05T10:00:00Z"):
    usage = {"input_tokens": 2, "cache_creation_input_tokens": 8655,
             "cache_read_input_tokens": 15030, "output_tokens": out}  # fmt: skip
    message = {"id": message_id, "model": "claude-opus-4-5-20251101", "usage": usage}
    line = {"type": "assistant", "sessionId": "s1", "requestId": f"req_{message_id}",
            "timestamp": ts, "message": {**message, "stop_reason": stop}}  # fmt: skip
    return json.dumps(line)


def test_a_streamed_message_counts_its_last_line_and_one_still_streaming_waits(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Claude Code writes a message's lines as it streams: output_tokens 1, then 20000 (ccusage
    # counted the first, nine times too little). A message the file ends in without a stop
    # reason may still be streaming: it is left for the next ingest, whose count is whole.
    path = tmp_path / "s.jsonl"
    lines = [_assistant("msg_1", 1, None), _assistant("msg_1", 20000, "tool_use")]
    path.write_text("\n".join([*lines, _assistant("msg_2", 3, None)]) + "\n")
    found = claude_code.read(path)
    assert [(u.source_id, u.usage.tokens_out) for u in found.usages] == [
        ("claude-code:msg_1:req_msg_1", 20000)
    ]
    assert found.held == 1
    # `ingest` says it held one back: it said "0 added" of a file just written, nothing more.
    assert main(["ingest", "--from", "claude-code", str(tmp_path), "--audit-db",
                 str(tmp_path / "audit.sqlite")]) == 0  # fmt: skip
    said = capsys.readouterr().out
    assert "1 usage records added" in said and "1 held back (a message still being written" in said
    old = path.stat().st_mtime - 2 * claude_code.STILL_WRITING_S
    os.utime(path, (old, old))  # nothing written since: it stopped where it is
    assert [u.usage.tokens_out for u in claude_code.read(path).usages] == [20000, 3]


@pytest.mark.parametrize(
    ("usage", "why"),
    [
        ({"input_tokens": 1e3, "output_tokens": 10}, "a token count that is not a whole number"),
        ({"input_tokens": 5, "output_tokens": "100"}, "a token count that is not a whole number"),
        ({"input_tokens": 5, "output_tokens": -100}, "token counts must be whole numbers"),
    ],
)
def test_a_count_that_is_no_whole_number_is_reported_never_read_as_zero(
    tmp_path: Path, usage: dict[str, object], why: str
) -> None:
    line = json.loads(_assistant("msg_1", 1, "end_turn"))
    line["message"]["usage"] = usage
    (tmp_path / "s.jsonl").write_text(json.dumps(line) + "\n")
    found = claude_code.read(tmp_path / "s.jsonl")
    assert found.usages == []
    [skipped] = found.skipped
    assert skipped.where.endswith("s.jsonl:1") and why in skipped.reason


def test_a_line_dated_after_tomorrow_is_reported_not_counted(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text(_assistant("msg_1", 5, "end_turn", ts="2099-01-01T00:00:00Z") + "\n")
    found = claude_code.read(path)
    assert found.usages == [] and "ahead of this machine's clock" in found.skipped[0].reason


def test_a_codex_total_that_falls_counts_again_from_zero(tmp_path: Path) -> None:
    lines = [json.dumps({"type": "session_meta", "payload": {"id": "R", "cwd": "/w"}})]
    for n, total in enumerate((1_000_000, 800_000, 900_000)):
        usage = {"input_tokens": total, "output_tokens": 10 * (n + 1)}
        lines.append(json.dumps({"type": "event_msg", "timestamp": "2026-12-05T10:00:00Z",
                                 "payload": {"type": "token_count",
                                             "info": {"total_token_usage": usage}}}))  # fmt: skip
    (tmp_path / "rollout-R.jsonl").write_text("\n".join(lines) + "\n")
    found = codex.read(tmp_path / "rollout-R.jsonl")
    assert [u.usage.tokens_in for u in found.usages] == [1_000_000, 800_000, 100_000]


def test_an_odd_entry_among_the_logs_is_named_and_the_rest_recorded(
    tmp_path: Path, sqlite_audit: Store
) -> None:
    # A link to nothing, a folder and a pipe named *.jsonl once ended (or hung) the whole scan.
    root = tmp_path / "projects" / "p"
    root.mkdir(parents=True)
    (root / "good.jsonl").write_text(_assistant("msg_1", 5, "end_turn") + "\n")
    (root / "dangling.jsonl").symlink_to(tmp_path / "nowhere")
    (root / "folder.jsonl").mkdir()
    os.mkfifo(root / "pipe.jsonl")
    report = ingest_logs(sqlite_audit, "claude-code", tmp_path / "projects")
    assert report.added == 1
    assert sorted((Path(s.where).name, s.reason) for s in report.skipped) == [
        ("dangling.jsonl", "cannot be read: No such file or directory"),
        ("folder.jsonl", "not a regular file"),
        ("pipe.jsonl", "not a regular file"),
    ]


def test_a_bad_line_read_again_on_every_ingest_is_counted_once(
    tmp_path: Path, sqlite_audit: Store
) -> None:
    # Other tools' logs are read whole each time: health counts the lines unreadable now, and
    # the problem clears once the line is whole (a live transcript's half-written last line).
    from agent_harness.audit.health import health

    path = tmp_path / "s.jsonl"
    path.write_text(_assistant("msg_1", 5, "end_turn") + '\n{"type": "assis')
    for _ in range(3):
        ingest_logs(sqlite_audit, "claude-code", path)
    assert health(sqlite_audit).skipped_lines == 1
    path.write_text(_assistant("msg_1", 5, "end_turn") + "\n")  # the half line is gone
    ingest_logs(sqlite_audit, "claude-code", path)  # nothing new to add: still said
    assert health(sqlite_audit).skipped_lines == 0


def test_a_time_written_without_a_zone_is_utc_whatever_the_machines_zone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import time

    from agent_harness.audit.adapters import iso_ts

    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        assert iso_ts("2026-12-05 10:00:07") == iso_ts("2026-12-05T10:00:07Z") == 1_796_464_807
    finally:
        monkeypatch.undo()  # the zone as it was, for the tests after this one
        time.tzset()


def test_one_hour_cache_writes_and_web_searches_are_priced_at_their_own_rates(
    tmp_path: Path, sqlite_audit: Store
) -> None:
    from genai_prices import Usage as LibUsage
    from genai_prices import calc_price

    # One call wrote 8,000 prompt tokens to the cache, 6,000 of them for an hour (twice the
    # input rate, not the five-minute 1.25), and ran three web searches (billed per search).
    line = json.loads(_assistant("msg_1", 400, "end_turn"))
    line["message"]["model"] = "claude-sonnet-4-5"
    line["message"]["usage"] = {
        "input_tokens": 2000, "cache_creation_input_tokens": 8000,
        "cache_read_input_tokens": 0, "output_tokens": 400,
        "cache_creation": {"ephemeral_5m_input_tokens": 2000, "ephemeral_1h_input_tokens": 6000},
        "server_tool_use": {"web_search_requests": 3, "web_fetch_requests": 0},
    }  # fmt: skip
    (tmp_path / "s.jsonl").write_text(json.dumps(line) + "\n")
    ingest_logs(sqlite_audit, "claude-code", tmp_path)
    [spent] = cost(sqlite_audit).lines
    whole = calc_price(
        LibUsage(input_tokens=10_000, cache_write_tokens=8000, cache_write_1h_tokens=6000,
                 output_tokens=400, web_searches=3),
        model_ref="claude-sonnet-4-5", provider_id="anthropic",
    ).total_price  # fmt: skip
    tokens_only = calc_price(
        LibUsage(input_tokens=10_000, cache_write_tokens=8000, output_tokens=400),
        model_ref="claude-sonnet-4-5", provider_id="anthropic",
    ).total_price  # fmt: skip
    assert spent.cost_usd == pytest.approx(float(whole))
    assert spent.cost_usd > float(tokens_only) + 0.03  # searches ($0.03) and the hour's writes
