"""`agent-harness inception` through the real entry point, against the scripted planner on
loopback (OpenAI's wire format): unattended, answered from a file, resumed, and at a terminal."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_harness.cli import main
from agent_harness.plan.markdown import parse_plan_file
from agent_harness.testing.model_server import ModelServer, ScriptedResponder
from agent_harness.testing.planner_rules import inception_rules

pytestmark = pytest.mark.integration

KEY = "sk-cli-planner-0123456789"
PARAGRAPH = (
    "Add word_count(text) in tally/words.py, tested by tests/test_words.py. "
    "Should punctuation count as a word? Leave README.md alone."
)


@pytest.fixture
def planner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModelServer]:
    with ModelServer([ScriptedResponder(inception_rules)], api_key=KEY) as server:
        monkeypatch.chdir(tmp_path)
        monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1")
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        yield server


def inception(*args: str) -> int:
    return main(["inception", *args, "--planner", "openai:gpt-4.1", "--db", "sqlite:///h.sqlite"])


def session_id(err: str) -> str:
    return err.split("inception session ", 1)[1].split(" ", 1)[0]


def test_unattended_with_a_blocking_question_open_exits_3_and_writes_nothing(
    planner: ModelServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert inception(PARAGRAPH, "--no-ask") == 3
    err = capsys.readouterr().err
    assert "Q1 BLOCKING Should punctuation count as a word? — proposed: No" in err
    last = err.strip().splitlines()[-1]
    assert last.startswith("error: approval refused: 1 BLOCKING question is unanswered (Q1: ")
    assert f"--resume {session_id(err)}" in last
    assert not (tmp_path / "PLAN.md").exists()


def test_answers_from_a_file_end_in_a_plan_the_parser_reads_whole(
    planner: ModelServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    answers = tmp_path / "answers.toml"
    answers.write_text('Q1 = "No: words are runs of non-whitespace"\nQ2 = {defer = true}\n')
    assert inception(PARAGRAPH, "--answers", str(answers), "--json") == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["status"] == "planned" and shown["out"] == "PLAN.md"
    assert [q["state"] for q in shown["questions"]] == ["answered", "deferred"]
    plan = parse_plan_file(tmp_path / "PLAN.md")
    assert plan.unread == () and [item.id for item in plan.items] == ["T1"]
    assert plan.items[0].files == ("tally/words.py", "tests/test_words.py")
    assert inception(PARAGRAPH, "--accept-defaults") == 2  # PLAN.md is there: not replaced
    assert "PLAN.md exists; pass --force" in capsys.readouterr().err


def test_a_refused_session_resumes_with_defaults_accepted(
    planner: ModelServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert inception(PARAGRAPH, "--no-ask") == 3
    sid = session_id(capsys.readouterr().err)
    requests = len(planner.requests)
    code = main(["inception", "--resume", sid, "--accept-defaults", "--db", "sqlite:///h.sqlite"])
    assert code == 0
    assert len(planner.requests) == requests + 1  # the scope was not asked for again
    assert "Decided (Q1): No" in (tmp_path / "PLAN.md").read_text()
    bad = main(
        ["inception", "--resume", "feedfeedfeed", "--out", "x.md", "--db", "sqlite:///h.sqlite"]
    )
    assert bad == 2
    assert "no inception session 'feedfeedfeed'" in capsys.readouterr().err


def test_at_a_terminal_it_asks_in_grade_order_and_shows_the_plan_first(
    planner: ModelServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Feedback: none; Q1 (BLOCKING): "defer" is refused, then answered; Q2 (NICE): Enter takes
    # the proposed answer; then yes, write it.
    typed = "\ndefer\nYes, punctuation is a word\n\ny\n"
    monkeypatch.setattr("sys.stdin", io.StringIO(typed))
    assert inception(PARAGRAPH, "--ask", "--out", "plans/PLAN.md") == 0
    err = capsys.readouterr().err
    assert err.index("Q1 BLOCKING") < err.index("Q2 NICE")
    assert "Q1 is BLOCKING: answer it, or re-grade it before deferring" in err
    assert err.index("## Milestone: first delivery") < err.index("Write the plan to plans/PLAN.md?")
    text = (tmp_path / "plans" / "PLAN.md").read_text()
    assert "answered: Yes, punctuation is a word" in text and "answered: feature" in text


def test_bad_input_is_one_line_and_starts_nothing(
    planner: ModelServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "answers.json").write_text('{"Q1": {"answr": "typo"}}')
    assert inception(PARAGRAPH, "--answers", "answers.json") == 2
    assert capsys.readouterr().err.startswith("error: answers file answers.json, Q1: answr:")
    assert main(["inception", PARAGRAPH, "--planner", "openai", "--db", "sqlite:///h.sqlite"]) == 2
    assert "should look like vendor:model" in capsys.readouterr().err
    assert inception("   ") == 2
    assert planner.requests == []


def test_json_on_a_blocked_session_gives_its_questions_and_one_error_object(
    planner: ModelServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A script needs the question ids to write an answers file: stdout holds the session, and
    # stderr only the error, as JSON.
    assert inception(PARAGRAPH, "--no-ask", "--json") == 3
    captured = capsys.readouterr()
    shown = json.loads(captured.out)
    assert shown["status"] == "scoped" and shown["out"] is None
    assert [(q["id"], q["grade"]) for q in shown["questions"]] == [
        ("Q1", "BLOCKING"),
        ("Q2", "NICE"),
    ]
    error = json.loads(captured.err)
    assert error["exit"] == 3 and error["error"].startswith("approval refused: 1 BLOCKING")


def test_an_answers_file_with_one_bad_entry_records_none_of_it(
    planner: ModelServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "answers.json").write_text('{"Q2": "mine", "Q1": {"grade": "FOO"}}')
    assert inception(PARAGRAPH, "--answers", "answers.json", "--json") == 2
    captured = capsys.readouterr()
    assert "grade 'FOO' is not one of BLOCKING, IMPORTANT, NICE" in captured.err
    shown = json.loads(captured.out)
    assert [q["state"] for q in shown["questions"]] == ["open", "open"]  # Q2 not answered
    (tmp_path / "answers.json").write_text('{"Q1": {"answer": "yes", "defer": true}}')
    resumed = ["inception", "--resume", shown["id"], "--answers", "answers.json"]
    assert main([*resumed, "--db", "sqlite:///h.sqlite"]) == 2
    assert "Q1 both answers and defers" in capsys.readouterr().err


def test_an_out_that_cannot_be_written_is_refused_before_the_planner_is_paid(
    planner: ModelServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "f").write_text("a file, not a folder\n")
    (tmp_path / "PLAN.md").symlink_to(tmp_path / "nowhere.md")
    for out, said in [
        ("f/PLAN.md", "f is not a folder, so --out cannot be written under it"),
        ("plan.JSON", "names a JSON file, and the plan is markdown"),
        ("PLAN.md", "PLAN.md exists; pass --force"),  # a link to nothing is still there
    ]:
        assert inception(PARAGRAPH, "--accept-defaults", "--out", out) == 2, out
        assert said in capsys.readouterr().err
    assert planner.requests == []
    assert (tmp_path / "PLAN.md").is_symlink()


def test_a_providers_error_quoting_part_of_the_key_shows_none_of_it(
    planner: ModelServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # OpenAI's 401 quotes the key it was given, cut short: no longer the exact secret, still
    # most of it.
    from agent_harness.testing.scripted_turns import ScriptedFailure

    said = f"Incorrect API key provided: {KEY[:-3]}. You can find your API key at https://x."
    body = {"error": {"message": said, "type": "invalid_request_error", "code": "invalid_api_key"}}
    planner.enqueue_first(ScriptedFailure.raw(401, body))
    assert inception(PARAGRAPH, "--accept-defaults") == 1
    err = capsys.readouterr().err
    assert "Incorrect API key provided:" in err and KEY[:12] not in err


def test_markup_typed_at_the_terminal_is_shown_not_read_as_markup(
    planner: ModelServer, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch
) -> None:
    # "grade [/red]" is refused as a grade; the refusal quotes it, which rich must not parse.
    typed = "\ngrade [/red]\nYes\n\ny\n"
    monkeypatch.setattr("sys.stdin", io.StringIO(typed))
    assert inception(PARAGRAPH, "--ask") == 0
    assert "grade '[/red]' is not one of" in capsys.readouterr().err


def test_a_budget_the_next_planner_call_could_pass_asks_nothing_and_keeps_the_session(
    planner: ModelServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AGENT_HARNESS_BUDGETS__INCEPTION_COST_USD", "0.001")
    assert inception(PARAGRAPH, "--accept-defaults") == 75
    err = capsys.readouterr().err
    assert (
        err.strip()
        .splitlines()[-1]
        .startswith(
            "error: inception budget: $0.0000 spent of $0.0010, and the next planner call may cost"
        )
    )
    assert planner.requests == [] and not (tmp_path / "PLAN.md").exists()
    monkeypatch.setenv("AGENT_HARNESS_BUDGETS__INCEPTION_COST_USD", "1")
    resumed = ["inception", "--resume", session_id(err), "--accept-defaults"]
    assert main([*resumed, "--db", "sqlite:///h.sqlite"]) == 0
    assert (tmp_path / "PLAN.md").exists()
