"""The errors a new user meets first: usage checked before anything is spent, an unreachable
tracker said at once in one line, and JSON errors for scripts."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from agent_harness.cli import main
from tests.shared.git import git

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = str(ROOT / "examples" / "PLAN.md")

BAD_USAGE = [
    (["plan", EXAMPLE, "--repo", "a/b/c"], "'a/b/c' must be OWNER/NAME"),
    (["plan", EXAMPLE, "--repo", "own er/na me"], "owner 'own er'"),
    (["plan", EXAMPLE, "--repo", "own/na me"], "name 'na me'"),
    (["plan", EXAMPLE, "--repo", "own/.."], "name '..', which names no repository"),
    (["plan", EXAMPLE, "--repo", "me/app", "--github-url", "api.github.com"], "not an http(s)"),
    (["reconcile", "--repo", "a/b/c"], "exactly one '/'"),
    (["reconcile", "--repo", "me/app", "--github-url", "ftp://x"], "not an http(s)"),
    (["run", "--repo", "-me/app", "--work", ".", "--plan", EXAMPLE], "owner '-me'"),
    # A key no issue marker can hold back would find none of its issues: every sync would
    # make the plan's issues again. An empty one must not fall back to the default unsaid.
    (["plan", EXAMPLE, "--repo", "me/app", "--plan-key", "caf\udce9"], "plan key 'caf\\udce9'"),
    (["plan", EXAMPLE, "--repo", "me/app", "--plan-key", ""], "plan key '' may hold only"),
    (["run", "--repo", "me/app", "--plan", EXAMPLE, "--plan-key", "a b"], "plan key 'a b'"),
    (["reconcile", "--repo", "me/app", "--plan-key", "x\ny"], "plan key 'x\\ny'"),
    # The local forge was used, and the URL given for the tracker silently not.
    (
        ["plan", EXAMPLE, "--repo", "me/app", "--forge", "local", "--github-url", "http://h:1"],
        "--github-url and --forge local name two trackers",
    ),
]


@pytest.mark.unit
@pytest.mark.parametrize(("args", "said"), BAD_USAGE)
def test_usage_errors_exit_2_before_any_token_lookup(
    args: list[str],
    said: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # No token anywhere (and no `gh` on PATH): a command that looked for one first would
    # answer "no GitHub token" instead of naming the mistake in the command line.
    for name in ("GH_TOKEN", "GITHUB_TOKEN", "GITHUB_API_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert main(args) == 2
    err = capsys.readouterr().err
    assert said in err and "token" not in err


@pytest.mark.unit
def test_with_json_an_error_is_one_json_object_on_stderr(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["plan", "no-such-plan.md", "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert json.loads(captured.err) == {"error": "plan file not found: no-such-plan.md", "exit": 2}
    assert main(["plan", EXAMPLE, "--repo", "a/b/c", "--json"]) == 2
    said = json.loads(capsys.readouterr().err)
    assert said["exit"] == 2 and "'a/b/c' must be OWNER/NAME" in said["error"]


@pytest.mark.unit
def test_without_json_the_same_error_is_one_plain_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "no-such-plan.md"]) == 2
    assert capsys.readouterr().err == "error: plan file not found: no-such-plan.md\n"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.integration
def test_an_unreachable_tracker_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "not-a-real-token")
    monkeypatch.chdir(tmp_path)
    url = f"http://127.0.0.1:{_closed_port()}"
    assert main(["plan", EXAMPLE, "--repo", "me/app", "--github-url", url]) == 4
    assert capsys.readouterr().err == f"error: cannot reach {url}: connection refused\n"


@pytest.mark.integration
def test_a_tracker_that_never_answered_is_not_retried() -> None:
    from agent_harness.tracker.github import GitHubTracker
    from agent_harness.tracker.protocol import Unreachable

    slept: list[float] = []
    url = f"http://127.0.0.1:{_closed_port()}"
    tracker = GitHubTracker("me/app", "not-a-real-token", url, sleep=slept.append)
    with pytest.raises(Unreachable) as caught:
        tracker.repo_info()
    assert caught.value.message == f"cannot reach {url}: connection refused"
    assert slept == [] and tracker.tally.requests == 1  # one request, no waiting to try again


@pytest.mark.integration
def test_a_tracker_that_answered_once_is_retried_when_it_drops(tmp_path: Path) -> None:
    """A blip mid-run is not a wrong URL: once the server has answered, refusals are retried."""
    from agent_harness.testing.forge import TOKEN, running_forge
    from agent_harness.tracker.github import GitHubTracker
    from agent_harness.tracker.protocol import TrackerError

    slept: list[float] = []
    with running_forge(tmp_path / "forge") as forge:
        forge.forge.create_repo("octo", "app")
        tracker = GitHubTracker("octo/app", TOKEN, forge.server.api_url, sleep=slept.append)
        assert tracker.repo_info().full_name == "octo/app"
    # The forge is gone now: the same client retries, then names what it saw.
    with pytest.raises(TrackerError) as caught:
        tracker.repo_info()
    assert "failed 5 times; last: connection refused" in caught.value.message
    assert len(slept) == 4


@pytest.mark.unit
@pytest.mark.parametrize("debug", [None, "0", "false"])
def test_a_file_the_machine_refuses_is_named_in_one_line_not_called_a_bug(
    debug: str | None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # "0" and "false" say debugging is off: they must not turn one line into a traceback.
    if debug is None:
        monkeypatch.delenv("AGENT_HARNESS_DEBUG", raising=False)
    else:
        monkeypatch.setenv("AGENT_HARNESS_DEBUG", debug)
    long_name = "x" * 300
    assert main(["plan", EXAMPLE, "--backlog", long_name]) == 1
    err = capsys.readouterr().err
    assert err == f"error: {long_name[:200]}: File name too long\n"
    assert main(["plan", EXAMPLE, "--backlog", long_name, "--json"]) == 1
    said = json.loads(capsys.readouterr().err)
    assert said == {"error": f"{long_name[:200]}: File name too long", "exit": 1}


@pytest.mark.unit
def test_with_debugging_on_the_same_error_keeps_its_traceback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AGENT_HARNESS_DEBUG", "1")
    with pytest.raises(OSError, match="File name too long"):
        main(["plan", EXAMPLE, "--backlog", "x" * 300])


ODD = "T\udce9"  # a byte that is not UTF-8, as Python hands it over from the command line

NAMES_OF_STORED_THINGS = [
    ["work", "--project", ODD],
    ["work", "show", ODD],
    ["work", "retry", ODD, "--project", "me/app:PLAN"],
    ["work", "enqueue", EXAMPLE, "--project", ODD],
    ["audit", "events", "--item", ODD],
    ["audit", "events", "--kind", ODD],
    ["audit", "cost", "--project", ODD],
    ["audit", "baselines", "--project", ODD],
    ["attach", ODD],
    ["control", "pause", "--project", ODD],
    ["ingest", "--project", ODD],
    ["worktrees", "--project", ODD],
]


@pytest.mark.unit
@pytest.mark.parametrize("args", NAMES_OF_STORED_THINGS, ids=lambda a: " ".join(a[:3]))
def test_a_name_that_is_not_utf8_is_a_usage_error_not_a_crash(
    args: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # No such name can be stored, so none can be found: said at once, and nothing is made.
    monkeypatch.chdir(tmp_path)
    assert main(args) == 2
    assert "'T\\udce9' is not UTF-8 text" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.unit
def test_a_name_with_a_control_character_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["audit", "events", "--item", "T1\n--json"]) == 2
    assert "'T1\\n--json' holds a control character" in capsys.readouterr().err


@pytest.mark.unit
@pytest.mark.parametrize("args", [["work"], ["work", "show", "T1"], ["ingest"]], ids=" ".join)
def test_a_keyword_form_connection_string_is_refused_masked_and_makes_no_file(
    args: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    dsn = "host=127.0.0.1 user=harness password=DbPw-s3cret-XYZ dbname=x"
    assert main([*args, "--db", dsn]) == 2
    said = capsys.readouterr().err
    assert "is libpq's keyword form" in said and "postgresql://USER@HOST:PORT/DBNAME" in said
    assert "DbPw-s3cret-XYZ" not in said and "password=***" in said
    assert list(tmp_path.iterdir()) == []  # no SQLite file named after it


@pytest.mark.unit
def test_a_bug_says_how_to_see_its_traceback_in_words_that_work(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The hint went through the mask for credentials and read "AGENT_HARNESS_DEBUG=***".
    def broken(*_args: object, **_kwargs: object) -> object:
        raise RuntimeError("boom")

    monkeypatch.setattr("agent_harness.config.load_settings", broken)
    monkeypatch.delenv("AGENT_HARNESS_DEBUG", raising=False)
    assert main(["config"]) == 70
    assert capsys.readouterr().err.strip() == (
        "internal error: RuntimeError: boom "
        "(this is a bug; rerun with AGENT_HARNESS_DEBUG=1 for the traceback)"
    )


@pytest.mark.integration
@pytest.mark.parametrize(
    ("extra", "origin"),
    [
        ([], "https://github.com/me/app.git"),
        (["--github-url", "https://ghe.example/api/v3"], "https://ghe.example/me/app.git"),
        (["--forge", "local"], "file://"),
    ],
)
def test_a_clone_without_an_origin_is_told_the_command_that_adds_it(
    extra: list[str],
    origin: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    work = tmp_path / "app"
    work.mkdir()
    for step in (["init", "-q"], ["commit", "-q", "--allow-empty", "-m", "start"]):
        git(work, *step)
    monkeypatch.chdir(tmp_path)
    argv = ["run", "--repo", "me/app", "--work", str(work), "--plan", EXAMPLE]
    assert main([*argv, "--agent", "claude", "--reviewer", "openai:gpt-4.1", *extra]) == 2
    err = capsys.readouterr().err
    command = err[err.index("git -C") :].strip()
    said = command.split()
    assert said[:5] == ["git", "-C", str(work), "remote", "add"] and said[5] == "origin"
    assert said[6].startswith(origin) and "URL" not in said
    if origin == "file://":
        assert said[6].endswith("/me/app.git")


@pytest.mark.integration
def test_an_agent_script_that_is_nowhere_is_refused_before_any_attempt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    work = tmp_path / "app"
    (work / "tools").mkdir(parents=True)
    (work / "tools" / "agent.py").write_text("print('the clone's own agent')\n")
    for step in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "start"],
                 ["remote", "add", "origin", "https://github.com/me/app.git"]):  # fmt: skip
        git(work, *step)
    monkeypatch.chdir(tmp_path)  # the person runs from beside the clone
    monkeypatch.delenv("GH_TOKEN", raising=False)
    argv = ["run", "--repo", "me/app", "--work", str(work), "--plan", EXAMPLE]
    typo = "python agent/nope.py --prompt-file {prompt_file}"
    assert main([*argv, "--agent", typo, "--reviewer", "openai:gpt-4.1"]) == 2
    err = capsys.readouterr().err
    assert "runs agent/nope.py, which is not in" in err and "nor in the clone" in err
    # A bare name is a typo as well (it spent every attempt), options before it or not; for a
    # shell, which looks such a name up on PATH, only when PATH has none.
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "on_path.sh").write_text("echo hi\n")
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    for typo in ("python nope.py {prompt_file}", "python3 -u nope.py {prompt_file}",
                 "bash nope.sh {prompt_file}"):  # fmt: skip
        assert main([*argv, "--agent", typo, "--reviewer", "openai:gpt-4.1"]) == 2
        assert "runs nope." in capsys.readouterr().err
    main([*argv, "--agent", "sh on_path.sh {prompt_file}", "--reviewer", "openai:gpt-4.1"])
    assert "which is not in" not in capsys.readouterr().err
    # A script the clone holds is its worktrees' too: not refused for that.
    ok = "python tools/agent.py --prompt-file {prompt_file}"
    main([*argv, "--agent", ok, "--reviewer", "openai:gpt-4.1"])
    assert "runs tools/agent.py" not in capsys.readouterr().err
    # A file the agent is to make, or a script at an address, is no script to look for.
    for fine in ("aider --message-file {prompt_file} src/new_module.py",
                 "deno run https://deno.land/x/agent/main.ts {prompt_file}"):  # fmt: skip
        main([*argv, "--agent", fine, "--reviewer", "openai:gpt-4.1"])
        assert "which is not in" not in capsys.readouterr().err


@pytest.mark.integration
def test_a_kill_while_a_run_is_still_setting_up_is_said_as_an_interrupt(tmp_path: Path) -> None:
    # Before the workers started, a plain `kill` ended the run on the spot: 143, nothing said.
    import signal
    import subprocess
    import sys
    import time

    bin_dir, mark = tmp_path / "bin", tmp_path / "asked-for-a-token"
    bin_dir.mkdir()
    gh = bin_dir / "gh"  # the token lookup: it holds the run in its setup until killed
    gh.write_text(f"#!/bin/sh\necho > '{mark}'\nexec sleep 30\n")
    gh.chmod(0o755)
    app = tmp_path / "app"
    git(tmp_path, "init", "-q", "-b", "main", str(app))
    git(app, "commit", "-q", "--allow-empty", "-m", "init")
    git(app, "remote", "add", "origin", "http://127.0.0.1:9/me/app.git")
    (app / "PLAN.md").write_text("### T1: Count words\n")
    env = {k: v for k, v in os.environ.items() if k not in ("GH_TOKEN", "GITHUB_TOKEN")}
    env.update(PATH=f"{bin_dir}:{env['PATH']}", HOME=str(tmp_path), OPENAI_API_KEY="sk-test")
    run = subprocess.Popen(
        [sys.executable, "-m", "agent_harness", "run", "--repo", "me/app", "--work", str(app),
         "--plan", str(app / "PLAN.md"), "--agent", "true {prompt_file}",
         "--reviewer", "openai:gpt-4.1", "--github-url", "http://127.0.0.1:9"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        while not mark.exists():
            assert run.poll() is None, run.communicate()
            time.sleep(0.02)
        run.send_signal(signal.SIGTERM)
        _, err = run.communicate(timeout=30)
    finally:
        run.kill()
    assert (run.returncode, err.strip()) == (130, "interrupted")


@pytest.mark.integration  # the clone is looked at first
def test_an_empty_agent_is_said_to_be_empty(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # `--agent "$UNSET"` was told to give exactly one of --agent or --implementer.
    monkeypatch.setenv("PATH", str(tmp_path) + os.pathsep + os.environ["PATH"])
    app = tmp_path / "app"
    git(tmp_path, "init", "-q", str(app))
    git(app, "commit", "-q", "--allow-empty", "-m", "init")
    git(app, "remote", "add", "origin", "http://127.0.0.1:9/me/app.git")
    args = ["run", "--repo", "me/app", "--work", str(app), "--plan", EXAMPLE, "--agent", "",
            "--reviewer", "openai:x"]  # fmt: skip
    assert main(args) == 2
    assert "--agent is empty: name a preset" in capsys.readouterr().err
