"""`agent-harness ingest` and `agent-harness audit …` as a user runs them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_harness.cli import main
from agent_harness.store.database import open_store
from agent_harness.testing.clock import FakeClock
from tests.audit.conftest import work_an_item

pytestmark = pytest.mark.integration


@pytest.fixture
def work(db_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A work database with two items' lives in it, named by AGENT_HARNESS_DB."""
    path = db_dir / "harness.sqlite"
    monkeypatch.setenv("AGENT_HARNESS_DB", str(path))
    monkeypatch.delenv("AGENT_HARNESS_AUDIT_DB", raising=False)
    clock = FakeClock(start=1_780_000_000)
    with open_store(str(path), clock=clock) as store:
        work_an_item(store, clock, "T1")
        clock.advance(86400)
        work_an_item(store, clock, "T2", approved=False, outcome="closed")
    return path


def _json(capsys: pytest.CaptureFixture[str], *args: str, code: int = 0) -> dict:  # type: ignore[type-arg]
    assert main([*args, "--json"]) == code
    return json.loads(capsys.readouterr().out)  # type: ignore[no-any-return]


def test_ingest_then_every_answer_reads_the_audit_beside_the_work_database(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["ingest"]) == 0
    assert "audit: 14 recorded, 0 already there, 2 deliveries" in capsys.readouterr().out
    assert (work.parent / "audit.sqlite").exists()
    assert _json(capsys, "ingest")["audit"]["added"] == 0
    assert main(["ingest"]) == 0  # it read "0 recorded, 0 already there, 0 deliveries"
    assert "audit: nothing new since it was last recorded\n" in capsys.readouterr().out
    spent = _json(capsys, "audit", "cost")
    assert spent["summary"] == (  # the figures as the table writes them, never $0.00 for $0.03
        "$0.0288 + 4 calls of unknown price (the CLIs reported $0.0400 themselves over 2)"
    )
    done = _json(capsys, "audit", "delivery")
    assert (done["merged"], done["closed"], done["rejection_rate"]) == (1, 1, 0.5)
    page = _json(capsys, "audit", "events", "--limit", "10")
    assert [e["id"] for e in page["events"]] == list(range(1, 11))
    assert page["next_after"] == 10
    assert _json(capsys, "audit", "health")["ok"] is True
    assert main(["audit", "delivery"]) == 0
    shown = capsys.readouterr().out
    assert "1 merged, 1 closed, 0 reverted" in shown
    assert "█" in shown  # the per-day bars
    assert main(["audit", "cost"]) == 0  # 80 columns when not a terminal
    table = capsys.readouterr().out.split("Cost per day")[0]
    assert "tool's own" in table and "unpriced" in table  # both have something to say
    assert max(len(line) for line in table.splitlines()) <= 80
    assert "$0.04" in table or "$0.02" in table  # a figure whole on its line, never folded


