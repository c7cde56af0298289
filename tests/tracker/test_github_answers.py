"""The tracker against answers GitHub really gives and the embedded forge does not on its own:
each is injected whole (status, headers, body) as GitHub's documentation and its recorded
responses show them, and the tracker is driven through PyGithub over loopback HTTP."""

from __future__ import annotations

import pytest

from agent_harness.forge import FaultKind
from agent_harness.plan.markdown import parse_plan
from agent_harness.tracker.protocol import (
    IssueDraft,
    RepoMoved,
    TrackerError,
    ValidationFailed,
)
from agent_harness.tracker.sync import sync_plan
from tests.tracker.conftest import REPO, Scene

pytestmark = pytest.mark.integration

DOCS = "https://docs.github.com/rest"


def _reply(scene: Scene, method: str, path: str, status: int, **answer: object) -> None:
    scene.rf.forge.faults.inject(FaultKind.REPLY, method, path, status=status, **answer)


def _draft() -> IssueDraft:
    return IssueDraft(title="T1: a title", body="body", labels=())


class Sleeps(list[float]):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


@pytest.mark.parametrize(
    ("status", "message"),
    [
        (
            403,
            "You have triggered an abuse detection mechanism. Please wait a few minutes "
            "before you try again.",
        ),
        (429, "Too Many Requests"),
    ],
)
def test_a_refusal_that_says_when_to_come_back_is_waited_out_whatever_its_words(
    scene: Scene, status: int, message: str
) -> None:
    # GitHub's docs: a 403 or 429 with `retry-after` means wait that long, whatever the message
    # says. The abuse wording was read as "permission denied" and the 429 as a plain failure.
    _reply(
        scene,
        "GET",
        "*/issues",
        status,
        headers={"retry-after": "41"},
        body={"message": message, "documentation_url": DOCS},
    )
    sleeps = Sleeps()
    tracker = scene.tracker()
    tracker._sleep = sleeps  # the tracker's own sleep, so the wait is seen and not spent
    assert tracker.list_issues() == []
    assert sleeps and sleeps[0] >= 41


def test_githubs_reason_for_a_422_is_kept_in_the_message(scene: Scene) -> None:
    _reply(
        scene,
        "POST",
        "*/issues",
        422,
        body={
            "message": "Validation Failed",
            "errors": [
                {
                    "resource": "PullRequest",
                    "code": "custom",
                    "message": "A pull request already exists for octo:feature.",
                }
            ],
            "documentation_url": DOCS,
        },
    )
    with pytest.raises(ValidationFailed, match="A pull request already exists for octo:feature"):
        scene.tracker().create_issue(_draft())
    _reply(
        scene,
        "POST",
        "*/issues",
        422,
        body={"message": "Validation Failed", "errors": ["No commits between main and x"]},
    )
    with pytest.raises(ValidationFailed, match="No commits between main and x"):
        scene.tracker().create_issue(_draft())


@pytest.mark.parametrize(
    ("method", "path", "call"),
    [
        ("POST", "*/issues", lambda t: t.create_issue(_draft())),
        ("PUT", "*/labels", lambda t: t.set_labels(1, ("bug",))),
        ("POST", "*/comments", lambda t: t.create_comment(1, "hello")),
    ],
    ids=["create_issue", "set_labels", "create_comment"],
)
def test_a_write_answered_307_is_no_success(scene: Scene, method: str, path: str, call) -> None:  # type: ignore[no-untyped-def]
    # GitHub answers writes to a renamed repository's old name with 307: nothing was applied.
    # Labels were taken as set, and a create failed with `KeyError: 'number'` (exit 70).
    scene.issue("T9")
    moved = f"{scene.rf.server.api_url}/repositories/1/issues"
    _reply(
        scene,
        method,
        path,
        307,
        headers={"location": moved},
        body={"message": "Temporary Redirect", "url": moved, "documentation_url": DOCS},
    )
    with pytest.raises(TrackerError, match="307"):
        call(scene.tracker())


