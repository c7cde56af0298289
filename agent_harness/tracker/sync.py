"""Mirror a plan into tracker issues, idempotently: create what is new, rewrite what changed.

An issue belongs to an item through a hidden marker in its body carrying the item id, the plan
key and a hash of what the issue should say. Titles never identify issues. One listing pass finds
every marker; unchanged items cost no request; sync never closes, reopens or deletes an issue.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from agent_harness.errors import HarnessError
from agent_harness.plan.model import Plan, WorkItem, plan_in_repo, plan_key_from, shown_path
from agent_harness.secrets.redact import held_secrets, redact
from agent_harness.tracker.markers import (
    MARKER_RE,
    DamagedMarker,
    Marker,
    defuse_markers,
    read_marker,
)
from agent_harness.tracker.protocol import (
    IssueDraft,
    IssueRecord,
    RateLimited,
    RepoNotFound,
    Tracker,
    TrackerError,
    ValidationFailed,
    WriteUncertain,
)
from agent_harness.tracker.renumbering import refuse_renumbering
from agent_harness.tracker.writes import CreateNotConfirmed, create_once

MAX_BODY = 65_536
MAX_TITLE = 256  # GitHub refuses a longer issue or pull request title (422 "title is too long")


def item_title(item: WorkItem) -> tuple[str, bool]:
    """The title of an item's issue and pull request (`T1: Count words`), and whether it had
    to be shortened to GitHub's MAX_TITLE (the issue's body then starts with the whole)."""
    whole = f"{item.id}: {item.title}"
    if len(whole) <= MAX_TITLE:
        return whole, False
    return whole[: MAX_TITLE - 1].rstrip() + "…", True


Progress = Callable[[str, int, int], None]


@dataclass
class ItemChange:
    id: str
    number: int | None
    changes: list[str] = field(default_factory=list)
    # In a dry run, the issue as it would be written (created or updated), for a person to
    # read before anything is posted.
    title: str | None = None
    body: str | None = None


@dataclass
class SyncReport:
    """What a sync did (or, with dry_run, would do)."""

    repo: str
    plan_key: str
    dry_run: bool
    created: list[ItemChange] = field(default_factory=list)
    updated: list[ItemChange] = field(default_factory=list)
    unchanged: list[ItemChange] = field(default_factory=list)
    orphaned: list[ItemChange] = field(default_factory=list)
    skipped_done: list[str] = field(default_factory=list)
    done_but_open: list[ItemChange] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    twins: list[str] = field(default_factory=list)  # items several marked issues claim
    labels_created: list[str] = field(default_factory=list)
    milestones_created: list[str] = field(default_factory=list)
    # Each item's issue once the sync is over: the oldest whose marker names the item, or the
    # one this sync made. What a run needs next, without listing every issue again.
    issue_numbers: dict[str, int] = field(default_factory=dict)
    # Items still to do whose issue a person closed (closed with no status label of ours, as a
    # merge or revert we recorded would have left): not to be worked while it stays closed.
    closed_issues: dict[str, int] = field(default_factory=dict)
    requests: int = 0
    writes: int = 0

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def notices(self) -> list[str]:
        """What a person should act on that is no problem of the sync's own."""
        return [
            f"{change.id} is done in the plan but its issue #{change.number} is open; "
            "sync never closes issues, close it yourself"
            for change in self.done_but_open
        ] + [
            f"{item_id} is to do in the plan but its issue #{number} was closed by a person; "
            "it is not worked while that issue stays closed (reopen it to have it worked)"
            for item_id, number in sorted(self.closed_issues.items())
        ]

    def as_json(self) -> dict[str, Any]:
        def rows(changes: list[ItemChange]) -> list[dict[str, Any]]:
            return [
                {"id": c.id, "issue": c.number, "changes": c.changes}
                | ({"title": c.title, "body": c.body} if c.title is not None else {})
                for c in changes
            ]

        return {
            "repo": self.repo,
            "plan_key": self.plan_key,
            "dry_run": self.dry_run,
            "created": rows(self.created),
            "updated": rows(self.updated),
            "unchanged": rows(self.unchanged),
            "orphaned": rows(self.orphaned),
            "skipped_done": self.skipped_done,
            "done_but_open": rows(self.done_but_open),
            "closed_by_a_person": [
                {"id": item_id, "issue": number}
                for item_id, number in sorted(self.closed_issues.items())
            ],
            "notices": self.notices,
            "labels_created": self.labels_created,
            "milestones_created": self.milestones_created,
            "problems": self.problems,
            "requests": self.requests,
            "writes": self.writes,
        }


