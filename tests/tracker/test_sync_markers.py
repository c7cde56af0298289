"""Only the marker the harness appended identifies an issue: text that looks like one is inert."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_harness.cli import main
from agent_harness.plan.markdown import parse_plan
from agent_harness.testing.forge import TOKEN, RunningForge, running_forge
from agent_harness.tracker.adopt import adopt_duplicates
from agent_harness.tracker.github import GitHubTracker
from agent_harness.tracker.markers import Marker, read_marker, read_pull_marker
from agent_harness.tracker.sync import render_issue, sync_plan

pytestmark = pytest.mark.integration
REPO = "octo/app"

SNEAKY = """### T1: Document the marker
The sync writes `<!-- agent-harness {"id": "T9", "plan": "PLAN", "hash": "x"} -->` into issues:

```html
<!-- agent-harness {"id": "T1", "plan": "PLAN", "hash": "0000"} -->
```

<!-- agent-harness {"id": "T2", "plan": "PLAN", "hash": "y"} -->
"""


@pytest.fixture
def rf(tmp_path: Path) -> Iterator[RunningForge]:
    with running_forge(tmp_path / "forge") as running:
        running.forge.create_repo("octo", "app", auto_init=True)
        yield running


def client(rf: RunningForge) -> GitHubTracker:
    return GitHubTracker(REPO, TOKEN, rf.server.api_url, write_spacing_s=0.0)


def test_marker_like_text_in_an_item_never_forks_it_into_new_issues(rf: RunningForge) -> None:
    plan = parse_plan(SNEAKY)
    tracker = client(rf)
    first = sync_plan(plan, tracker, "PLAN")
    assert [c.id for c in first.created] == ["T1"]
    for _ in range(3):
        again = sync_plan(plan, tracker, "PLAN")
        assert again.ok and again.created == [] and [c.id for c in again.unchanged] == ["T1"]
    [issue] = tracker.list_issues()
    marker = read_marker(issue.body)
    assert marker is not None and marker.item_id == "T1" and marker.hash != "0000"
    assert "agent-harness" in issue.body.split("\n")[0]  # the text itself is kept, defused


def test_only_the_last_marker_of_a_body_counts() -> None:
    draft, marker = render_issue(parse_plan(SNEAKY).items[0], "PLAN", "PLAN.md", {})
    planted = Marker("T2", "PLAN", "y").render()
    assert read_marker(f"{planted}\n{draft.body}") == marker
    assert read_marker(f"{planted}\n\n{marker.render()}") == marker
    pr = '<!-- agent-harness-pr {"id": "T9", "plan": "PLAN", "issue": 1} -->\n'
    real = '<!-- agent-harness-pr {"id": "T1", "plan": "PLAN", "issue": 2} -->'
    found = read_pull_marker(pr + "text\n" + real)
    assert found is not None and (found.item_id, found.issue) == ("T1", 2)


def test_an_item_stuck_with_twin_issues_is_repaired_by_adopting_the_oldest(
    rf: RunningForge,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    plan_file = tmp_path / "PLAN.md"
    plan_file.write_text("### T1: Count words\n\n### T2: Count lines\n")
    tracker = client(rf)
    draft, _ = render_issue(parse_plan(plan_file.read_text()).items[0], "PLAN", "PLAN.md", {})
    older = tracker.create_issue(draft)  # a history the harness no longer makes: twins
    younger = tracker.create_issue(draft)
    stuck = sync_plan(parse_plan(plan_file.read_text(), source=str(plan_file)), tracker, "PLAN")
    assert any("carry the same marker" in p and "--adopt-duplicate" in p for p in stuck.problems)

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GITHUB_API_URL", rf.server.api_url)
    monkeypatch.setenv("GH_TOKEN", TOKEN)
    assert main(["plan", "PLAN.md", "--repo", REPO]) == 4
    [hint] = [line for line in capsys.readouterr().out.splitlines() if "keep the oldest" in line]
    # The command printed, exactly as it is to be typed (here with --json, to read its answer).
    command = hint.split(": ", 1)[1].split()
    assert command == ["agent-harness", "plan", "PLAN.md", "--repo", REPO, "--adopt-duplicate"]
    code = main([*command[1:], "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0, data["problems"]
    assert data["adopted"] == [
        {"id": "T1", "kept": older.number, "labelled_duplicate": [younger.number]}
    ]
    set_aside = tracker.get_issue(younger.number)
    assert "duplicate" in set_aside.labels and set_aside.state == "open"
    assert read_marker(set_aside.body) is None
    assert f"Duplicate of #{older.number}" in set_aside.body
    assert adopt_duplicates(tracker, "PLAN") == []  # nothing left to repair
    again = sync_plan(parse_plan(plan_file.read_text(), source="PLAN.md"), tracker, "PLAN")
    assert again.ok and again.writes == 0  # the item has its one issue again, and is current
    assert [c.number for c in again.unchanged if c.id == "T1"] == [older.number]