def test_an_answer_that_is_not_the_record_asked_for_is_a_tracker_error(scene: Scene) -> None:
    # A proxy's HTML page with a 200, or an empty object: not `KeyError: 'number'` (exit 70).
    _reply(scene, "GET", "*/pulls/*", 200, raw="<html><body>Sign in</body></html>")
    with pytest.raises(TrackerError, match=r"answer is not JSON .*Sign in"):
        scene.tracker().get_pull(1)
    _reply(scene, "GET", "*/issues/*", 200, body={})
    with pytest.raises(TrackerError, match="not a readable issue"):
        scene.tracker().get_issue(1)


def test_a_renamed_repository_is_refused_by_its_old_name_not_read_through_a_redirect(
    scene: Scene,
) -> None:
    # GitHub answers a renamed repository's old name with 301 to /repositories/<id>. PyGithub
    # follows it without the query, so `state=all` and `page=2` were lost: closed issues went
    # unseen (a sync planned them again) and merged pull requests too.
    old = "octo/old-name"
    target = f"{scene.rf.server.api_url}/repos/{REPO}"
    _reply(
        scene,
        "GET",
        f"/repos/{old}",
        301,
        headers={"location": target},
        body={"message": "Moved Permanently", "url": target, "documentation_url": DOCS},
    )
    tracker = scene.tracker()
    tracker.repo = old
    with pytest.raises(RepoMoved, match=f"{old} is now {REPO}.*--repo {REPO}"):
        tracker.ensure_repo()
    assert sync_plan(parse_plan("- [ ] T1 One\n", source="PLAN.md"), scene.tracker(), "PLAN").ok


def _run(name: str, conclusion: str) -> dict[str, object]:
    return {"id": abs(hash(name)) % 10**9, "name": name, "status": "completed",
            "conclusion": conclusion, "output": {"title": name, "summary": conclusion}}  # fmt: skip


def test_checks_and_statuses_past_the_first_page_are_read(scene: Scene) -> None:
    # 120 check runs with the failure at #110, and 35 statuses (GitHub's own page is 30) with
    # a failure at #32: one page each was read, and the head was judged green.
    number = scene.open_pr("T1")
    api = scene.rf.server.api_url
    runs = [_run(f"job-{i}", "failure" if i == 110 else "success") for i in range(120)]
    link = f'<{api}/next?page=2>; rel="next", <{api}/next?page=2>; rel="last"'
    _reply(scene, "GET", "*/check-runs", 200, headers={"link": link},
           body={"total_count": 120, "check_runs": runs[:100]})  # fmt: skip
    _reply(scene, "GET", "*/check-runs", 200, body={"total_count": 120, "check_runs": runs[100:]})
    statuses = [
        {"context": f"ci/{i}", "state": "failure" if i == 32 else "success", "description": ""}
        for i in range(35)
    ]
    _reply(scene, "GET", "*/status", 200, headers={"link": link},
           body={"state": "failure", "total_count": 35, "statuses": statuses[:30]})  # fmt: skip
    _reply(scene, "GET", "*/status", 200,
           body={"state": "failure", "total_count": 35, "statuses": statuses[30:]})  # fmt: skip
    feedback = scene.tracker().pull_feedback(number)
    assert len(feedback.checks) == 155
    assert [name for name, _, _ in feedback.failing()] == ["job-110", "ci/32"]
    assert not feedback.passing()