def test_a_malformed_line_is_skipped_and_counted_with_its_number(
    work: Path, db_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = db_dir / "ci.jsonl"
    lines.write_text('{"id": "ci-1", "kind": "ci_passed", "item": "T1"}\n{oops\n')
    assert main(["ingest", "--events", str(lines), "--project", "me/app:PLAN"]) == 1
    captured = capsys.readouterr()
    assert f"{lines}:2: not JSON" in captured.err
    assert "audit: 15 recorded" in captured.out
    health = _json(capsys, "audit", "health", code=1)
    assert health["skipped_lines"] == 1
    assert health["problems"] == ["1 lines or records could not be read"]


def test_an_audit_database_that_cannot_be_written_is_a_counted_drop(
    work: Path, db_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = db_dir / "not-a-directory"
    blocker.write_text("")
    assert main(["ingest", "--audit-db", str(blocker / "audit.sqlite")]) == 1
    assert "counted as a drop" in capsys.readouterr().err
    assert main(["ingest"]) == 0  # the good one catches up from the work log
    capsys.readouterr()
    health = _json(capsys, "audit", "health", code=1)
    assert health["drops"]["count"] == 1
    assert "could not be written" in health["problems"][0]


def test_a_baseline_is_recorded_once_and_a_second_is_refused(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["ingest"]) == 0
    capsys.readouterr()
    [row] = _json(capsys, "audit", "baselines", "--baseline", "30:30:before")
    assert (row["baseline_per_day"], row["measured_per_day"]) == (1.0, 0.5)
    assert main(["audit", "baselines", "--baseline", "60:30:before"]) == 2
    assert capsys.readouterr().err.strip() == (
        "error: baseline 'before' is already recorded, and baselines never change; "
        "record a new one under another label"
    )
    assert main(["audit", "baselines", "--baseline", "lots"]) == 2


def test_a_day_that_is_not_a_day_is_refused_in_one_line(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["ingest"]) == 0
    capsys.readouterr()
    assert main(["audit", "cost", "--since", "last week"]) == 2
    assert capsys.readouterr().err.strip() == (
        "error: since 'last week' is not a UTC day: write it as YYYY-MM-DD"
    )


@pytest.mark.parametrize("command", ["cost", "delivery", "events", "baselines"])
def test_a_project_the_audit_never_recorded_is_refused_not_reported_as_empty(
    work: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    assert main(["ingest"]) == 0
    capsys.readouterr()
    assert main(["audit", command, "--project", "me/app:PLAN2"]) == 2
    said = capsys.readouterr().err.strip()
    assert said == (
        "error: the audit has recorded nothing of project me/app:PLAN2 (it holds me/app:PLAN); "
        "check the name, or run `agent-harness ingest` if it ran since the last one"
    )
    assert _json(capsys, "audit", command, "--project", "me/app:PLAN") is not None


def test_reading_before_anything_was_recorded_says_what_to_do(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["audit", "cost"]) == 2
    assert "run `agent-harness ingest`" in capsys.readouterr().err


def test_a_transcript_of_no_known_format_is_reported(
    work: Path, db_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    odd = db_dir / "odd.jsonl"
    odd.write_text('{"hello": "world"}\n')
    assert main(["ingest", "--from", "claude-code", str(odd)]) == 1
    assert "not a Claude Code transcript" in capsys.readouterr().err


@pytest.mark.parametrize(
    "args",
    [
        ["audit"],
        ["audit", "cost"],
        ["audit", "delivery"],
        ["audit", "health"],
        ["audit", "events"],
        ["audit", "baselines"],
        ["audit", "maintain"],
    ],
)
def test_help_has_examples(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*args, "--help"]) == 0
    assert "agent-harness" in capsys.readouterr().out


def test_maintain_rolls_up_and_thins_and_the_answers_stay(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["ingest"]) == 0
    capsys.readouterr()
    before = (_json(capsys, "audit", "cost"), _json(capsys, "audit", "delivery"))
    done = _json(capsys, "audit", "maintain", "--retention-days", "0")
    assert done["rolled"] == done["thinned"] == 14  # the fixture's days are long complete
    assert (_json(capsys, "audit", "cost"), _json(capsys, "audit", "delivery")) == before
    days = json.loads(_json_list(capsys, "audit", "rollups"))
    assert sum(day["events"] for day in days) == 14
    assert [day["rejections"] for day in days if day["reviews"]] == [0, 1]
    page = _json(capsys, "audit", "events")
    assert page["events"] == [] and page["thinned_before"] is not None


def _json_list(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main([*args, "--json"]) == 0
    return capsys.readouterr().out


def test_the_cost_table_leaves_out_columns_with_nothing_to_say() -> None:
    """Every call priced and no tool reporting its own cost: the table has no "unpriced" or
    "tool's own" column, and its six columns read whole at 80 characters."""
    from rich.console import Console

    from agent_harness.audit.cost import CostLine, CostReport
    from agent_harness.cli.audit_view import render_cost

    line = CostLine(
        project="acme/widgets:PLAN",
        role="implementer",
        vendor="anthropic",
        model="claude-sonnet-4-5",
        usage_source="api",
        label="per call",
        calls=1234,
        priced_calls=1234,
        unknown_calls=0,
        cost_usd=123.4567,
        reported_cost_usd=None,
        tokens_in=10,
        tokens_out=5,
        cache_read=0,
        cache_write=0,
    )
    report = CostReport(
        lines=[line],
        days=[],
        unknown=[],
        cost_usd=123.4567,
        priced_calls=1234,
        unknown_calls=0,
        reported_cost_usd=None,
        reported_calls=0,
        price_versions=[],
        summary="$123.46",
    )
    console = Console(width=80, record=True, force_terminal=False)
    render_cost(console, report)
    shown = console.export_text()
    header = next(row for row in shown.splitlines() if "project" in row)
    assert "unpriced" not in header and "tool's own" not in header
    assert "1234" in shown and "$123.46" in shown
    assert max(len(row) for row in shown.splitlines()) <= 80


def test_a_credential_in_an_ingested_line_is_kept_and_shown_masked(
    work: Path, db_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # What a line says someone said (a provider's message, an output's tail, at any depth) is
    # masked before it reaches the work log, the audit or `audit events`; its data is kept.
    key = "sk-ant-api03-" + "CANARY" * 8
    lines = db_dir / "ci.jsonl"
    branch = "agent-harness/T3-api-key-rotation-v2"
    event = {"id": "x-1", "kind": "model.call", "item": "T1",
             "payload": {"role": "reviewer", "vendor": "anthropic", "model": "claude-x",
                         "failure": "auth", "failure_message": f"invalid x-api-key {key}",
                         "branch": branch,
                         "steps": [{"tail": f"Authorization: Bearer {key}"}],
                         "stderr": f"401 for {key}", "messages": [f"key {key}"]}}  # fmt: skip
    lines.write_text(json.dumps(event) + "\n")
    assert main(["ingest", "--events", str(lines), "--project", "me/app:PLAN"]) == 0
    capsys.readouterr()
    assert main(["audit", "events", "--json", "--limit", "100"]) == 0
    shown = capsys.readouterr().out
    assert "CANARY" not in shown and "[redacted" in shown
    assert branch in shown  # a branch that speaks of an api key is no key
    for database in (work, work.parent / "audit.sqlite"):
        assert b"CANARY" not in database.read_bytes()


def test_a_database_that_is_no_audit_is_refused_and_left_as_it_was(
    work: Path, db_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # `audit cost --audit-db harness.sqlite` once made the audit's tables in the work database
    # and answered $0.00; a file of other tables the same.
    other = db_dir / "other.sqlite"
    import sqlite3

    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE t (x INTEGER)")

    def tables(path: Path) -> list[str]:
        with sqlite3.connect(path) as conn:
            rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            return sorted(str(row[0]) for row in rows)

    for target, said in [(work, "it holds the work database"), (other, "tables of its own (t)")]:
        before = tables(target)
        assert main(["audit", "cost", "--audit-db", str(target)]) == 2
        err = capsys.readouterr().err
        assert "is not an audit database" in err and said in err, err
        assert tables(target) == before
    assert main(["ingest", "--audit-db", str(work)]) == 1  # said, and counted as a drop
    assert "is not an audit database" in capsys.readouterr().err


def test_a_late_event_of_a_thinned_day_is_said_and_ingest_exits_1(
    work: Path, db_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Its day's raw rows are gone, so it cannot be told from a repeat: refused, and a script
    # must hear of it (before, only --json listed it, and the exit code was 0).
    assert main(["ingest"]) == 0
    assert main(["audit", "maintain", "--retention-days", "0"]) == 0
    capsys.readouterr()
    late = {"id": "late-1", "kind": "model.call", "ts": 1_780_000_100,
            "payload": {"role": "reviewer", "vendor": "openai", "model": "gpt-4.1",
                        "tokens_in": 1_000_000, "tokens_out": 0}}  # fmt: skip
    lines = db_dir / "late.jsonl"
    lines.write_text(json.dumps(late) + "\n")
    assert main(["ingest", "--events", str(lines), "--project", "me/app:PLAN"]) == 1
    err = capsys.readouterr().err
    assert "was rolled up and thinned; not added again" in err


def test_ingest_from_another_tool_keeps_watching_with_watch(
    work: Path, db_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # --watch with --from once read the logs once and ended, though its help says "keep".
    from tests.audit.test_adapters import _assistant

    transcript = db_dir / "claude" / "s.jsonl"
    transcript.parent.mkdir()
    transcript.write_text(_assistant("msg_1", 5, "end_turn") + "\n")
    naps: list[float] = []

    def nap(seconds: float) -> None:
        naps.append(seconds)
        if len(naps) == 1:  # a new call is written while the watch sleeps
            with transcript.open("a") as log:
                log.write(_assistant("msg_2", 7, "end_turn") + "\n")
        else:
            raise KeyboardInterrupt

    monkeypatch.setattr("agent_harness.cli.ingest_cmd.time.sleep", nap)
    args = ["ingest", "--from", "claude-code", str(transcript.parent), "--watch", "5"]
    assert main(args) == 130  # ended by Ctrl-C, as the docs' exit codes say (it said 0)
    said = capsys.readouterr()
    out = said.out
    assert "interrupted: the watch stopped; what it read is recorded" in said.err
    assert "1 usage records added" in out.splitlines()[0]
    assert "1 usage records added" in out.splitlines()[1] and naps == [5.0, 5.0]


def test_a_since_after_the_until_is_refused_not_answered_with_nothing(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["ingest"]) == 0
    for command in ("cost", "delivery", "rollups"):
        assert main(["audit", command, "--since", "2026-12-05", "--until", "2026-12-01"]) == 2
        assert "--since 2026-12-05 is after --until 2026-12-01" in capsys.readouterr().err


def test_the_audit_database_given_as_the_work_one_is_refused_and_left_as_it_was(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # `work --db audit.sqlite` once made the queue's tables in the audit database, and
    # `work verify` then called it intact.
    import sqlite3

    assert main(["ingest"]) == 0
    audit = work.parent / "audit.sqlite"

    def tables() -> list[str]:
        with sqlite3.connect(audit) as conn:
            return sorted(str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master"))

    before = tables()
    capsys.readouterr()
    for command in (["work"], ["work", "verify"], ["control"]):
        assert main([*command, "--db", str(audit)]) == 2, command
        assert "is not a work database: it is the audit database" in capsys.readouterr().err
    assert tables() == before
