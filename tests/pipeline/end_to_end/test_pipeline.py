"""The run pipeline end to end: real forge over HTTP, real git, real sessions, scripted models."""

from __future__ import annotations

import json
import runpy
import shlex
import subprocess
import sys
from typing import Any

import pytest

from agent_harness.forge import FaultKind
from agent_harness.git.errors import DefaultBranchGuard
from agent_harness.git.worktrees import guard_refspec
from agent_harness.pipeline.run import Pipeline
from agent_harness.pipeline.settings import RunSettings
from agent_harness.queue.items import ItemState, get_item, record_outcome
from agent_harness.queue.retries import retry as retry_item
from agent_harness.testing.agents import write_scripted_agent
from agent_harness.tracker.markers import read_pull_marker
from tests.shared.git import noted_git
from tests.shared.local_project import git as git_in

from .conftest import EXAMPLES, KEY_ENV, REPO, Harness

ONE_ITEM = "### T1: Count words\nMake it.\n\ncheck: `python -m unittest tests.test_words`\n"


def t1_merged(h: Harness) -> None:
    """T1's work (`tally/words.py` and its test) on main, as merging T1's pull request leaves
    it: the items that build on it start from there, without running T1 first."""
    work = runpy.run_path(str(EXAMPLES / "agent" / "tally_agent.py"))
    land = h.tmp / "t1-merged"
    git_in(h.tmp, "clone", "-q", h.forge.forge.clone_url(*REPO.split("/")), str(land))
    (land / "tally" / "words.py").write_text(work["WORDS"])
    (land / "tests" / "test_words.py").write_text(work["WORDS_TEST"])
    git_in(land, "add", "--all")
    git_in(land, "-c", "user.name=Dee", "-c", "user.email=dee@example.com", "commit", "-qm", "T1")
    git_in(land, "push", "-q", "origin", "main")


def done_agent(h: Harness) -> str:
    """The command template of a scripted agent that does its item's work and ends well."""
    return shlex.join(write_scripted_agent(h.tmp / "agents", "done")) + " {prompt_file}"


def settings(**overrides: object) -> RunSettings:
    base = RunSettings(
        checks=["python -m unittest"],
        check_timeout_s=30.0,
        lease_s=30.0,
        workers=1,
        idle_poll_s=0.02,
    )
    for name, value in overrides.items():
        setattr(base, name, value)
    return base


def kinds(h: Harness, project: str, item: str) -> list[str]:
    return [e.kind for e in h.store.all_events(project=project, item=item)]


def remote_main(h: Harness) -> str:
    return subprocess.run(
        ["git", "rev-parse", "origin/main"], cwd=h.work, capture_output=True, text=True, check=True
    ).stdout.strip()


@pytest.mark.integration
def test_an_item_becomes_a_pull_request_that_closes_its_issue_and_a_rerun_does_nothing_again(
    h: Harness,
) -> None:
    before = remote_main(h)
    pipeline = h.pipeline(ONE_ITEM)
    report = pipeline.run()
    assert [(i.id, i.state, i.attempts) for i in report.items] == [("T1", "pr_open", 1)]
    [pull] = h.pulls()
    issue = pipeline.issues["T1"]
    assert pull.title == "T1: Count words" and pull.base.ref == "main"
    assert pull.head.ref == "agent-harness/T1-count-words"
    assert f"Closes #{issue}" in pull.body
    assert "| `python -m unittest tests.test_words` | passed |" in pull.body
    assert "approved by openai (gpt-test)" in pull.body
    marker = read_pull_marker(pull.body)
    assert marker is not None and (marker.item_id, marker.issue) == ("T1", issue)
    subprocess.run(["git", "fetch", "-q"], cwd=h.work, check=True)
    assert remote_main(h) == before, "the default branch must never move"
    events = kinds(h, pipeline.project, "T1")
    order = [
        "claimed",
        "worktree",
        "agent_started",
        "agent_finished",
        "check",
        "review",
        "pushed",
        "pr_opened",
    ]
    positions = [events.index(kind) for kind in order]
    assert positions == sorted(positions)

    # Run again, the plan finished: nothing is written to the forge, nothing is reviewed again.
    mark = h.forge.forge.mark()
    again = h.pipeline(ONE_ITEM).run()
    assert [(i.id, i.state, i.attempts) for i in again.items] == [("T1", "pr_open", 1)]
    counts = h.forge.forge.request_counts(mark)
    assert not any(key.startswith(("POST", "PATCH")) for key in counts), counts
    assert counts["GET /repos/{owner}/{repo}/issues"] == 1, "the issues are listed once a run"
    assert len(h.reviews()) == 1


