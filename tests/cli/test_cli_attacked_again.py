"""The second round of attacks on the command line: secrets shown back, files clobbered,
names that differ only in case, and values too big or too odd to hold. Each ends in a clear
one-line error or a masked value, never a traceback or a leak."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest

from agent_harness.cli import main
from agent_harness.secrets.shapes import mask_url

PASSWORD = "hunter2-canary-7c1d"
EXAMPLE = str(Path(__file__).resolve().parents[2] / "examples" / "PLAN.md")


@pytest.mark.unit
@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://u:PW@db.example:5432/q", "postgresql://u:***@db.example:5432/q"),
        ("postgresql://u:PW@[::1/x", "postgresql://u:***@[::1/x"),  # too malformed to parse
        ("postgresql://u:p@PW@h/x", "postgresql://u:***@h/x"),  # an '@' in the password
        ("postgresql://h/db?sslmode=require&password=PW", "postgresql://h/db?sslmode=require&password=***"),
        ("http://h/p?x=1#top", "http://h/p?x=1#top"),
        ("postgresql://u@h/db", "postgresql://u@h/db"),
        ("/var/lib/harness.sqlite", "/var/lib/harness.sqlite"),
    ],
)  # fmt: skip
def test_a_url_is_shown_without_its_password(url: str, shown: str) -> None:
    assert mask_url(url) == shown


@pytest.mark.unit
@pytest.mark.parametrize("how", ["flag", "env", "file"])
def test_config_never_shows_the_database_password(
    how: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = f"postgresql://harness:{PASSWORD}@db.example/fleet"
    monkeypatch.chdir(tmp_path)
    args = ["config"]
    if how == "flag":
        args += ["--db", url]
    elif how == "env":
        monkeypatch.setenv("AGENT_HARNESS_STORE__DB", url)
    else:
        (tmp_path / "agent-harness.toml").write_text(f'[store]\ndb = "{url}"\n')
    assert main(args) == 0
    assert main([*args, "--json"]) == 0
    out = capsys.readouterr().out
    assert PASSWORD not in out
    assert "harness:***@db.example/fleet" in out


@pytest.mark.unit
@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("http://[::1", "is not a URL: Invalid port"),
        ("http://h/" + "a" * 70_000, "is not a URL: URL too long"),
        ("http://h/caf\udce9", "http://h/caf\\xe9 is not a URL: it holds bytes"),
        ("ftp://h", "ftp://h is not a server's address"),
        ("127.0.0.1:8765", "is not a server's address: give http://HOST:PORT"),
        ("http://127.0.0.1:99999", "names port 99999: a port is 1 to 65535"),
        # Its paths went after the query, and every check failed as "401" or "Not Found".
        ("http://127.0.0.1:8765?x=1", "has a query or fragment: give the server's address"),
        ("http://127.0.0.1:8765/#top", "has a query or fragment"),
        (f"http://u:{PASSWORD}@[::1", "http://u:***@[::1 is not a URL"),
    ],
)
def test_smoke_refuses_a_url_it_cannot_use_in_one_line(
    url: str, said: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HARNESS_TOKEN", "a-good-token-123")
    assert main(["smoke", url]) == 2
    err = capsys.readouterr().err
    assert said in err and err.count("\n") == 1 and PASSWORD not in err


@pytest.mark.unit
@pytest.mark.parametrize("token", ["two\nlines", "caf\u00e9-token", "has space"])
def test_smoke_refuses_a_token_it_cannot_send_without_showing_it(
    token: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HARNESS_TOKEN", token)
    assert main(["smoke", "http://127.0.0.1:1"]) == 2
    err = capsys.readouterr().err
    assert "cannot be sent as a bearer token" in err and token not in err


@pytest.mark.integration
def test_smoke_reports_a_url_with_its_password_masked(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HARNESS_TOKEN", "a-good-token-123")
    url = f"http://u:{PASSWORD}@127.0.0.1:1"  # nothing listens on port 1
    assert main(["smoke", url]) == 2
    assert main(["smoke", url, "--json"]) == 2
    out = capsys.readouterr().out
    assert PASSWORD not in out
    assert "http://u:***@127.0.0.1:1: NOT healthy" in out
    assert json.loads(out[out.index("{") :])["url"] == "http://u:***@127.0.0.1:1"


@pytest.mark.unit
@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["--out", "/dev/null", "--force"], "/dev/null is not a regular file"),
        (["--out", "--force"], "'--force' looks like an option, not a file"),
    ],
)
def test_inception_refuses_an_out_it_would_destroy_or_misname(
    extra: list[str],
    said: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["inception", "add a flag", "--planner", "openai:gpt-4.1", *extra]) == 2
    assert said in capsys.readouterr().err
    assert Path("/dev/null").is_char_device()
    assert list(tmp_path.iterdir()) == []  # no session kept, no file named --force


@pytest.mark.unit
def test_inception_refuses_a_paragraph_that_is_not_text_before_keeping_a_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    args = ["inception", "add a \udcff flag", "--planner", "openai:gpt-4.1", "--accept-defaults"]
    assert main(args) == 2
    assert "the paragraph is not UTF-8 text" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.unit
@pytest.mark.parametrize("target", ["/dev/null", "."])
def test_a_database_that_is_no_file_is_refused_and_nothing_is_left_beside_it(
    target: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["work", "--db", target]) == 1
    assert "a SQLite database is a file" in capsys.readouterr().err
    assert not Path("/dev/null-journal").exists() and list(tmp_path.iterdir()) == []


@pytest.mark.unit
def test_inception_refuses_stdin_that_is_not_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"add a \xff flag\n")))
    args = ["inception", "-", "--planner", "openai:gpt-4.1", "--accept-defaults"]
    assert main(args) == 2
    assert "standard input is not UTF-8 text (byte 6)" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.unit
def test_one_repository_spelt_in_two_cases_is_one_queue_not_two(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Two queues for one repository would hand the same item to two workers: two PRs.
    monkeypatch.chdir(tmp_path)
    Path("P.md").write_text("# P\n\n- [ ] T1 do a\n")
    assert main(["work", "enqueue", "P.md", "--project", "me/app:P"]) == 0
    assert main(["work", "enqueue", "P.md", "--project", "ME/App:P"]) == 2
    assert "'ME/App:P' is 'me/app:P' spelt in another case" in capsys.readouterr().err
    for bad in ("me/app:P ", "me/app", " me/app:P"):
        assert main(["work", "enqueue", "P.md", "--project", bad]) == 2
        assert "is not OWNER/REPO:PLANKEY" in capsys.readouterr().err
    assert main(["work", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["project"] == "me/app:P"  # the only queue


@pytest.mark.unit
@pytest.mark.parametrize(
    ("name", "content", "said"),
    [
        ("deep.toml", "a = " + "[" * 50_000 + "]" * 50_000, "not valid TOML (nested too deeply)"),
        ("latin1.toml", b"x = '\xe9'\n", "byte 0xe9 at offset 5 is not UTF-8"),
        ("missing.toml", None, "missing.toml not found"),
        ("folder", "", "folder is a directory; name a TOML file"),
        ("pipe", "", "pipe is not a regular file"),  # reading a FIFO would block for ever
    ],
)  # fmt: skip
def test_a_config_file_that_cannot_be_read_is_one_line(
    name: str,
    content: str | bytes | None,
    said: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    if name == "folder":
        Path(name).mkdir()
    elif name == "pipe":
        os.mkfifo(name)
    elif isinstance(content, bytes):
        Path(name).write_bytes(content)
    elif content is not None:
        Path(name).write_text(content)
    assert main(["config", "--file", name]) == 2
    err = capsys.readouterr().err
    assert said in err and err.count("\n") == 1


@pytest.mark.unit
def test_a_pyproject_nested_too_deeply_stops_work_with_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".git").mkdir()
    Path("pyproject.toml").write_text("[tool.agent-harness]\na = " + "[" * 50_000 + "]" * 50_000)
    assert main(["work"]) == 2
    assert "pyproject.toml: not valid TOML (nested too deeply)" in capsys.readouterr().err


@pytest.mark.unit
@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["forge", "merge", "me/app", str(10**23)], "is not in the range 1<=x<=2147483647"),
        (["forge", "serve", "--port", "99999"], "99999 is not in the range 0<=x<=65535"),
        (["forge", "serve", "--rate-limit", "0"], "0 is not in the range"),
        (["audit", "events", "--after", str(10**23)], "is not in the range"),
        (["audit", "maintain", "--retention-days", "1e308"], "is not in the range 0<=x<=36500"),
        (["audit", "baselines", "--baseline", f"{10**23}:1:q"], "TOTAL at most 1,000,000,000"),
        (["audit", "baselines", "--baseline", "1:1e23:q"], "DAYS at most 36,500"),
        (["audit", "baselines", "--baseline", "1:nan:q"], "DAYS >= 0.01"),
        (["audit", "baselines", "--baseline", "1:1:a\x1b[31mred"], "label 'a\\x1b[31mred'"),
        (["audit", "baselines", "--baseline", "1:1:two\nlines"], "label 'two\\nlines': 1 to 100"),
        (["audit", "baselines", "--baseline", "1:1:a\udcffb"], "label 'a\\udcffb': 1 to 100"),
        (["audit", "baselines", "--baseline", "1:1:" + "y" * 101], "1 to 100 of letters"),
    ],
    ids=lambda a: " ".join(a[:3])[:40] if isinstance(a, list) else None,
)
def test_a_value_too_big_or_too_odd_to_keep_is_a_usage_error_not_a_crash(
    args: list[str],
    said: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # A baseline is immutable and shown in every report: what it cannot hold is refused
    # before anything is written.
    monkeypatch.chdir(tmp_path)
    assert main(args) == 2
    assert said in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []  # no database made to hold what was refused


@pytest.mark.unit
@pytest.mark.parametrize(
    ("token", "host", "said"),
    [
        ("Q7z", "127.0.0.1", "HARNESS_TOKEN must be at least 16 printable ASCII characters"),
        ("0123456789abcdef\n", "127.0.0.1", "without spaces; make one with: openssl rand"),
        ("0123456789abcdef", "", "is empty; give 127.0.0.1, or 0.0.0.0 for every interface"),
    ],
)
def test_serve_refuses_a_guessable_token_or_an_empty_host_before_starting(
    token: str,
    host: str,
    said: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("HARNESS_TOKEN", token)
    assert main(["serve", "--host", host, "--port", "1"]) == 2
    err = capsys.readouterr().err
    assert said in err and token.strip() not in err


@pytest.mark.integration
def test_serve_refuses_a_host_that_is_no_address_before_starting(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HARNESS_TOKEN", "0123456789abcdef")
    assert main(["serve", "--host", "not a host", "--port", "1"]) == 2
    assert "'not a host' is no address here" in capsys.readouterr().err


@pytest.mark.unit
@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["plan", ""], "Invalid value for 'PLAN': is empty: name a plan file"),
        (["work", "enqueue", "", "--project", "me/app:P"], "is empty: name a plan file"),
        (["work", "--db", "--json"], "'--json' is no database but an option's name"),
        (["audit", "events", "--audit-db", "--json"], "'--json' is no database but an option"),
        (
            ["work", "enqueue", EXAMPLE, "--project", "me/app:P", "--db", "-x"],
            "'-x' is no database",
        ),
    ],
)
def test_an_empty_plan_name_or_an_option_taken_as_a_database_is_said_as_such(
    args: list[str],
    said: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(args) == 2
    assert said in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []  # no database file named after an option


@pytest.mark.unit
@pytest.mark.parametrize(
    ("args", "env", "said"),
    [
        (
            ["config"],
            {"AGENT_HARNESS_BUDGETS__MAX_ATTEMPTS": str(10**23)},
            "less than or equal to 100",
        ),
        (["config"], {"AGENT_HARNESS_RECONCILE__REVERT_WINDOW_DAYS": "1000000000"}, "3650"),
        (["config"], {"AGENT_HARNESS_BUDGETS__MAX_REPLANS": "1000"}, "less than or equal to 100"),
        (["audit", "maintain", "--retention-days", "nan"], {}, "'nan' is not a finite number"),
        (["ingest", "--watch", "nan"], {}, "'nan' is not a finite number"),
        (["ingest", "--watch", "inf"], {}, "is not in the range 0.1<=x<=86400.0"),
    ],
    ids=lambda a: " ".join(a)[:40] if isinstance(a, list) else None,
)
def test_a_setting_past_what_can_be_stored_or_slept_is_refused_where_it_is_set(
    args: list[str],
    env: dict[str, str],
    said: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Taken before, each ended a later command with an internal error (an integer the
    # database cannot hold, a date past the calendar, a sleep of NaN seconds).
    monkeypatch.chdir(tmp_path)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert main(args) == 2
    assert said in capsys.readouterr().err


@pytest.mark.integration
@pytest.mark.parametrize(
    ("roles", "said"),
    [
        (["--agent", "nosuchagent"], "unknown agent 'nosuchagent'"),
        (["--agent", "claude", "--implementer", "openai:gpt-4.1"], "give exactly one of --agent"),
        (["--agent", "x {nope}"], "must say where the prompt goes"),
        (["--implementer", "nonsense"], "model route 'nonsense' should look like vendor:model"),
    ],
)
def test_a_run_refused_for_its_roles_leaves_no_database_or_forge_behind(
    roles: list[str],
    said: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from agent_harness.git.runner import run_git

    monkeypatch.chdir(tmp_path)
    run_git(tmp_path, "init", "-q")
    who = ("-c", "user.name=t", "-c", "user.email=t@localhost")
    run_git(tmp_path, *who, "commit", "-q", "--allow-empty", "-m", "init")
    run_git(tmp_path, "remote", "add", "origin", f"file://{tmp_path}/x.git")
    Path("PLAN.md").write_text("### T1: Add\n")
    args = ["run", "--repo", "me/app", "--forge", "local", "--plan", "PLAN.md", "--work", "."]
    assert main([*args, "--reviewer", "codex", *roles]) == 2
    assert said in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == [".git", "PLAN.md"]


@pytest.mark.unit
def test_a_right_to_left_override_in_a_plan_is_spelt_out_in_what_plan_shows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Shown raw, it makes the line read backwards on the reader's terminal (Trojan Source).
    plan = tmp_path / "P.md"
    plan.write_text("### T1: a \u202eb\n### \u202eT4: x\n")
    assert main(["plan", str(plan)]) == 0
    out = capsys.readouterr().out
    assert "\u202e" not in out and "\\u202eT4: x" in out and "a \\u202eb" in out


@pytest.mark.unit
def test_an_old_baseline_of_a_tiny_period_is_shown_as_a_finite_rate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from agent_harness.audit.database import open_audit

    monkeypatch.chdir(tmp_path)
    assert main(["audit", "baselines", "--baseline", "1:1e-300:q"]) == 2
    assert "DAYS >= 0.01" in capsys.readouterr().err
    audit = open_audit(str(tmp_path / "audit.sqlite"))
    with audit.transaction() as tx:  # as a release without the floor recorded it
        tx.execute("INSERT INTO baselines (label, delivered, days, recorded_at) "
                   "VALUES ('old', 35264580, 5e-324, 0)")  # fmt: skip
    audit.close()
    assert main(["audit", "baselines", "--audit-db", str(tmp_path / "audit.sqlite"), "--json"]) == 0
    [row] = json.loads(capsys.readouterr().out)
    assert row["baseline_per_day"] > 1e300 and row["baseline_per_day"] != float("inf")


@pytest.mark.unit
def test_json_output_holding_a_name_that_is_not_utf8_is_still_json(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from agent_harness.cli.output import print_json

    sink = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    monkeypatch.setattr("sys.stdout", sink)
    print_json({"path": "caf\udce9.md", "title": "é"})
    sink.flush()
    # Before: UnicodeEncodeError (exit 70) on a strict stream, raw bytes on a lenient one.
    assert json.loads(sink.buffer.getvalue()) == {"path": "caf\udce9.md", "title": "é"}  # type: ignore[attr-defined]


@pytest.mark.unit
@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("x\x1by", "x\\x1by"),
        ("caf\udce9", "caf\\xe9"),
        ("a\ud800b", "a\\ud800b"),
        ("é\u202e", "é\\u202e"),
    ],
)
def test_visible_spells_out_whatever_it_is_given(text: str, shown: str) -> None:
    from agent_harness.cli.output import visible

    assert visible(text) == shown