class PlanKeyTaken(HarnessError):
    """Another plan file of the repository syncs under this plan key; this one would rewrite
    its issues (two spec-kit features' `tasks.md`, both keyed `tasks`)."""

    exit_code = 3


def refuse_another_plan(
    markers: dict[int, Marker], plan_key: str, repo: str, mine: str, moved_from: str | None = None
) -> None:
    """Refuse to sync the plan file `mine` (its path in the repository) under a key whose
    issues another plan file made: its items would rewrite that plan's issues. `moved_from`:
    the plan's old path, whose issues it takes over. Issues whose marker names no plan file
    (made before markers did, or from a plan outside any repository) cannot be told apart."""
    for number, marker in sorted(markers.items()):
        theirs = marker.source
        if theirs is None or theirs in (mine, moved_from):
            continue
        folder = PurePosixPath(mine).parent.name
        suggested = plan_key_from(folder) if folder else ""
        if suggested in ("", plan_key):
            suggested = plan_key_from(f"{plan_key}-2")
        shown = theirs if len(theirs) <= 120 else theirs[:119] + "…"
        raise PlanKeyTaken(
            f"plan key '{plan_key}' on {repo} is {shown}'s (issue #{number} is its "
            f"{marker.item_id}); syncing {mine} under it would rewrite that plan's issues. Give "
            f"{mine} a plan key of its own (e.g. --plan-key {suggested}); or, if {shown} was "
            f"moved to {mine}, sync it once with --moved-from {shown}"
        )


def refuse_second_key(listing: _Listing, plan_key: str, repo: str, mine: str) -> None:
    """Refuse to sync the plan file `mine` under `plan_key` while its items' issues are open
    under another key, and none under this one yet: a key mistyped or forgotten on one host
    would open every item's issue and pull request again."""
    other = listing.other_keys.get(mine)
    if other is None or listing.markers:
        return
    key, number, item_id = other
    raise PlanKeyTaken(
        f"{mine}'s items already have issues on {repo} under plan key '{key}' (issue "
        f"#{number} is its {item_id}); syncing it under '{plan_key}' would open a second "
        f"issue and pull request for every item. Run it with --plan-key {key}; to start it "
        f"over under '{plan_key}', close '{key}''s issues first"
    )


def refuse_taken_key(
    plan: Plan, tracker: Tracker, plan_key: str, moved_from: str | None = None
) -> None:
    """`refuse_another_plan` ahead of any write (one listing): for a run of several plans,
    which syncs them one after another, and before duplicates are adopted."""
    home = plan_in_repo(plan.source)
    if home is None:
        return
    # The sync's own listing; a damaged marker is the sync's to report, not this look's.
    looked = SyncReport(repo=tracker.repo, plan_key=plan_key, dry_run=True)
    listing = _list_plan_issues(tracker, plan_key, looked)
    refuse_another_plan(listing.markers, plan_key, tracker.repo, home[1], moved_from)
    refuse_second_key(listing, plan_key, tracker.repo, home[1])


class SyncIncomplete(HarnessError):
    """The sync finished with problems; what succeeded was kept."""

    exit_code = 4

    def __init__(self, report: SyncReport) -> None:
        super().__init__(f"{len(report.problems)} problem(s): {report.problems[0]}")
        self.report = report


def _order(items: tuple[WorkItem, ...]) -> list[WorkItem]:
    """Dependencies first, so a dependency's issue number exists before it is linked."""
    by_id = {item.id: item for item in items}
    seen: set[str] = set()
    out: list[WorkItem] = []

    def visit(item: WorkItem) -> None:
        stack = [(item, iter(item.depends_on))]
        seen.add(item.id)
        while stack:
            node, deps = stack[-1]
            for dep in deps:
                if dep in by_id and dep not in seen:
                    seen.add(dep)
                    stack.append((by_id[dep], iter(by_id[dep].depends_on)))
                    break
            else:
                stack.pop()
                out.append(node)

    for item in items:
        if item.id not in seen:
            visit(item)
    return out