@pytest.mark.integration
def test_a_failed_check_goes_back_to_the_agent_and_the_reviewer_waits(h: Harness) -> None:
    plan = (
        "### T2: Count lines\nA trailing newline does not start a line.\n\n"
        "check: `python -m unittest tests.test_lines`\n"
    )
    t1_merged(h)  # T2 needs words.py from T1
    pipeline = h.pipeline(plan)
    report = pipeline.run()
    assert [(i.id, i.state, i.attempts) for i in report.items] == [("T2", "pr_open", 2)]
    events = h.store.all_events(project=pipeline.project, item="T2")
    feedback = [e.payload.as_dict() for e in events if e.kind == "feedback"]
    assert feedback[0]["kind"] == "checks" and "FAIL" in feedback[0]["detail"]
    reviews_of_t2 = [e for e in events if e.kind == "review"]
    assert len(reviews_of_t2) == 1, "no review while a check fails"
    logs = sorted((h.state_dir / "items" / "T2" / "logs").glob("*.log"))
    first, again = (
        (p for p in logs if p.name.endswith(".1.log")),
        (p for p in logs if not p.name.endswith(".1.log")),
    )
    assert "(again, with feedback)" in next(again).read_text()
    assert "(again, with feedback)" not in next(first).read_text()  # the first try's, kept


@pytest.mark.integration
def test_a_reviewer_no_goes_back_and_the_reviewer_never_sees_the_transcript(
    h: Harness,
) -> None:
    plan = (
        "### T4: Most frequent words\n`top_words(text, n)`; ties broken alphabetically.\n\n"
        "check: `python -m unittest tests.test_top`\n"
    )
    t1_merged(h)
    pipeline = h.pipeline(plan)
    report = pipeline.run()
    assert [(i.id, i.state, i.attempts) for i in report.items] == [("T4", "pr_open", 2)]
    t4_reviews = [r for r in h.reviews() if "T4" in json.dumps(r.body)]
    assert len(t4_reviews) == 2
    for request in t4_reviews:
        text = json.dumps(request.body)
        assert "tally_agent:" not in text, "the agent's own output must not reach the reviewer"
        assert "diff --git" in text
    second_prompt = h.state_dir / "items" / "T4" / "logs"
    assert any("again, with feedback" in p.read_text() for p in second_prompt.glob("*.log"))


@pytest.mark.integration
def test_checks_failing_every_time_end_in_failed_without_any_review(h: Harness) -> None:
    agent = write_scripted_agent(h.tmp / "agents", "done")
    plan = '### T1: Anything\n\ncheck: `python -c "raise SystemExit(1)"`\n'
    pipeline = h.pipeline(
        plan,
        agent=shlex.join(agent) + " {prompt_file}",
        settings=settings(checks=[], max_attempts=2),
    )
    report = pipeline.run()
    [item] = report.items
    assert item.state == "failed" and item.attempts == 2
    assert "attempt budget 2 spent" in (item.reason or "")
    assert h.reviews() == [] and h.pulls() == []


# Touches CI unless its prompt says that doing so was refused last time.
OVERREACHING_AGENT = (
    "if grep -q 'touches protected path' {prompt_file}; then :; else "
    "mkdir -p .github/workflows && echo 'on: push' > .github/workflows/evil.yml; fi; "
    "echo counted > NOTES.md"
)