def test_a_request_for_changes_the_same_reviewer_then_approved_asks_for_nothing(
    scene: Scene,
) -> None:
    number = scene.open_pr("T1")
    tracker = scene.tracker()
    head = tracker.get_pull(number).head_sha

    def review(rid: int, state: str, login: str | None) -> dict[str, object]:
        user = {"login": login, "id": rid, "type": "User"} if login else None
        return {"id": rid, "user": user, "body": f"{state} by {login}", "state": state,
                "commit_id": head, "submitted_at": f"2026-12-0{rid}T10:00:00Z"}  # fmt: skip

    said = [
        review(1, "CHANGES_REQUESTED", "alice"),
        review(2, "APPROVED", "alice"),  # alice changed her mind: her request no longer stands
        review(3, "CHANGES_REQUESTED", "bob"),
        review(4, "COMMENTED", "bob"),  # a comment leaves bob's request standing
        review(5, "CHANGES_REQUESTED", None),  # a deleted account's request stands alone
        review(6, "APPROVED", "carol"),
        review(7, "CHANGES_REQUESTED", "carol"),  # carol's approval no longer stands
    ]
    _reply(scene, "GET", "*/reviews", 200, body=said)
    feedback = tracker.pull_feedback(number)
    asked = [rid for rid, state, _, _ in feedback.reviews if state == "CHANGES_REQUESTED"]
    assert asked == [3, 5, 7]
    assert [rid for rid, state, _, _ in feedback.reviews if state == "APPROVED"] == [2]


def test_a_base_branch_that_is_gone_is_no_missing_repository(scene: Scene) -> None:
    # A pull request's base deleted by a person: the watch's look at each base answered
    # "octo/app: not found ... check the name", and the whole pass ended there.
    tracker = scene.tracker()
    assert tracker.branch_head("feature-base").items == ()
    [main] = tracker.branch_head("main").items
    assert len(main) == 40


def test_a_repository_is_made_for_the_token_user_whatever_the_case_of_the_name(
    scene: Scene,
) -> None:
    # GitHub's logins ignore case: `--repo OCTO/new` for the user `octo` was sent to
    # /orgs/OCTO/repos, which answered 404, and the run said the repository was not found.
    login = scene.tracker()._call("GET", "/user", "get_user")[1]["login"]
    tracker = scene.tracker()
    tracker.repo = f"{login.upper()}/new-app"
    tracker.ensure_repo(create=True)
    assert tracker.repo == f"{login}/new-app"


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (502, ["upstream", "down"]),
        (503, "maintenance"),
        (403, {"message": {"text": "nested"}}),
        (422, {"message": "Validation Failed", "errors": {"field": "title"}}),
        (422, {"message": "Validation Failed", "errors": 7}),
    ],
    ids=["list", "string", "nested-message", "errors-object", "errors-number"],
)
def test_an_error_answer_of_any_json_shape_is_a_tracker_error(
    scene: Scene, status: int, body: object
) -> None:
    # Each escaped as AttributeError, KeyError or TypeError from the error's own reading.
    _reply(scene, "POST", "*/issues", status, body=body, count=None)
    tracker = scene.tracker()
    tracker._sleep = Sleeps()
    with pytest.raises(TrackerError):
        tracker.create_issue(_draft())


def test_a_check_run_without_a_name_is_a_tracker_error(scene: Scene) -> None:
    number = scene.open_pr("T1")
    _reply(scene, "GET", "*/check-runs", 200, body={"total_count": 1, "check_runs": [{"id": 1}]})
    with pytest.raises(TrackerError, match=r"pull request #.* is not readable .*'name'"):
        scene.tracker().pull_feedback(number)


def test_half_a_surrogate_pair_in_an_answer_is_read_as_a_replacement(scene: Scene) -> None:
    # Read with json.loads, a lone `\ud800` in a title went on into the records, and whatever
    # wrote that title as UTF-8 later failed.
    number = scene.issue("T1")
    said = f'{{"number": {number}, "title": "T1: a \\ud800 b", "body": "", "state": "open"}}'
    _reply(scene, "GET", "*/issues/*", 200, raw=said)
    issue = scene.tracker().get_issue(number)
    assert issue.title == "T1: a \ufffd b"
    issue.title.encode("utf-8")