def render_issue(
    item: WorkItem,
    plan_key: str,
    source: str,
    numbers: dict[str, int | None],
    in_repo: str | None = None,
) -> tuple[IssueDraft, Marker]:
    """The issue an item should be, and the marker that will identify it. `in_repo`: the plan's
    path in its repository, which the issue names (in place of `source`) and the marker keeps."""
    source = in_repo or shown_path(source)
    body = defuse_markers(item.body.strip())
    body += " -->" if body.rfind("<!--") > body.rfind("-->") else ""  # else GitHub hides the rest
    parts = [body] if body else []
    facts = [
        f"**Success check:** {item.success_check}"
        if item.success_check
        else "**Success check:** none given (this item has no observable check)"
    ]
    if item.depends_on:
        links = []
        for dep in item.depends_on:
            number = numbers.get(dep)
            links.append(f"#{number} ({dep})" if number else dep)
        facts.append("**Depends on:** " + ", ".join(links))
    if item.files:
        facts.append("**Files:** " + ", ".join(f"`{path}`" for path in item.files))
    parts.append("\n".join(f"- {fact}" for fact in facts))
    parts.append(
        f"<sub>Mirrored from `{source}` (plan `{plan_key}`, item {item.id}) by agent-harness. "
        "Edit the plan, not this issue: the next sync rewrites it.</sub>"
    )
    title, shortened = item_title(item)
    if shortened:
        parts.insert(0, f"**{item.id}:** {item.title}")
    # A credential written into the plan (one this process holds, a vendor key, a URL's
    # password) is never posted to the tracker, nor shown by a dry run.
    known = held_secrets()
    text = redact(defuse_markers("\n\n".join(parts)), known)
    title, labels = redact(title, known), tuple(redact(label, known) for label in item.labels)
    digest = hashlib.sha256(
        json.dumps([title, text, sorted(labels), item.milestone]).encode()
    ).hexdigest()[:16]
    marker = Marker(item.id, plan_key, digest, labels, in_repo)
    body = f"{text}\n\n{marker.render()}"
    return IssueDraft(title, body, labels, item.milestone), marker


def _changes(old: IssueRecord, new: IssueDraft) -> list[str]:
    out: list[str] = []
    if old.title != new.title:
        out.append(f"title: {old.title!r} -> {new.title!r}")
    old_body = MARKER_RE.sub("", old.body).strip().splitlines()
    new_body = MARKER_RE.sub("", new.body).strip().splitlines()
    if old_body != new_body:
        added = len(set(new_body) - set(old_body))
        removed = len(set(old_body) - set(new_body))
        out.append(f"body: +{added} -{removed} lines")
    plus = sorted(set(new.labels) - set(old.labels))
    minus = sorted(set(old.labels) - set(new.labels))
    if plus or minus:
        out.append("labels: " + " ".join([f"+{x}" for x in plus] + [f"-{x}" for x in minus]))
    if old.milestone != new.milestone:
        out.append(f"milestone: {old.milestone or '-'} -> {new.milestone or '-'}")
    return [redact(change) for change in out]  # an issue's old title is anyone's text


def sync_plan(
    plan: Plan,
    tracker: Tracker,
    plan_key: str,
    *,
    dry_run: bool = False,
    progress: Progress | None = None,
    moved_from: str | None = None,
) -> SyncReport:
    """Make the tracker's issues say what the plan says. Returns the report; never raises
    for a per-item problem (it is recorded and the rest carries on). Raises PlanKeyTaken,
    before any write, when the key's issues are another plan file's; `moved_from` names the
    plan's old path in its repository, whose issues it takes over. Raises PlanRenumbered,
    before any write, when the plan's tasks moved to other ids."""
    report = SyncReport(repo=tracker.repo, plan_key=plan_key, dry_run=dry_run)
    start_requests, start_writes = tracker.tally.requests, tracker.tally.writes
    step = progress or (lambda _stage, _done, _total: None)
    try:
        _PlanSync(plan, tracker, plan_key, dry_run, report, moved_from).run(step)
    finally:
        report.requests = tracker.tally.requests - start_requests
        report.writes = tracker.tally.writes - start_writes
    return report