@pytest.mark.integration
@pytest.mark.parametrize("retried_by", ["the run", "a person"])
def test_a_protected_path_is_refused_and_the_next_attempt_is_told_on_a_clean_branch(
    h: Harness, retried_by: str
) -> None:
    in_run = retried_by == "the run"
    run = settings(checks=[], max_attempts=2 if in_run else 1)
    agent = f"sh -c {shlex.quote(OVERREACHING_AGENT)}"
    [item] = h.pipeline("### T1: Anything\n", agent=agent, settings=run).run().items
    if not in_run:
        assert (item.state, item.attempts) == ("failed", 1)
        assert "touches protected path .github/workflows/evil.yml" in (item.reason or "")
        assert h.reviews() == []
        retry_item(h.store, f"{REPO}:PLAN", "T1")  # what `work retry T1` does
        [item] = h.pipeline("### T1: Anything\n", agent=agent, settings=run).run().items
    assert (item.state, item.attempts) == ("pr_open", 2 if in_run else 1), item.reason
    assert len(h.reviews()) == 1  # the rejected change was never sent to the reviewer
    [pull] = h.pulls()
    assert pull.head.ref == "agent-harness/T1.r1-anything"
    assert git(h, "fetch", "-q", "origin") == ""
    changed = git(h, "diff", "--name-only", "origin/main", f"origin/{pull.head.ref}")
    assert changed.split() == ["NOTES.md"]
    # The rejected commit is kept on its own branch, for a person to read.
    assert ".github/workflows/evil.yml" in git(
        h, "diff", "--name-only", "origin/main", "agent-harness/T1-anything"
    )


def git(h: Harness, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=h.work, capture_output=True, text=True, check=True)
    return done.stdout.strip()


@pytest.mark.integration
def test_the_agent_never_sees_the_tracker_token_or_other_keys(h: Harness) -> None:
    agent = write_scripted_agent(h.tmp / "agents", "dump_env")
    pipeline = h.pipeline(
        "### T1: Anything\n",
        agent=shlex.join(agent) + " {prompt_file}",
        settings=settings(checks=[]),
    )
    pipeline.run()
    seen = json.loads((h.state_dir / "worktrees" / "T1" / "env.json").read_text())
    assert "GH_TOKEN" not in seen and KEY_ENV not in seen
    assert not any(name.startswith("AGENT_HARNESS_") for name in seen)
    assert "PATH" in seen


@pytest.mark.integration
def test_an_agent_that_commits_to_the_default_branch_is_refused(h: Harness) -> None:
    script = (
        "git checkout -q --detach && echo sneaky > sneaky.txt && git add sneaky.txt && "
        "git -c user.name=a -c user.email=a@b commit -qm sneaky && "
        "git update-ref refs/heads/main HEAD; : {prompt_file}"
    )
    pipeline = h.pipeline(
        "### T1: Anything\n",
        agent=f"sh -c {shlex.quote(script)}",
        settings=settings(checks=[], max_attempts=1),
    )
    [item] = pipeline.run().items
    assert item.state == "failed"
    assert "DefaultBranchGuard" in (item.reason or "") or "refused" in (item.reason or "")
    assert h.pulls() == []


@pytest.mark.unit
def test_the_push_guard_refuses_any_refspec_touching_the_default_branch() -> None:
    for refspec in (
        "main",
        "refs/heads/main",
        "HEAD:main",
        "agent-harness/x:refs/heads/main",
        "+refs/heads/x:main",
        ":main",
    ):
        with pytest.raises(DefaultBranchGuard):
            guard_refspec(refspec, "main")
    guard_refspec("refs/heads/agent-harness/T1-x:refs/heads/agent-harness/T1-x", "main")


