"""`agent-harness run --plan A.md --plan B.md`: one fleet, a pool per plan, and a global worker
limit that holds over both."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from agent_harness.cli import main
from agent_harness.demo.run import seed_repository

from .conftest import EXAMPLES, REPO, Harness, use_the_cli

pytestmark = pytest.mark.integration

# Says it is running, and stays until it sees a third agent running beside it or half a second
# has passed: with a limit of 2 it never sees three; without one it would.
AGENT = """\
import os, pathlib, re, sys, time
log = pathlib.Path(sys.argv[1])
prompt = pathlib.Path(sys.argv[sys.argv.index("--prompt-file") + 1]).read_text()
item = re.search(r"# Work item (\\S+):", prompt).group(1)
mine = log / f"{item}.running"
mine.write_text("")
seen, end = 0, time.monotonic() + 0.5
while time.monotonic() < end and seen < 3:
    seen = max(seen, len(list(log.glob("*.running"))))
    time.sleep(0.02)
(log / f"{item}.seen").write_text(str(seen))
mine.unlink()
pathlib.Path(f"notes/{item.lower()}.txt").parent.mkdir(exist_ok=True)
pathlib.Path(f"notes/{item.lower()}.txt").write_text(item + "\\n")
"""


@pytest.fixture
def cli(harness: Harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Harness:
    use_the_cli(harness, tmp_path, monkeypatch)
    monkeypatch.setenv("AGENT_HARNESS_TRACKER__WRITE_SPACING_S", "0")
    return harness


def test_two_plans_both_progress_under_one_global_limit(
    cli: Harness, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "A.md").write_text("".join(f"### A{n}: Note A{n}\n\n" for n in (1, 2, 3)))
    (tmp_path / "B.md").write_text("".join(f"### B{n}: Note B{n}\n\n" for n in (1, 2, 3)))
    (tmp_path / "agent.py").write_text(AGENT)
    log = tmp_path / "log"
    log.mkdir()
    agent = shlex.join([sys.executable, str(tmp_path / "agent.py"), str(log)])
    code = main(
        ["run", "--repo", REPO, "--work", str(cli.work), "--plan", "A.md", "--plan", "B.md",
         "--agent", agent + " --prompt-file {prompt_file}", "--reviewer", "openai:gpt-test",
         "--workers", "2", "--max-workers", "2", "--json"]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0, out
    finished = json.loads(out.strip().splitlines()[-1])
    states = {
        (report["project"], item["id"]): item["state"]
        for report in finished["projects"]
        for item in report["items"]
    }
    assert states == {
        **{(f"{REPO}:A", f"A{n}"): "pr_open" for n in (1, 2, 3)},
        **{(f"{REPO}:B", f"B{n}"): "pr_open" for n in (1, 2, 3)},
    }
    seen = {path.stem: int(path.read_text()) for path in log.glob("*.seen")}
    assert len(seen) == 6
    assert max(seen.values()) == 2, seen  # two at once, never three
    assert len(cli.pulls()) == 6


def test_two_plans_with_one_key_are_refused(
    cli: Harness, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for folder in ("one", "two"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "PLAN.md").write_text("### T1: Note\n")
    code = main(
        ["run", "--repo", REPO, "--work", str(cli.work), "--plan", "one/PLAN.md",
         "--plan", "two/PLAN.md", "--agent", f"{sys.executable} -c pass {{prompt_file}}",
         "--reviewer", "openai:gpt-test"]
    )  # fmt: skip
    assert code == 2
    assert "two plans are the project octo/tally:PLAN" in capsys.readouterr().err
    assert cli.pulls() == []


def test_a_plan_whose_key_another_plan_holds_refuses_the_run_before_any_plan_is_begun(
    cli: Harness, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Two spec-kit features under the default key `tasks`: the run of A.md and the second
    # feature is refused before A's issues are opened or anything is queued.
    (tmp_path / ".git").mkdir()  # the plans' work tree, as `plan_in_repo` finds one
    (tmp_path / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    for feature in ("one", "two"):
        (tmp_path / "specs" / feature).mkdir(parents=True)
        (tmp_path / "specs" / feature / "tasks.md").write_text(f"### T1: Note {feature}\n")
    assert main(["plan", "specs/one/tasks.md", "--repo", REPO]) == 0
    (tmp_path / "A.md").write_text("### A1: Note A1\n")
    capsys.readouterr()
    code = main(
        ["run", "--repo", REPO, "--work", str(cli.work), "--plan", "A.md",
         "--plan", "specs/two/tasks.md", "--agent", f"{sys.executable} -c pass {{prompt_file}}",
         "--reviewer", "openai:gpt-test"]
    )  # fmt: skip
    assert code == 3
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: plan key 'tasks' on octo/tally is specs/one/tasks.md's")
    repo = cli.forge.github.get_repo(REPO)
    assert sorted(issue.title for issue in repo.get_issues(state="all")) == ["T1: Note one"]


def test_projects_of_the_config_file_on_two_repositories(
    cli: Harness, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With no --plan, `run` works the config file's [[projects]], each on its own repository
    and clone, in one fleet."""
    cli.forge.forge.create_repo("octo", "other", auto_init=False)
    other = tmp_path / "clones" / "other"
    seed_repository(EXAMPLES / "project", cli.forge.forge.clone_url("octo", "other"), other)
    (tmp_path / "A.md").write_text("### A1: Note A1\n\n")
    (tmp_path / "B.md").write_text("### B1: Note B1\n\n")
    (tmp_path / "agent-harness.toml").write_text(
        f'[[projects]]\nplan = "A.md"\nrepo = "{REPO}"\nwork = "{cli.work}"\n\n'
        f'[[projects]]\nplan = "B.md"\nrepo = "octo/other"\nwork = "{other}"\n'
    )
    agent = f"{sys.executable} -c \"open('note.txt', 'w').write('n')\" {{prompt_file}}"
    code = main(["run", "--agent", agent, "--reviewer", "openai:gpt-test", "--json"])
    out = capsys.readouterr().out
    assert code == 0, out
    finished = json.loads(out.strip().splitlines()[-1])
    assert [
        (report["project"], [(i["id"], i["state"]) for i in report["items"]])
        for report in finished["projects"]
    ] == [(f"{REPO}:A", [("A1", "pr_open")]), ("octo/other:B", [("B1", "pr_open")])]
    github = cli.forge.github
    assert [p.title for p in github.get_repo(REPO).get_pulls(state="all")] == ["A1: Note A1"]
    assert [p.title for p in github.get_repo("octo/other").get_pulls(state="all")] == [
        "B1: Note B1"
    ]