@dataclass
class _Listing:
    """What the one listing pass found: this plan's issues and what every issue already uses."""

    by_item: dict[str, list[IssueRecord]] = field(default_factory=dict)
    markers: dict[int, Marker] = field(default_factory=dict)  # by issue number
    labels: set[str] = field(default_factory=set)
    milestones: set[str] = field(default_factory=set)
    # Per plan file, one open issue another plan key made from it: (key, number, item id).
    other_keys: dict[str, tuple[str, int, str]] = field(default_factory=dict)

    def oldest_issue_numbers(self) -> dict[str, int]:
        """Each item's issue: the oldest that claims it (the one `--adopt-duplicate` keeps)."""
        return {item_id: min(i.number for i in found) for item_id, found in self.by_item.items()}

    def sole_issue_numbers(self) -> dict[str, int | None]:
        """The issue of each item that exactly one issue claims; twins get no number."""
        return {
            item_id: found[0].number for item_id, found in self.by_item.items() if len(found) == 1
        }


# The labels reconcile gives an issue to say what became of its item (`agent-harness:merged`).
STATUS_LABEL_PREFIX = "agent-harness:"


def _closed_by_a_person(plan: Plan, listing: _Listing) -> dict[str, int]:
    """Each item, not done in the plan, whose issue is closed with no status label of ours: a
    person closed it (won't do, or done another way), or a pull request of theirs did."""
    closed: dict[str, int] = {}
    for item in plan.items:
        found = listing.by_item.get(item.id)
        if item.done or not found:
            continue
        issue = min(found, key=lambda record: record.number)
        ours = any(label.lower().startswith(STATUS_LABEL_PREFIX) for label in issue.labels)
        if issue.state == "closed" and not ours:
            closed[item.id] = issue.number
    return closed


def _list_plan_issues(tracker: Tracker, plan_key: str, report: SyncReport) -> _Listing:
    """Read every issue once, keeping the ones this plan's markers claim."""
    listing = _Listing()
    for issue in tracker.list_issues():
        listing.labels.update(issue.labels)
        if issue.milestone:
            listing.milestones.add(issue.milestone)
        try:
            marker = read_marker(issue.body)
        except DamagedMarker as exc:
            report.problems.append(f"issue #{issue.number}: {exc}; left alone, fix it by hand")
            continue
        theirs = marker is not None and marker.plan_key != plan_key
        if theirs and marker is not None and marker.source and issue.state == "open":
            listing.other_keys.setdefault(
                marker.source, (marker.plan_key, issue.number, marker.item_id)
            )
        if marker is None or marker.plan_key != plan_key:
            continue
        listing.by_item.setdefault(marker.item_id, []).append(issue)
        listing.markers[issue.number] = marker
    return listing


def _report_orphans_and_twins(listing: _Listing, plan: Plan, report: SyncReport) -> None:
    """Issues whose item left the plan, and items claimed by more than one issue."""
    plan_ids = {item.id for item in plan.items}
    for item_id, issues in sorted(listing.by_item.items()):
        if item_id not in plan_ids:
            report.orphaned.extend(ItemChange(item_id, issue.number) for issue in issues)
        if len(issues) > 1:
            report.twins.append(item_id)
            listed = ", ".join(f"#{issue.number}" for issue in issues)
            report.problems.append(
                f"{item_id}: issues {listed} carry the same marker; none is written (a sync "
                "with --adopt-duplicate keeps the oldest and labels the others 'duplicate')"
            )