@pytest.mark.integration
def test_missing_and_hanging_checks_fail_the_item_with_the_reason(h: Harness) -> None:
    command = done_agent(h)
    from agent_harness.pipeline.settings import RunRefused

    # A program that is nowhere to be found is refused before any agent is paid.
    refused = h.pipeline(
        "### T1: Anything\n",
        agent=command,
        settings=settings(checks=["no-such-tool-xyz --check"], max_attempts=3),
    )
    with pytest.raises(RunRefused, match="check `no-such-tool-xyz --check`: no-such-tool-xyz"):
        refused.run()
    assert h.store.all_events(item="T1") == []
    # One inside the repository may be the agent's to write: missing when it runs, it fails.
    missing = h.pipeline(
        "### T1: Anything\n",
        agent=command,
        settings=settings(checks=["./no-such-tool-xyz --check"], max_attempts=1),
    )
    [item] = missing.run().items
    assert item.state == "failed" and "no-such-tool-xyz" in (item.reason or "")
    assert "not found" in (item.reason or "") or "missing" in (item.reason or "")
    hanging = h.pipeline(
        "### T2: Other\n",
        agent=command,
        settings=settings(checks=["sleep 30"], check_timeout_s=0.5, max_attempts=1),
    )
    [item2] = hanging.run().items
    assert item2.id == "T2" and item2.state == "failed" and "timed out" in (item2.reason or "")


@pytest.mark.integration
def test_an_agent_that_deletes_its_worktree_fails_the_item_clearly(h: Harness) -> None:
    script = 'rm -rf "$PWD"; : {prompt_file}'
    pipeline = h.pipeline(
        "### T1: Anything\n",
        agent=f"sh -c {shlex.quote(script)}",
        settings=settings(checks=[], max_attempts=1),
    )
    [item] = pipeline.run().items
    assert item.state == "failed" and "deleted its worktree" in (item.reason or "")


@pytest.mark.integration
def test_a_lost_answer_to_the_pull_request_opens_no_second_one(h: Harness) -> None:
    # The forge creates the PR but the answer never arrives: the retry must find it, not
    # open another, and must not pay the reviewer again for the same commit.
    h.forge.forge.faults.inject(FaultKind.DROP_AFTER, "POST", "*/pulls", count=1)
    pipeline = h.pipeline(ONE_ITEM)
    [item] = pipeline.run().items
    assert item.state == "pr_open"
    assert len(h.pulls()) == 1
    assert len(h.reviews()) == 1


@pytest.mark.integration
def test_dependencies_wait_for_a_merge(h: Harness) -> None:
    plan = (
        ONE_ITEM
        + "\n### T2: Count lines\ndepends on: T1\n\ncheck: `python -m unittest tests.test_lines`\n"
    )
    pipeline = h.pipeline(plan)
    report = pipeline.run()
    states = {i.id: (i.state, i.reason) for i in report.items}
    assert states["T1"][0] == "pr_open"
    assert states["T2"] == ("pending", "waits for T1 (pr_open) to be merged")
    record_outcome(h.store, pipeline.project, "T1", "merged", {"pr": 1})
    assert get_item(h.store, pipeline.project, "T1").state == ItemState.MERGED


@pytest.fixture
def h(harness: Harness) -> Harness:
    return harness


