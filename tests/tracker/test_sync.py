"""Plan -> issues through GitHubTracker (PyGithub over HTTP) against the embedded forge."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path

import pytest
from github import GithubException

from agent_harness.forge import FaultKind
from agent_harness.plan.markdown import parse_plan
from agent_harness.plan.model import Plan
from agent_harness.testing.forge import READ_ONLY_TOKEN, TOKEN, RunningForge, running_forge
from agent_harness.tracker.github import GitHubTracker
from agent_harness.tracker.markers import read_marker
from agent_harness.tracker.protocol import AuthError, RateLimited, RepoNotFound
from agent_harness.tracker.sync import sync_plan

REPO = "octo/app"


def make_plan(n: int, edited: set[int] = frozenset(), prefix: str = "") -> Plan:  # type: ignore[assignment]
    lines = ["## Milestone: M1", ""]
    for i in range(1, n + 1):
        title = f"Item {i}" + (" (edited)" if i in edited else "")
        lines += [f"### T{i}: {title}", f"Body of {i}.", "labels: feature"]
        if i > 1:
            lines.append(f"depends on: T{i - 1}")
        lines += ["check: `pytest`", ""]
    return parse_plan("\n".join(lines), source=f"{prefix}PLAN.md")


@pytest.fixture
def rf(tmp_path: Path) -> Iterator[RunningForge]:
    with running_forge(tmp_path / "forge") as running:
        running.forge.create_repo("octo", "app", auto_init=True)
        yield running


class Sleeps(list[float]):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def tracker(rf: RunningForge, token: str = TOKEN, **kw: object) -> GitHubTracker:
    options: dict[str, object] = {"write_spacing_s": 0.0, "sleep": Sleeps()} | kw
    return GitHubTracker(REPO, token, rf.server.api_url, **options)  # type: ignore[arg-type]


def issues(rf: RunningForge) -> list[dict[str, object]]:
    repo = rf.github.get_repo(REPO)
    return [
        {
            "number": i.number,
            "title": i.title,
            "body": i.body,
            "state": i.state,
            "labels": [x.name for x in i.labels],
        }
        for i in repo.get_issues(state="all")
    ]


def writes_since(rf: RunningForge, mark: int) -> int:
    counts = rf.forge.request_counts(mark)
    return sum(n for key, n in counts.items() if not key.startswith("GET "))


def requests_since(rf: RunningForge, mark: int) -> int:
    return sum(rf.forge.request_counts(mark).values())


@pytest.mark.integration
def test_first_sync_creates_then_resync_is_free(rf: RunningForge) -> None:
    plan = make_plan(120)
    report = sync_plan(plan, tracker(rf), "PLAN")
    assert len(report.created) == 120 and report.ok
    made = issues(rf)
    assert len(made) == 120
    assert {read_marker(str(i["body"])).item_id for i in made} == {f"T{n}" for n in range(1, 121)}  # type: ignore[union-attr]
    # dependencies link to the dependency's issue number, which existed first
    t2 = next(i for i in made if str(i["title"]).startswith("T2:"))
    t1 = next(i for i in made if str(i["title"]).startswith("T1:"))
    assert f"#{t1['number']} (T1)" in str(t2["body"])

    mark = rf.forge.mark()
    again = sync_plan(plan, tracker(rf), "PLAN")
    assert len(again.unchanged) == 120 and not again.created and not again.updated
    assert writes_since(rf, mark) == 0
    assert requests_since(rf, mark) <= math.ceil(120 / 100) + 2
    assert again.requests == requests_since(rf, mark)


@pytest.mark.integration
def test_edits_update_only_what_changed_and_renames_keep_the_issue(rf: RunningForge) -> None:
    sync_plan(make_plan(10), tracker(rf), "PLAN")
    before = {str(i["title"]).split(":")[0]: i["number"] for i in issues(rf)}
    mark = rf.forge.mark()
    report = sync_plan(make_plan(10, edited={3, 7}), tracker(rf), "PLAN")
    assert sorted(c.id for c in report.updated) == ["T3", "T7"]
    assert writes_since(rf, mark) == 2
    after = {str(i["title"]).split(":")[0]: i["number"] for i in issues(rf)}
    assert before == after and len(issues(rf)) == 10
    assert any("title" in change for change in report.updated[0].changes)


@pytest.mark.integration
def test_dry_run_writes_nothing_and_describes_changes(rf: RunningForge) -> None:
    first = sync_plan(make_plan(3), tracker(rf), "PLAN", dry_run=True)
    assert [c.id for c in first.created] == ["T1", "T2", "T3"]
    assert issues(rf) == []
    sync_plan(make_plan(3), tracker(rf), "PLAN")
    mark = rf.forge.mark()
    report = sync_plan(make_plan(4, edited={2}), tracker(rf), "PLAN", dry_run=True)
    assert writes_since(rf, mark) == 0
    assert [c.id for c in report.updated] == ["T2"] and [c.id for c in report.created] == ["T4"]
    assert report.updated[0].changes[0] == "title: 'T2: Item 2' -> 'T2: Item 2 (edited)'"
    # What would be posted, for a person to read first: each issue's title and body.
    shown = report.as_json()
    assert shown["updated"][0]["title"] == "T2: Item 2 (edited)"
    assert shown["created"][0]["title"] == "T4: Item 4"
    assert "Mirrored from" in shown["created"][0]["body"]
    assert "title" not in sync_plan(make_plan(4), tracker(rf), "PLAN").as_json()["created"][0]


@pytest.mark.integration
def test_sync_never_closes_or_reopens_and_reports_orphans(rf: RunningForge) -> None:
    sync_plan(make_plan(3), tracker(rf), "PLAN")
    repo = rf.github.get_repo(REPO)
    closed = next(i for i in repo.get_issues(state="all") if i.title.startswith("T2:"))
    closed.edit(state="closed")
    report = sync_plan(make_plan(2, edited={2}), tracker(rf), "PLAN")
    assert [(c.id) for c in report.orphaned] == ["T3"]
    states = {str(i["title"]).split(":")[0]: i["state"] for i in issues(rf)}
    assert states == {"T1": "open", "T2": "closed", "T3": "open"}
    assert [c.id for c in report.updated] == ["T2"]  # a closed issue is still kept current


@pytest.mark.integration
def test_an_item_done_in_the_plan_with_an_open_issue_is_reported_and_left_open(
    rf: RunningForge,
) -> None:
    from io import StringIO

    from rich.console import Console

    from agent_harness.cli.plan_view import render_sync

    sync_plan(parse_plan("- [ ] T1 a\n- [ ] T2 b\n- [ ] T3 c\n"), tracker(rf), "PLAN")
    rf.github.get_repo(REPO).get_issue(2).edit(state="closed")  # T2's issue, closed by hand
    done = parse_plan("- [ ] T1 a\n- [x] T2 b\n- [x] T3 c\n")
    report = sync_plan(done, tracker(rf), "PLAN")
    assert report.ok
    assert report.notices == [
        "T3 is done in the plan but its issue #3 is open; sync never closes issues, "
        "close it yourself"
    ]
    assert report.as_json()["done_but_open"] == [{"id": "T3", "issue": 3, "changes": []}]
    states = {str(i["title"]).split(":")[0]: i["state"] for i in issues(rf)}
    assert states == {"T1": "open", "T2": "closed", "T3": "open"}
    shown = StringIO()
    render_sync(Console(file=shown, width=200), report)
    assert (
        "note: T3 is done in the plan but its issue #3 is open; sync never closes issues, "
        "close it yourself"
    ) in shown.getvalue()


@pytest.mark.integration
def test_labels_people_add_survive_updates(rf: RunningForge) -> None:
    sync_plan(make_plan(1), tracker(rf), "PLAN")
    repo = rf.github.get_repo(REPO)
    repo.create_label("urgent", "ff0000")
    repo.get_issue(1).add_to_labels("urgent")
    sync_plan(make_plan(1, edited={1}), tracker(rf), "PLAN")
    assert sorted(issues(rf)[0]["labels"]) == ["feature", "urgent"]  # type: ignore[arg-type]


@pytest.mark.integration
def test_two_plans_share_a_repo_without_colliding(rf: RunningForge) -> None:
    sync_plan(make_plan(2), tracker(rf), "alpha")
    report = sync_plan(make_plan(2), tracker(rf), "beta")
    assert len(report.created) == 2 and not report.orphaned
    assert len(issues(rf)) == 4


@pytest.mark.integration
def test_damaged_and_duplicate_markers_are_reported_never_guessed(rf: RunningForge) -> None:
    sync_plan(make_plan(2), tracker(rf), "PLAN")
    repo = rf.github.get_repo(REPO)
    one = repo.get_issue(1)
    one.edit(body=one.body.replace('"hash"', '"hsah'))
    two = repo.get_issue(2)
    repo.create_issue("copy", body=two.body)
    mark = rf.forge.mark()
    report = sync_plan(make_plan(2, edited={1, 2}), tracker(rf), "PLAN")
    assert not report.ok
    assert any("issue #1" in p and "not valid JSON" in p for p in report.problems)
    assert any("T2: issues #2, #3 carry the same marker" in p for p in report.problems)
    # T1 has no readable marker, so it looks new and is created; T2 is not written at all.
    assert [c.id for c in report.created] == ["T1"] and report.updated == []
    assert (
        rf.forge.request_counts(mark).get("PATCH /repos/{owner}/{repo}/issues/{issue_number}", 0)
        == 0
    )


@pytest.mark.integration
def test_oversized_body_is_refused_before_sending_and_others_proceed(rf: RunningForge) -> None:
    text = "### T1: Huge\n" + ("x" * 70_000) + "\n\n### T2: Small\nfine\n"
    report = sync_plan(parse_plan(text), tracker(rf), "PLAN")
    assert [c.id for c in report.created] == ["T2"]
    assert any("T1: issue body would be" in p and "65536" in p for p in report.problems)


@pytest.mark.integration
def test_a_title_over_githubs_256_is_shortened_whole_in_the_body_and_synced_once(
    rf: RunningForge,
) -> None:
    words = " ".join(f"word{n}" for n in range(60))  # 353 characters
    plan = parse_plan(f"### T1: {words}\n\nDo it.\n")
    report = sync_plan(plan, tracker(rf), "PLAN")
    assert report.ok and [c.id for c in report.created] == ["T1"]
    [issue] = issues(rf)
    title, body = str(issue["title"]), str(issue["body"])
    assert len(title) == 256 and title.startswith("T1: word0 ") and title.endswith("…")
    assert body.startswith(f"**T1:** {words}")  # the whole title, where a person reads it
    again = sync_plan(plan, tracker(rf), "PLAN")
    assert [c.id for c in again.unchanged] == ["T1"] and again.writes == 0
    # The forge answers as GitHub does past 256 characters.
    with pytest.raises(GithubException) as refused:
        rf.github.get_repo(REPO).create_issue("x" * 257)
    assert refused.value.status == 422 and "title is too long" in str(refused.value.data)


@pytest.mark.integration
def test_422_names_the_field_and_is_not_retried(rf: RunningForge) -> None:
    # The markdown reader leaves such a label out (and says so); a plan from elsewhere (a
    # backlog file) may still carry one, and GitHub's 422 then names it.
    long_label = "l" * 60
    read = parse_plan("### T1: a\n\n### T2: b\n")
    first = read.items[0].model_copy(update={"labels": (long_label,)})
    plan = read.model_copy(update={"items": (first, read.items[1])})
    mark = rf.forge.mark()
    report = sync_plan(plan, tracker(rf), "PLAN")
    assert any("name" in p and long_label in p for p in report.problems)
    assert rf.forge.request_counts(mark).get("POST /repos/{owner}/{repo}/labels") == 1
    assert [c.id for c in report.created] == ["T2"]


@pytest.mark.integration
def test_unknown_repo_bad_token_and_read_only_token(rf: RunningForge) -> None:
    with pytest.raises(RepoNotFound, match="octo/nope: not found"):
        GitHubTracker("octo/nope", TOKEN, rf.server.api_url).ensure_repo()
    with pytest.raises(AuthError, match="bad credentials"):
        tracker(rf, token="wrong").ensure_repo()
    report = sync_plan(make_plan(1), tracker(rf, token=READ_ONLY_TOKEN), "PLAN")
    assert report.problems and not report.created
    assert issues(rf) == []


@pytest.mark.integration
def test_archived_repo_refuses_writes_clearly(rf: RunningForge) -> None:
    rf.forge.set_archived("octo", "app")
    report = sync_plan(make_plan(1), tracker(rf), "PLAN")
    assert not report.created and any("archived" in p.lower() for p in report.problems)


@pytest.mark.integration
def test_secondary_rate_limit_is_waited_out_with_retry_after(rf: RunningForge) -> None:
    rf.forge.faults.inject(FaultKind.SECONDARY_RATE_LIMIT, "POST", "*/issues", retry_after=7)
    rf.forge.faults.inject(FaultKind.SECONDARY_RATE_LIMIT_429, "POST", "*/issues", retry_after=3)
    sleeps = Sleeps()
    report = sync_plan(make_plan(3), tracker(rf, sleep=sleeps), "PLAN")
    assert report.ok and len(report.created) == 3
    assert len(issues(rf)) == 3
    assert sleeps[0] >= 7 and sleeps[1] >= 3


@pytest.mark.integration
def test_server_errors_on_reads_are_retried_with_backoff(rf: RunningForge) -> None:
    rf.forge.faults.inject(FaultKind.STATUS, "GET", "*/issues", status=502, count=2)
    sleeps = Sleeps()
    report = sync_plan(make_plan(2), tracker(rf, sleep=sleeps), "PLAN")
    assert report.ok and len(sleeps) == 2


@pytest.mark.integration
def test_uncertain_create_is_checked_before_it_is_repeated(rf: RunningForge) -> None:
    # A 502 on POST may or may not have created the issue: look before writing again.
    rf.forge.faults.inject(FaultKind.STATUS, "POST", "*/issues", status=502, count=1)
    report = sync_plan(make_plan(2), tracker(rf), "PLAN")
    assert report.ok and len(report.created) == 2
    assert len(issues(rf)) == 2


@pytest.mark.integration
def test_dropped_connection_on_create_makes_no_duplicate(rf: RunningForge) -> None:
    rf.forge.faults.inject(FaultKind.DROP, "POST", "*/issues", count=1)
    report = sync_plan(make_plan(2), tracker(rf), "PLAN")
    assert report.ok and len(issues(rf)) == 2


@pytest.mark.integration
def test_primary_limit_beyond_the_allowed_wait_stops_clearly(rf: RunningForge) -> None:
    rf.forge.faults.inject(FaultKind.PRIMARY_RATE_LIMIT, "GET", "*/issues", reset_in_s=7200)
    with pytest.raises(RateLimited, match=r"resets at .* later than the 60 s"):
        sync_plan(make_plan(1), tracker(rf, max_rate_wait_s=60), "PLAN")


@pytest.mark.integration
def test_primary_limit_within_the_allowed_wait_is_waited_out(rf: RunningForge) -> None:
    rf.forge.faults.inject(FaultKind.PRIMARY_RATE_LIMIT, "GET", "*/issues", reset_in_s=30)
    sleeps = Sleeps()
    report = sync_plan(make_plan(1), tracker(rf, sleep=sleeps, max_rate_wait_s=60), "PLAN")
    assert report.ok and 25 <= sleeps[0] <= 62


@pytest.mark.acceptance
def test_killed_sync_then_rerun_converges_without_duplicates(
    rf: RunningForge, tmp_path: Path
) -> None:
    import os
    import signal
    import subprocess
    import sys
    import time

    plan_file = tmp_path / "PLAN.md"
    plan_file.write_text("\n".join(f"- [ ] T{i} Item {i}" for i in range(1, 31)) + "\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GH_", "GITHUB_"))}
    env |= {"GH_TOKEN": TOKEN, "AGENT_HARNESS_TRACKER__WRITE_SPACING_S": "0"}
    command = [
        sys.executable,
        "-m",
        "agent_harness",
        "plan",
        str(plan_file),
        "--repo",
        REPO,
        "--github-url",
        rf.server.api_url,
        "--json",
    ]
    # Slow the creates down so the kill lands in the middle of the sync.
    rf.forge.faults.inject(FaultKind.LATENCY, "POST", "*/issues", delay_s=0.05, count=None)
    proc = subprocess.Popen(
        command, env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    deadline = time.monotonic() + 60
    while len(issues(rf)) < 5 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    made_before = len(issues(rf))
    assert 5 <= made_before < 30, "the kill should land mid-sync"
    rf.forge.faults.clear()
    again = subprocess.run(
        command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert again.returncode == 0, again.stderr
    titles = sorted(str(i["title"]) for i in issues(rf))
    assert titles == sorted(f"T{i}: Item {i}" for i in range(1, 31))
    import json

    report = json.loads(again.stdout)
    # A create in flight at the kill may land after we counted; it is found, not redone.
    assert len(report["created"]) + len(report["unchanged"]) == 30
    assert len(report["unchanged"]) >= made_before


@pytest.mark.unit
def test_tokens_are_found_the_way_gh_finds_them() -> None:
    from agent_harness.tracker.github import resolve_token

    assert resolve_token({"GH_TOKEN": "a", "GITHUB_TOKEN": "b"}, lambda: "c") == "a"
    assert resolve_token({"GITHUB_TOKEN": "b"}, lambda: "c") == "b"
    assert resolve_token({"GH_TOKEN": "  "}, lambda: "c") == "c"  # `gh auth token`
    with pytest.raises(AuthError, match="set GH_TOKEN or GITHUB_TOKEN"):
        resolve_token({}, lambda: None)


@pytest.mark.acceptance
def test_a_missing_token_is_one_line_from_the_cli(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("GH_TOKEN", "GITHUB_TOKEN")}
    env["PATH"] = str(Path(sys.executable).parent)  # no `gh` to ask
    (tmp_path / "PLAN.md").write_text("### T1: a\n")
    done = subprocess.run(
        [sys.executable, "-m", "agent_harness", "plan", "PLAN.md", "--repo", "o/r"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "error: no GitHub token: set GH_TOKEN or GITHUB_TOKEN, or log in with `gh auth login`"
    ]


@pytest.mark.unit
def test_a_sync_of_thousands_draws_a_bounded_table_and_names_what_it_left_out() -> None:
    from io import StringIO

    from rich.console import Console

    from agent_harness.cli.plan_view import TABLE_ROWS_MAX, render_sync
    from agent_harness.tracker.sync import ItemChange, SyncReport

    report = SyncReport(repo=REPO, plan_key="PLAN", dry_run=True)
    report.created = [ItemChange(f"T{n}", None, ["new \x1b[2J"]) for n in range(2_000)]
    report.skipped_done = [f"D{n}" for n in range(300)]
    shown = StringIO()
    render_sync(Console(file=shown, width=200), report)
    text = shown.getvalue()
    assert f"T{TABLE_ROWS_MAX - 1} " in text and f"T{TABLE_ROWS_MAX} " not in text
    assert f"… and {2_000 - TABLE_ROWS_MAX} more changes (not drawn" in text
    assert "done in the plan, no issue made: D0, D1," in text and "and 280 more" in text
    assert "\x1b[2J" not in text and "\\x1b[2J" in text
    assert "2000 created" in text


@pytest.mark.unit
def test_an_html_comment_left_open_in_a_body_is_closed_before_the_issues_footer() -> None:
    # GitHub hides everything after an unclosed `<!--`: the success check and the footer too.
    from agent_harness.plan.model import WorkItem
    from agent_harness.tracker.sync import render_issue

    item = WorkItem(id="T2", title="x", body="Some text <!-- TODO finish", line=1, form="heading")
    draft, _ = render_issue(item, "PLAN", "PLAN.md", {})
    body = draft.body
    assert body.index("<!-- TODO finish -->") < body.index("**Success check:**")


@pytest.mark.integration
def test_a_credential_written_into_the_plan_is_never_posted_nor_shown(rf: RunningForge) -> None:
    # A token pasted into an item (its title, body or a label) once went to the issue, a label
    # named after it was made, and the dry run showed it.
    token = "ghp_" + "L3ak" * 9
    plan = parse_plan(f"### T1: Use {token}\n\nlabels: ok, {token}\n\nCall it with {token}.\n")
    shown = sync_plan(plan, tracker(rf), "PLAN", dry_run=True).as_json()
    assert token not in json.dumps(shown)
    sync_plan(plan, tracker(rf), "PLAN")
    repo = rf.github.get_repo(REPO)
    [issue] = list(repo.get_issues(state="all"))
    assert token not in issue.title + (issue.body or "")
    assert all(token not in label.name for label in repo.get_labels())
    assert "[redacted: a GitHub token]" in (issue.body or "")


@pytest.mark.integration
def test_a_renumbered_plan_is_refused_before_any_write(rf: RunningForge) -> None:
    from agent_harness.tracker.renumbering import PlanRenumbered

    first = "- [ ] T1 Create the Link model\n- [ ] T2 Add the API\n- [ ] T3 Write docs\n"
    sync_plan(parse_plan(first), tracker(rf), "PLAN")
    rf.github.get_repo(REPO).get_issue(1).edit(state="closed")  # T1 done, closed by hand
    # A new task on top, the others shifted down: each issue would be given another task.
    shifted = (
        "- [ ] T1 Write the README\n- [x] T2 Create the Link model\n"
        "- [ ] T3 Add the API\n- [ ] T4 Write docs\n"
    )
    mark = rf.forge.mark()
    with pytest.raises(PlanRenumbered) as refused:
        sync_plan(parse_plan(shifted), tracker(rf), "PLAN")
    said = str(refused.value)
    assert "looks renumbered" in said and "T2 now has 'Create the Link model'" in said
    assert "issue #1 was made for under T1" in said and "Put each task back" in said
    assert writes_since(rf, mark) == 0
    assert [i["title"] for i in issues(rf)] == [
        "T3: Write docs",
        "T2: Add the API",
        "T1: Create the Link model",
    ]
    # An edited title or a new task at the end is no renumbering; nor a task renamed and a
    # new one given its old title.
    edited = first.replace("Write docs", "Write the docs") + "- [ ] T4 Add a cache\n"
    assert sync_plan(parse_plan(edited), tracker(rf), "PLAN", dry_run=True).ok
    renamed = first.replace("Add the API", "Add the REST API") + "- [ ] T4 Add the API\n"
    assert sync_plan(parse_plan(renamed), tracker(rf), "PLAN", dry_run=True).ok
    # Put back as it was, with the new task under a new id: synced, and the closed issue's
    # item that is still to do is named.
    back = "- [ ] T1 Create the Link model\n- [ ] T2 Add the API\n- [ ] T3 Write docs\n"
    report = sync_plan(parse_plan(back + "- [ ] T4 Write the README\n"), tracker(rf), "PLAN")
    assert [c.id for c in report.created] == ["T4"]
    assert report.as_json()["closed_by_a_person"] == [{"id": "T1", "issue": 1}]
    assert (
        "T1 is to do in the plan but its issue #1 was closed by a person; it is not worked "
        "while that issue stays closed (reopen it to have it worked)"
    ) in report.notices