class _PlanSync:
    """One sync of one plan: the tracker, the report it fills, and the issue numbers learned
    so far (a dependency is created before its dependants, so they can link to it)."""

    def __init__(
        self,
        plan: Plan,
        tracker: Tracker,
        plan_key: str,
        dry_run: bool,
        report: SyncReport,
        moved_from: str | None = None,
    ) -> None:
        self.plan = plan
        self.tracker = tracker
        self.plan_key = plan_key
        self.dry_run = dry_run
        self.report = report
        self.numbers: dict[str, int | None] = {}
        self.uncertain = False  # some create got no clear answer: see the tracker's listing
        self.unconfirmed: dict[str, str] = {}  # item -> the problem its unconfirmed create made
        self.home = plan_in_repo(plan.source)  # the plan's work tree, and its path there
        self.moved_from = moved_from

    def run(self, step: Progress) -> None:
        step("listing issues", 0, len(self.plan.items))
        listing = _list_plan_issues(self.tracker, self.plan_key, self.report)
        self._refuse_another_plans_key(listing)
        refuse_renumbering(self.plan, listing.by_item, self.tracker.repo)
        _report_orphans_and_twins(listing, self.plan, self.report)
        self.report.issue_numbers = listing.oldest_issue_numbers()
        self.numbers = listing.sole_issue_numbers()
        self.report.closed_issues = _closed_by_a_person(self.plan, listing)
        # A done item is mirrored only while it already has an issue to keep up to date.
        active = [
            item for item in self.plan.items if not (item.done and item.id not in listing.by_item)
        ]
        kept = {item.id for item in active}  # by id: comparing items was quadratic in the plan
        self.report.skipped_done = [item.id for item in self.plan.items if item.id not in kept]
        # The plan says done, the tracker says open: said out loud, never settled by sync.
        self.report.done_but_open = [
            ItemChange(item.id, issue.number)
            for item in self.plan.items
            if item.done
            for issue in listing.by_item.get(item.id, [])
            if issue.state == "open"
        ]
        # Labels and milestones already on some issue exist: listing them again would cost requests.
        self._create_missing_labels(active, listing.labels)
        self._create_missing_milestones(active, listing.milestones)
        ordered = _order(tuple(active))
        for index, item in enumerate(ordered, start=1):
            step("syncing", index, len(ordered))
            issues = listing.by_item.get(item.id, [])
            if len(issues) > 1:
                continue  # already reported: writing either twin could be the wrong one
            found = (issues[0], listing.markers[issues[0].number]) if issues else None
            self._sync_item(item, found)
        if self.uncertain:
            self._relist_after_uncertain_creates()

    def _relist_after_uncertain_creates(self) -> None:
        """A create whose answer was lost may have landed although every try looked failed, or
        landed twice when a look missed it: only the tracker's own listing says which issue is
        each item's (the oldest), and whether a twin was made here."""
        scratch = SyncReport(self.report.repo, self.plan_key, self.dry_run)
        try:
            listing = _list_plan_issues(self.tracker, self.plan_key, scratch)
        except TrackerError as exc:  # every write is over: nothing is left for an error to stop
            self.report.problems.append(
                f"listing the issues again, after a create got no clear answer: {exc.message}; "
                "the next sync tells which issue is each item's"
            )
            return
        _report_orphans_and_twins(listing, self.plan, scratch)
        found = listing.oldest_issue_numbers()
        # A listing can lag behind writes too: what it does not show, the answers said.
        self.report.issue_numbers.update(found)
        for item_id, problem in self.unconfirmed.items():
            if item_id in found:  # it landed after all
                self.report.problems.remove(problem)
                self.report.created.append(ItemChange(item_id, found[item_id]))
        known = set(self.report.problems)
        self.report.problems.extend(p for p in scratch.problems if p not in known)

    def _refuse_another_plans_key(self, listing: _Listing) -> None:
        if self.home is None:
            return
        refuse_another_plan(
            listing.markers, self.plan_key, self.tracker.repo, self.home[1], self.moved_from
        )
        refuse_second_key(listing, self.plan_key, self.tracker.repo, self.home[1])

    def _create_missing_labels(self, active: list[WorkItem], in_use: set[str]) -> None:
        # GitHub compares label names without regard to case.
        in_use_folded = {label.lower() for label in in_use}
        named = {redact(label) for item in active for label in item.labels}  # as render_issue
        wanted = sorted(label for label in named if label.lower() not in in_use_folded)
        if not wanted:
            return
        have = {name.lower() for name in self.tracker.list_labels()}
        for label in wanted:
            if label.lower() in have:
                continue
            try:
                if not self.dry_run:
                    self.tracker.create_label(label, _label_colour(label))
                self.report.labels_created.append(label)
            except TrackerError as exc:
                self.report.problems.append(f"label '{label}': {exc.message}")

    def _create_missing_milestones(self, active: list[WorkItem], in_use: set[str]) -> None:
        wanted = sorted({item.milestone for item in active if item.milestone} - in_use)
        if not wanted:
            return
        have = self.tracker.list_milestones()
        for title in wanted:
            if title in have:
                continue
            try:
                if not self.dry_run:
                    self.tracker.create_milestone(title)
                self.report.milestones_created.append(title)
            except TrackerError as exc:
                self.report.problems.append(f"milestone '{title}': {exc.message}")

    def _sync_item(self, item: WorkItem, found: tuple[IssueRecord, Marker] | None) -> None:
        """Create or rewrite one item's issue; a refusal for this item is recorded, while one
        that would refuse every item (auth, a missing repository, the rate limit) stops the sync."""
        in_repo = self.home[1] if self.home else None
        draft, marker = render_issue(item, self.plan_key, self.plan.source, self.numbers, in_repo)
        if len(draft.body) > MAX_BODY:
            self.report.problems.append(
                f"{item.id}: issue body would be {len(draft.body)} characters, over GitHub's "
                f"{MAX_BODY}; shorten the item (line {item.line})"
            )
            return
        try:
            if found is None:
                self._create(item, draft, marker)
            else:
                self._update(item, *found, draft, marker)
        except ValidationFailed as exc:
            field_note = f" (field '{exc.field}')" if exc.field else ""
            self.report.problems.append(f"{item.id}: {exc.message}{field_note}")
        except TrackerError as exc:
            if exc.exit_code == 2 or isinstance(exc, RepoNotFound | RateLimited):
                raise
            self.report.problems.append(f"{item.id}: {exc.message}")

    def _create(self, item: WorkItem, draft: IssueDraft, marker: Marker) -> None:
        if self.dry_run:
            shown = ItemChange(item.id, None, ["new issue"], draft.title, draft.body)
            self.report.created.append(shown)
            self.numbers.setdefault(item.id, None)
            return

        def send() -> IssueRecord:
            try:
                return self.tracker.create_issue(draft)
            except WriteUncertain:
                self.uncertain = True
                raise

        try:
            record = _create_once(self.tracker, send, marker, self.plan_key)
        except CreateNotConfirmed as exc:
            self.unconfirmed[item.id] = f"{item.id}: {exc.message}"
            self.report.problems.append(self.unconfirmed[item.id])
            return
        self.numbers[item.id] = record.number
        self.report.issue_numbers.setdefault(item.id, record.number)
        self.report.created.append(ItemChange(item.id, record.number))

    def _update(
        self, item: WorkItem, issue: IssueRecord, old: Marker, draft: IssueDraft, marker: Marker
    ) -> None:
        # An issue whose marker does not yet name its plan file is rewritten once to name it
        # (one write), so another plan file under the key is refused from then on.
        if old.hash == marker.hash and (marker.source is None or old.source == marker.source):
            self.report.unchanged.append(ItemChange(item.id, issue.number))
            return
        # Labels a person added stay; labels the plan dropped go.
        keep = [x for x in issue.labels if x not in old.labels and x not in draft.labels]
        draft = IssueDraft(draft.title, draft.body, (*draft.labels, *keep), draft.milestone)
        said = _changes(issue, draft) or [f"marker: names {marker.source}"]
        change = ItemChange(item.id, issue.number, said)
        if self.dry_run:
            change.title, change.body = draft.title, draft.body
        else:
            self.tracker.update_issue(issue.number, draft)
        self.report.updated.append(change)


def _create_once(
    tracker: Tracker,
    send: Callable[[], IssueRecord],
    marker: Marker,
    plan_key: str,
) -> IssueRecord:
    """Create an issue; if the write may have landed, look (after its in-flight window) before
    writing again, and retry a burst of server errors with a growing, jittered backoff."""

    def find() -> IssueRecord | None:
        for issue in tracker.recent_issues():
            try:
                found = read_marker(issue.body)
            except DamagedMarker:
                continue
            if found and found.plan_key == plan_key and found.item_id == marker.item_id:
                return issue
        return None

    return create_once(
        send,
        find,
        f"the issue of {marker.item_id}",
        tracker.write_pace,
    )


def _label_colour(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()[:6]