@pytest.mark.integration
def test_python_is_the_interpreter_the_checks_use(h: Harness) -> None:
    # The example's checks say `python`; the harness's PATH puts this interpreter first.
    out = subprocess.run(
        ["python", "-c", "import sys; print(sys.prefix)"],
        env=h.env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert out == sys.prefix


@pytest.mark.integration
def test_a_second_run_of_the_same_project_and_state_is_refused(h: Harness) -> None:
    import fcntl
    import hashlib

    from agent_harness.pipeline.settings import RunRefused

    pipeline = h.pipeline(ONE_ITEM)
    locks = h.state_dir / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    name = hashlib.sha256(pipeline.project.encode()).hexdigest()[:12]
    with open(locks / f"run-{name}.lock", "a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        held.write("pid 4242\n")
        held.flush()
        with pytest.raises(RunRefused, match=r"another `agent-harness run` of .* \(pid 4242\)"):
            pipeline.run()
    assert h.pulls() == []


CURSOR_TWO_TODOS = (
    "---\ntodos:\n"
    "  - id: bucket-store\n    content: Add buckets store\n    status: pending\n"
    "  - id: bucket\n    content: Bucket policy\n    status: pending\n"
    "---\n# Buckets\n"
)


@pytest.mark.integration
def test_a_todo_whose_id_starts_another_ones_works_on_a_branch_of_its_own(h: Harness) -> None:
    # Each run of the agent writes a file named after its worktree, on whichever branch it is.
    agent = 'sh -c \'echo done > "work-$(basename "$PWD").txt"\' {prompt_file}'
    run = h.pipeline(CURSOR_TWO_TODOS, agent=agent, settings=settings(checks=["true"]))
    report = run.run()
    assert sorted((i.id, i.state) for i in report.items) == [
        ("bucket", "pr_open"),
        ("bucket-store", "pr_open"),
    ]
    files = {p.head.ref: sorted(f.filename for f in p.get_files()) for p in h.pulls()}
    # `bucket` used to take `bucket-store`'s branch (it starts with `bucket-`): its work went
    # onto the other todo's pull request, and its own was never opened.
    assert files == {
        "agent-harness/bucket-store-add-buckets-store": ["work-bucket-store.txt"],
        "agent-harness/bucket-bucket-policy": ["work-bucket.txt"],
    }


@pytest.mark.integration
def test_a_finished_run_leaves_no_lock_file_behind(h: Harness) -> None:
    [item] = h.pipeline(ONE_ITEM).run().items
    assert item.state == "pr_open"
    # One file a run would have left in `locks/` for each project ever run from this folder.
    assert sorted(p.name for p in (h.state_dir / "locks").iterdir()) == []


@pytest.mark.integration
def test_a_parked_reviewer_waits_without_burning_an_attempt_then_reviews_the_same_commit(
    h: Harness,
) -> None:
    from agent_harness.testing.model_server import ScriptedFailure

    # The reviewer's endpoint answers "come back in two hours": the checked work is kept.
    h.model.enqueue_first(ScriptedFailure.openai_rate_limit(retry_after=7200))
    pipeline = h.pipeline(ONE_ITEM)
    [item] = pipeline.run().items
    assert item.state == "waiting" and item.attempts == 0
    assert item.not_before is not None and item.not_before > h.clock() + 7000
    agent_runs = kinds(h, pipeline.project, "T1").count("agent_started")
    h.clock.advance(7300)  # two hours later
    [item] = h.pipeline(ONE_ITEM).run().items
    assert item.state == "pr_open"
    assert kinds(h, pipeline.project, "T1").count("agent_started") == agent_runs, (
        "the agent is not paid again for a commit that only lacked its review"
    )
    assert len(h.pulls()) == 1


@pytest.mark.integration
def test_an_agent_waiting_for_input_shows_it_and_can_be_answered(h: Harness) -> None:
    import threading
    import time as clock

    from agent_harness.agents.presets import preset_for
    from agent_harness.cli.work_cmd import _activity
    from agent_harness.implement.cli_agent import CliImplementer
    from agent_harness.sessions.headless import HeadlessHost

    agent = write_scripted_agent(h.tmp / "agents", "ask")
    pipeline = h.pipeline(
        "### T1: Anything\n",
        agent=shlex.join(agent) + " {prompt_file}",
        settings=settings(checks=[]),
    )
    host = HeadlessHost(h.state_dir / "sessions-ask")
    pipeline.implementer = CliImplementer(
        host,
        preset_for(shlex.join(agent) + " {prompt_file}"),
        h.env,
        timeout_s=30.0,
        idle_s=0.3,
        poll_s=0.05,
    )
    result: list[object] = []
    runner = threading.Thread(target=lambda: result.append(pipeline.run()))
    runner.start()
    deadline = clock.monotonic() + 20
    while clock.monotonic() < deadline:
        if _activity(h.store, pipeline.project, ["T1"]).get("T1", "").startswith("waiting for"):
            break
        clock.sleep(0.05)
    assert _activity(h.store, pipeline.project, ["T1"])["T1"] == (
        "waiting for input: attach to answer"
    )
    host.send_keys(pipeline.session_name("T1"), "y")  # what a person types after `attach`
    runner.join(timeout=30)
    [item] = result[0].items  # type: ignore[attr-defined]
    assert item.state == "pr_open"
    states = [
        e.payload.as_dict().get("state")
        for e in h.store.all_events(project=pipeline.project, item="T1")
        if e.kind == "agent_state"
    ]
    assert "waiting_for_input" in states


@pytest.mark.integration
def test_only_runs_the_named_items_and_items_gone_from_the_plan_never_run(h: Harness) -> None:
    command = done_agent(h)
    three = "### T1: One\n\n### T2: Two\n\n### T3: Three\n"
    first = h.pipeline(three, agent=command, settings=settings(checks=[], only={"T2"}))
    states = {i.id: (i.state, i.attempts) for i in first.run().items}
    assert states == {"T1": ("pending", 0), "T2": ("pr_open", 1), "T3": ("pending", 0)}
    # T3 is deleted from the plan: its queued item is withdrawn, never handed to an agent.
    second = h.pipeline("### T1: One\n\n### T2: Two\n", agent=command, settings=settings(checks=[]))
    second.run()
    from agent_harness.queue.items import get_item

    withdrawn = get_item(h.store, second.project, "T3")
    assert (withdrawn.state, withdrawn.reason, withdrawn.attempts) == (
        "skipped",
        "no longer in the plan",
        0,
    )
    assert get_item(h.store, second.project, "T1").state == "pr_open"
    # Put back in the plan, it is worked (it stayed skipped for good before).
    third = h.pipeline(three, agent=command, settings=settings(checks=[]))
    assert {i.id: i.state for i in third.run().items}["T3"] == "pr_open"


@pytest.mark.integration
def test_item_after_item_the_refs_a_worktree_needs_are_read_from_files_not_asked_of_git(
    h: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each git call is a process (2 to 3 ms here). Once the first item's branch exists,
    # `refs/heads/agent-harness` is a folder of branches; reading it sent every later item
    # to `git for-each-ref` for the refs its worktree needs. A `git` first on PATH notes each
    # call and where it was made, then runs the real one.
    asked = noted_git(h.tmp, monkeypatch)
    three = "### T1: One\n\n### T2: Two\n\n### T3: Three\n"
    report = h.pipeline(three, agent=done_agent(h), settings=settings(checks=[])).run()
    assert {i.id: i.state for i in report.items} == dict.fromkeys(("T1", "T2", "T3"), "pr_open")
    where = (str(h.work), str(h.state_dir))  # the clone and the worktrees; not the forge's
    ours = [line for line in asked.read_text().splitlines() if line.startswith(where)]
    assert len(ours) > 20  # the note saw the run's git
    assert [line for line in ours if " for-each-ref " in line] == []


@pytest.mark.integration
def test_two_plans_with_the_same_ids_never_share_a_branch_or_worktree(h: Harness) -> None:

    command = done_agent(h)
    main = h.pipeline("### T1: Main plan item\n", agent=command, settings=settings(checks=[]))
    main.run()
    other = h.pipeline("### T1: Other plan item\n", agent=command, settings=settings(checks=[]))
    other.plan_key = "docs"
    other.project = f"{other.tracker.repo}:docs"
    assert isinstance(other, Pipeline)
    [item] = other.run().items
    assert item.state == "pr_open"
    heads = sorted(p.head.ref for p in h.pulls())
    assert heads == ["agent-harness/T1-main-plan-item", "agent-harness/docs/T1-other-plan-item"]
    assert (h.state_dir / "worktrees" / "T1").is_dir()
    assert (h.state_dir / "worktrees" / "docs--T1").is_dir()


@pytest.mark.integration
def test_the_direct_api_executor_implements_through_the_same_pipeline(h: Harness) -> None:
    """`--implementer vendor:model`: a planner and an implementer model edit the worktree."""
    import json as jsonlib

    from agent_harness.implement.api import ApiImplementer
    from agent_harness.models.client import ModelClient
    from agent_harness.models.routes import Route
    from agent_harness.testing.model_server import (
        ModelServer,
        ScriptedCompletion,
        ScriptedResponder,
    )

    files = ["notes/one.txt", "notes/two.txt", "notes/three.txt"]

    def brain(body: object) -> ScriptedCompletion:
        text = jsonlib.dumps(body)
        if "You plan one work item" in text:
            steps = [
                {
                    "id": str(n),
                    "description": f"write {path}",
                    "check": {"kind": "file_exists", "path": path},
                }
                for n, path in enumerate(files, start=1)
            ]
            return ScriptedCompletion(text=jsonlib.dumps({"steps": steps}))
        wanted = text.split("Your step (", 1)[1]  # the step being asked for, not the whole plan
        target = next(path for path in files if wanted.split("\\n", 1)[0].endswith(path))
        return ScriptedCompletion(text=f"{target}\n```\nwritten by the executor\n```\n")

    with ModelServer([ScriptedResponder(brain)]) as models:
        route = Route(
            "gpt-exec", f"{models.url}/v1", "anthropic-compatible", "openai", "TEST_EXEC_KEY"
        )
        env = dict(h.env, TEST_EXEC_KEY="sk-exec")
        client = ModelClient({"planner": route, "implementer": route}, env=env, parking=h.store)
        pipeline = h.pipeline("### T1: Three notes\n", settings=settings(checks=[]))
        pipeline.implementer = ApiImplementer(client, vendor="anthropic", name="executor:gpt-exec")
        [item] = pipeline.run().items
    assert item.state == "pr_open", item.reason
    [pull] = h.pulls()
    changed = {
        f.filename
        for f in h.forge.github.get_repo("octo/tally").compare("main", pull.head.sha).files
    }
    assert changed == set(files)
    planner_calls = [
        r for r in models.requests if "You plan one work item" in jsonlib.dumps(r.body)
    ]
    assert len(planner_calls) == 1
    assert not any("sk-exec" in jsonlib.dumps(r.body) for r in models.requests)


@pytest.mark.integration
def test_an_item_whose_issue_could_not_be_made_is_held_not_worked_until_it_can_be(
    h: Harness,
) -> None:
    command = done_agent(h)
    too_long = "### T1: Huge\n\n" + "word " * 14_000 + "\n\n### T2: Small\n\nFine.\n"
    first = h.pipeline(too_long, agent=command, settings=settings(checks=[]))
    report = first.run()
    assert report.sync is not None and any("T1" in p for p in report.sync.problems)
    by_id = {i.id: i for i in report.items}
    # No pull request that closes no issue: T1 waits, and says why, with no attempt spent.
    assert (by_id["T1"].state, by_id["T1"].attempts) == ("waiting", 0)
    assert "issue could not be made" in (get_item(h.store, first.project, "T1").reason or "")
    assert by_id["T2"].state == "pr_open"
    assert [p.head.ref for p in h.pulls()] == ["agent-harness/T2-small"]
    # The plan shortened, the next run makes its issue and works it.
    second = h.pipeline(
        "### T1: Huge\n\nShorter now.\n\n### T2: Small\n\nFine.\n",
        agent=command,
        settings=settings(checks=[]),
    )
    again = {i.id: i.state for i in second.run().items}
    assert again == {"T1": "pr_open", "T2": "pr_open"}
    [t1_pull] = [p for p in h.pulls() if p.head.ref.startswith("agent-harness/T1")]
    assert f"Closes #{second.issues['T1']}" in t1_pull.body


@pytest.mark.integration
def test_a_title_longer_than_github_takes_is_shortened_on_the_issue_and_the_pull(
    h: Harness,
) -> None:
    command = done_agent(h)
    words = " ".join(f"step{n}" for n in range(60))
    pipeline = h.pipeline(
        f"### T1: {words}\n\nDo it.\n", agent=command, settings=settings(checks=[])
    )
    [item] = pipeline.run().items
    assert item.state == "pr_open"
    [pull] = h.pulls()
    assert len(pull.title) == 256 and pull.title.endswith("…")
    assert f"Closes #{pipeline.issues['T1']}" in pull.body


@pytest.mark.integration
def test_an_item_taken_out_of_the_plan_with_its_pull_request_open_is_still_reported(
    h: Harness,
) -> None:
    command = done_agent(h)
    first = h.pipeline("### T1: One\n", agent=command, settings=settings(checks=[]))
    [t1] = first.run().items
    assert t1.state == "pr_open" and t1.pr_url
    later = h.pipeline("### T2: Two\n", agent=command, settings=settings(checks=[]))
    report = {i.id: i for i in later.run().items}
    assert report["T2"].state == "pr_open"
    # Before, T1 left the report, though its pull request stays open and `work` counts it.
    gone = report["T1"]
    assert (gone.state, gone.reason) == ("pr_open", "no longer in the plan; still pr_open")
    assert gone.pr_url == t1.pr_url


@pytest.mark.integration
def test_an_agent_whose_lease_another_run_took_is_stopped_not_left_spending(h: Harness) -> None:
    import threading

    from agent_harness.queue.leases import claim_next, reclaim_own

    marks = h.tmp / "marks"
    marks.mkdir()
    started, finished = marks / "started", marks / "finished"
    # An agent that works for a long while: it says it started, and that it finished.
    agent = f"sh -c 'touch {started}; sleep 30; touch {finished}' {{prompt_file}}"
    pipeline = h.pipeline(
        ONE_ITEM, agent=agent, settings=settings(lease_s=1.5, wait_for_others=False)
    )

    def another_run_takes_over() -> None:
        for _ in range(600):
            if started.exists():
                break
            threading.Event().wait(0.05)
        # A second run under the same host id (whose lock it got when this one's connection
        # dropped) takes this run's live leases, as a dead run's, and claims the item.
        reclaim_own(h.store, pipeline.project, pipeline.worker_prefix + "/", prefix=True)
        assert claim_next(h.store, pipeline.project, "elsewhere/w1", 60) is not None

    taker = threading.Thread(target=another_run_takes_over, daemon=True)
    taker.start()
    report = pipeline.run()
    taker.join(10)
    assert started.exists() and not finished.exists()  # stopped, not left to spend 30 s
    assert "lease_lost" in kinds(h, pipeline.project, "T1")
    assert get_item(h.store, pipeline.project, "T1").worker == "elsewhere/w1"
    assert [i.id for i in report.items] == ["T1"] and h.pulls() == []


def queued_with_a_live_agent(h: Harness, pipeline: Pipeline) -> tuple[Any, str]:
    """T1 queued by `pipeline`, and an agent of it (a long sleep) live in its session on the
    pipeline's host: the host and the session's name."""
    from agent_harness.sessions.protocol import SessionSpec

    pipeline.begin()
    host = pipeline.parts.implementer.host  # type: ignore[attr-defined]
    name = pipeline.parts.session_name("T1")
    spec = SessionSpec(name, ["sleep", "30"], h.work, {"PATH": "/usr/bin:/bin"}, h.tmp / "a.log")
    host.start(spec)
    return host, name


@pytest.mark.integration
def test_a_restarted_host_ends_its_agent_of_an_item_another_host_took_over(h: Harness) -> None:
    from agent_harness.queue.leases import claim_next

    first = h.pipeline(ONE_ITEM, settings=settings(wait_for_others=False))
    # The item queued, and its agent left running by a `run` that was killed; another host
    # took the item since.
    host, name = queued_with_a_live_agent(h, first)
    assert claim_next(h.store, first.project, "elsewhere/w1", 60) is not None
    assert host.exists(name) and host.status(name).alive
    report = h.pipeline(ONE_ITEM, settings=settings(wait_for_others=False)).run()
    assert not (host.exists(name) and host.status(name).alive)
    assert get_item(h.store, first.project, "T1").worker == "elsewhere/w1"
    assert [i.id for i in report.items] == ["T1"] and h.pulls() == []


@pytest.mark.integration
def test_a_lost_lease_that_a_worker_of_the_same_host_took_back_keeps_its_session(
    h: Harness,
) -> None:
    from agent_harness.queue.leases import claim_next

    pipeline = h.pipeline(ONE_ITEM, settings=settings(wait_for_others=False))
    host, name = queued_with_a_live_agent(h, pipeline)
    # w1's lease lapsed; w2 of this same host claimed the item and adopted the live session.
    sibling = claim_next(h.store, pipeline.project, pipeline.worker_prefix + "/w2", 60)
    assert sibling is not None
    lost = sibling._replace(worker=pipeline.worker_prefix + "/w1", token=sibling.token - 1)
    pipeline.lease_lost(lost)
    assert host.status(name).alive  # w2's agent now: not ended
    host.kill(name)
