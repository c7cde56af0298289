"""`agent-harness run` refuses, in one line and before any work, what would fail every item."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent_harness.cli import main
from agent_harness.testing.forge import TOKEN

from .conftest import REPO, Harness

pytestmark = pytest.mark.integration

PLAN = "### T1: Count words\n\ncheck: `python -m unittest`\n"


@pytest.fixture
def cli(harness: Harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Harness:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GH_TOKEN", TOKEN)
    monkeypatch.setenv("GITHUB_API_URL", harness.forge.server.api_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", f"{harness.model.url}/v1")
    (tmp_path / "PLAN.md").write_text(PLAN)
    return harness


def run(*args: str) -> list[str]:
    return ["run", "--repo", REPO, "--plan", "PLAN.md", *args]


def error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    return err[0]


AGENT = f"{sys.executable} -c pass {{prompt_file}}"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--agent", "claude-nope"], "unknown agent 'claude-nope'"),
        (["--agent", "no-such-agent-binary {prompt_file}"], "not found on PATH"),
        # A path is looked for where it says, not on PATH: said so.
        (
            ["--agent", "/nowhere/agent.sh {prompt_file}"],
            "agent 'custom': /nowhere/agent.sh does not exist",
        ),
        (["--agent", AGENT, "--implementer", "openai:x"], "exactly one of --agent"),
        (["--agent", AGENT, "--only", "T9"], "--only names items not in the plan: T9"),
        (
            ["--agent", AGENT, "--check", "no-such-tool -q"],
            "check `no-such-tool -q`: no-such-tool is not found on the checks' PATH",
        ),
    ],
)
def test_bad_agent_options_are_one_line_errors(
    cli: Harness, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    code = main(run("--work", str(cli.work), "--reviewer", "openai:gpt-x", *extra))
    assert code == 2
    assert message in error_line(capsys)


def test_an_agent_script_that_may_not_be_run_says_how_to_run_it(
    cli: Harness, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "agent.sh"
    script.write_text("echo working\n")
    script.chmod(0o644)
    code = main(run("--work", str(cli.work), "--reviewer", "openai:gpt-x", "--agent",
                    f"{script} {{prompt_file}}"))  # fmt: skip
    assert code == 2
    assert f"{script} is not executable (chmod +x {script}, or name its interpreter first)" in (
        error_line(capsys)
    )


def test_a_work_dir_that_is_not_a_git_repository(
    cli: Harness, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    assert main(run("--work", str(plain), "--agent", AGENT, "--reviewer", "openai:x")) != 0
    assert "is not a git repository" in error_line(capsys)


def test_a_repository_with_no_commits(
    cli: Harness, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty"
    subprocess.run(["git", "init", "-q", str(empty)], check=True)
    assert main(run("--work", str(empty), "--agent", AGENT, "--reviewer", "openai:x")) != 0
    assert "has no commits yet" in error_line(capsys)


def test_a_reviewer_of_the_implementers_vendor_is_refused(
    cli: Harness, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        run("--work", str(cli.work), "--implementer", "openai:gpt-a", "--reviewer", "openai:gpt-b")
    )
    assert code == 2
    assert "are both openai models" in error_line(capsys)
    assert cli.pulls() == []


def test_a_dirty_default_branch_is_refused(
    cli: Harness, capsys: pytest.CaptureFixture[str]
) -> None:
    (cli.work / "README.md").write_text("work in progress\n")
    code = main(run("--work", str(cli.work), "--agent", AGENT, "--reviewer", "openai:x"))
    assert code != 0
    assert "uncommitted changes on main" in error_line(capsys)


def test_unknown_vendor_in_a_route(cli: Harness, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(run("--work", str(cli.work), "--agent", AGENT, "--reviewer", "acme:model"))
    assert code == 2
    assert "unknown vendor 'acme'" in error_line(capsys)


@pytest.mark.parametrize("stdin", ["piped", "/dev/null"])
def test_approve_refuses_input_that_is_not_a_terminal_and_names_yes(
    cli: Harness,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    stdin: str,
) -> None:
    import io

    given = io.StringIO("y\n") if stdin == "piped" else open(os.devnull)  # noqa: SIM115
    monkeypatch.setattr("sys.stdin", given)
    try:
        code = main(
            run("--work", str(cli.work), "--agent", AGENT, "--reviewer", "openai:x", "--approve")
        )
    finally:
        given.close()
    assert code == 2
    line = error_line(capsys)
    assert "--approve asks at a terminal" in line and "pass --yes" in line
    assert not (tmp_path / ".agent-harness" / "harness.sqlite").exists()  # nothing started
    assert cli.pulls() == []


def test_host_id_names_this_hosts_workers(cli: Harness, tmp_path: Path) -> None:
    from agent_harness.store.database import open_store

    args = ["--work", str(cli.work), "--agent", AGENT, "--reviewer", "openai:x"]
    code = main(run(*args, "--max-attempts", "1", "--host-id", "build-2", "--json"))
    assert code == 4  # the agent changed nothing: T1 failed, as it should
    store = open_store(str(tmp_path / ".agent-harness" / "harness.sqlite"))
    try:
        claims = [e for e in store.all_events() if e.kind == "claimed"]
    finally:
        store.close()
    assert claims and all(str(e.payload.worker).startswith("build-2/") for e in claims)


def test_a_host_id_that_cannot_name_a_worker_is_refused(
    cli: Harness, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["--work", str(cli.work), "--agent", AGENT, "--reviewer", "openai:x"]
    assert main(run(*args, "--host-id", "a/b")) == 2
    assert "--host-id" in capsys.readouterr().err
    assert cli.pulls() == []