def test_no_plan_and_no_projects_is_one_line(
    cli: Harness, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["run", "--agent", "claude", "--reviewer", "openai:gpt-test"])
    assert code == 2
    assert capsys.readouterr().err.strip() == (
        "error: give --plan PLAN.md, or [[projects]] with plan = ... in agent-harness.toml"
    )


def test_a_plan_whose_file_name_is_not_utf8_runs_and_says_so_readably(
    cli: Harness, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A plan file named in Latin-1 (b"caf\\xe9.md"): its key, its issues and the run's report
    all work, and a second run finds the same issues instead of refusing or making more."""
    name = "caf\udce9.md"  # how Python holds the byte 0xE9 of the name
    (tmp_path / name).write_text("### C1: Note C1\n\n")
    (tmp_path / "agent.py").write_text(AGENT)
    (tmp_path / "log").mkdir()
    agent = shlex.join([sys.executable, str(tmp_path / "agent.py"), str(tmp_path / "log")])
    args = ["run", "--repo", REPO, "--work", str(cli.work), "--plan", name,
            "--agent", agent + " --prompt-file {prompt_file}", "--reviewer", "openai:gpt-test",
            "--json"]  # fmt: skip
    for _ in range(2):
        code = main(args)
        out, err = capsys.readouterr()
        assert code == 0, err
        finished = json.loads(out.strip().splitlines()[-1])
        assert [item["state"] for item in finished["items"]] == ["pr_open"]
        assert finished["project"].startswith(f"{REPO}:caf-")  # a key spelled as keys may be
    assert len(cli.pulls()) == 1
    [issue] = cli.tracker().list_issues()
    assert "Mirrored from `caf\\xe9.md`" in issue.body


# Writes its plan's note after a pause long enough that the other plan's T1 runs beside it.
SAME_IDS_AGENT = """\
import pathlib, re, sys, time
prompt = pathlib.Path(sys.argv[sys.argv.index("--prompt-file") + 1]).read_text()
title = re.search(r"# Work item T1: (.+)", prompt).group(1).strip()
time.sleep(0.4)
pathlib.Path("note.txt").write_text(title + "\\n")
print("worked on", title)
"""


def test_two_plans_whose_keys_share_a_long_start_keep_their_t1s_apart(
    cli: Harness, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Kiro-like feature names, the same for their first 20 characters: each plan's T1 has an
    # agent session and a log of its own, and each pull request holds its own plan's note.
    plans = ["user-authentication-flow", "user-authentication-admin"]
    for key in plans:
        (tmp_path / f"{key}.md").write_text(f"### T1: Note of {key}\n")
    (tmp_path / "agent.py").write_text(SAME_IDS_AGENT)
    agent = shlex.join([sys.executable, str(tmp_path / "agent.py")])
    code = main(
        ["run", "--repo", REPO, "--work", str(cli.work), "--plan", f"{plans[0]}.md",
         "--plan", f"{plans[1]}.md", "--agent", agent + " --prompt-file {prompt_file}",
         "--reviewer", "openai:gpt-test", "--workers", "2", "--json"]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0, out
    pulls = cli.pulls()
    assert len(pulls) == 2
    repo = cli.forge.github.get_repo(REPO)
    notes = {
        repo.get_contents("note.txt", ref=pull.head.ref).decoded_content.decode().strip()
        for pull in pulls
    }
    assert notes == {f"Note of {key}" for key in plans}
    # One folder per plan's T1, each holding its own agent's one log (before, both shared
    # `items/T1` and one session name, and one plan's agent could be started a second time).
    folders = sorted(Path(".agent-harness/items").iterdir())
    said = {
        folder.name: [log.read_text().strip() for log in (folder / "logs").glob("*.log")]
        for folder in folders
    }
    assert said == {f"{key}--T1": [f"worked on Note of {key}"] for key in plans}
