"""Reconcile: pull merged / closed / reverted back from the tracker into the queue and the issues.

Markers make the tracker enough: the PR marker names item and issue, the issue's status label says
what was recorded, our comment's marker which transition it announced. With a store, a high-water
mark and ETags make cost grow with change; a change is live if it landed and nothing live undid it.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_harness.errors import UNREADABLE_JSON, HarnessError, read_json
from agent_harness.tracker.markers import DamagedMarker, read_marker, read_pull_marker
from agent_harness.tracker.protocol import (
    AuthError,
    IssueRecord,
    PullRecord,
    RateLimited,
    RepoNotFound,
    Tracker,
    TrackerError,
    WriteUncertain,
)
from agent_harness.tracker.sync import STATUS_LABEL_PREFIX

if TYPE_CHECKING:
    from agent_harness.git.worktrees import WorkRepo
    from agent_harness.store.database import Store

from agent_harness.tracker.reverts import RevertGraph, describe_revoker

LABEL_PREFIX = STATUS_LABEL_PREFIX
STATES = ("merged", "closed", "reverted")
COMMENT_RE = re.compile(r"<!--\s*agent-harness-reconcile\s+(\{.*?\})\s*-->", re.DOTALL)
REVERTS_RE = re.compile(r"\bReverts\s+([\w.-]+/[\w.-]+)#(\d+)\b")
REVERT_COMMIT_RE = re.compile(r"This reverts commit ([0-9a-fA-F]{7,40})\b")
MEMORY_VERSION = 1


def iso(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# How much earlier than the oldest watched merge the commits listing starts.
SINCE_MARGIN_S = 3600.0


def _earlier(stamp: str, seconds: float) -> str:
    """`stamp` (ISO 8601, as GitHub writes times) moved `seconds` earlier; as it is when it
    does not read as a time."""
    try:
        moment = datetime.fromisoformat(stamp)
    except ValueError:
        return stamp
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return iso(max(0.0, moment.timestamp() - seconds))


def status_label(state: str) -> str:
    return f"{LABEL_PREFIX}{state}"


@dataclass(frozen=True)
class PullFacts:
    """What reconcile keeps of one pull request: ours (marker) or a Revert-button PR."""

    number: int
    state: str  # open / closed / merged
    base: str
    updated_at: str
    merged_at: str | None = None
    merge_sha: str | None = None
    head_sha: str | None = None
    item: str | None = None
    plan: str | None = None
    issue: int | None = None
    reverts: int | None = None  # for a revert PR: the number of the PR it undoes
    reverts_repo: str | None = None  # ... and the repository its body names
    labels: tuple[str, ...] | None = None  # None: not known (a memory from before they were)

    @classmethod
    def of(cls, pull: PullRecord) -> PullFacts:
        marker = read_pull_marker(pull.body)
        reverts, reverts_repo = None, None
        if marker is None and pull.title.startswith('Revert "'):
            found = REVERTS_RE.search(pull.body)
            if found:
                reverts, reverts_repo = int(found.group(2)), found.group(1)
        return cls(
            number=pull.number,
            state="merged" if pull.merged else pull.state,
            base=pull.base_ref,
            updated_at=pull.updated_at,
            merged_at=pull.merged_at,
            merge_sha=pull.merge_commit_sha,
            head_sha=pull.head_sha or None,
            item=marker.item_id if marker else None,
            plan=marker.plan_key if marker else None,
            issue=marker.issue if marker else None,
            reverts=reverts,
            reverts_repo=reverts_repo,
            labels=pull.labels,
        )

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PullFacts:
        if data.get("labels") is not None:
            data = {**data, "labels": tuple(data["labels"])}
        return cls(**data)


@dataclass
class Memory:
    """What a run with a store remembers for the next one (kept in the store's meta table)."""

    high_water: str | None = None
    pulls_etag: str | None = None
    default_branch: str | None = None
    pulls: dict[int, PullFacts] = field(default_factory=dict)
    recorded: dict[str, str] = field(default_factory=dict)  # plan/item -> last transition key
    commits_since: str | None = None
    commits_etag: str | None = None
    commit_shas: list[str] = field(default_factory=list)
    revert_edges: list[tuple[str, str]] = field(default_factory=list)

    def dumps(self) -> str:
        return json.dumps(
            {
                "version": MEMORY_VERSION,
                "high_water": self.high_water,
                "pulls_etag": self.pulls_etag,
                "default_branch": self.default_branch,
                "pulls": [p.to_json() for p in self.pulls.values()],
                "recorded": self.recorded,
                "commits_since": self.commits_since,
                "commits_etag": self.commits_etag,
                "commit_shas": self.commit_shas,
                "revert_edges": self.revert_edges,
            }
        )

    @classmethod
    def loads(cls, text: str | None) -> Memory | None:
        if not text:
            return None
        try:
            data = read_json(text)
            if data.get("version") != MEMORY_VERSION:
                return None  # an older layout: start over from the tracker, which is the truth
            pulls = [PullFacts.from_json(p) for p in data["pulls"]]
            return cls(
                high_water=data["high_water"],
                pulls_etag=data["pulls_etag"],
                default_branch=data["default_branch"],
                pulls={p.number: p for p in pulls},
                recorded=dict(data["recorded"]),
                commits_since=data["commits_since"],
                commits_etag=data["commits_etag"],
                commit_shas=list(data["commit_shas"]),
                revert_edges=[(a, b) for a, b in data["revert_edges"]],
            )
        except (ValueError, KeyError, TypeError):
            return None


@dataclass
class Transition:
    """One change of an item's outcome, with the evidence, and what was done about it."""

    item: str
    plan: str
    state: str  # merged / closed / reverted
    key: str  # identifies the transition, so it is announced once
    pr: int
    issue: int | None
    evidence: dict[str, Any]
    done: list[str] = field(default_factory=list)

    @property
    def slot(self) -> str:
        return f"{self.plan}/{self.item}"

    def as_json(self) -> dict[str, Any]:
        return {
            "item": self.item,
            "plan": self.plan,
            "state": self.state,
            "pr": self.pr,
            "issue": self.issue,
            "key": self.key,
            "evidence": self.evidence,
            "done": self.done,
        }


@dataclass
class ReconcileReport:
    """What a reconcile found and did (with dry_run: would do)."""

    repo: str
    dry_run: bool
    stateless: bool
    transitions: list[Transition] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    tracked: int = 0
    pulls_listed: int = 0
    commits_read: int = 0
    unknown_reverts: int = 0
    cleaned: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    requests: int = 0
    writes: int = 0
    changed_open: list[int] = field(default_factory=list)  # our open PRs updated since last

    @property
    def ok(self) -> bool:
        return not self.problems

    def as_json(self) -> dict[str, Any]:
        return {
            "repo": self.repo,
            "dry_run": self.dry_run,
            "stateless": self.stateless,
            "transitions": [t.as_json() for t in self.transitions],
            "problems": self.problems,
            "notes": self.notes,
            "tracked": self.tracked,
            "pulls_listed": self.pulls_listed,
            "commits_read": self.commits_read,
            "unknown_reverts": self.unknown_reverts,
            "worktrees_removed": self.cleaned,
            "worktrees_kept": self.kept,
            "requests": self.requests,
            "writes": self.writes,
        }


class ReconcileIncomplete(HarnessError):
    """Reconcile finished, but something needs a person."""

    exit_code = 4


@dataclass(frozen=True)
class Outcome:
    state: str
    key: str
    evidence: dict[str, Any]


class Reconciler:
    """One reconcile run over one repository."""

    def __init__(
        self,
        tracker: Tracker,
        *,
        store: Store | None = None,
        plan_key: str | None = None,
        dry_run: bool = False,
        requeue_reverted: bool = False,
        revert_window_days: int = 30,
        work: WorkRepo | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.tracker = tracker
        self.store = store
        self.plan_key = plan_key
        self.dry_run = dry_run
        self.requeue_reverted = requeue_reverted
        self.window = timedelta(days=revert_window_days)
        self.work = work
        self.clock = clock
        self.meta_key = f"reconcile:{tracker.repo}"
        loaded = Memory.loads(store.get_meta(self.meta_key)) if store is not None else None
        self.memory = loaded or Memory()
        self.report = ReconcileReport(tracker.repo, dry_run, stateless=loaded is None)
        self._issues: dict[int, IssueRecord] | None = None

    # -- reading ----------------------------------------------------------------------------
    def _read_pulls(self) -> None:
        memory = self.memory
        listing = self.tracker.pulls_by_update(memory.high_water, memory.pulls_etag)
        if listing.not_modified:
            return
        memory.pulls_etag = listing.etag
        self.report.pulls_listed = len(listing.items)
        for pull in listing.items:
            facts = PullFacts.of(pull)
            if facts.item is not None or facts.reverts is not None:
                memory.pulls[pull.number] = facts
            if facts.item is not None and facts.state == "open":
                self.report.changed_open.append(pull.number)
            if memory.high_water is None or pull.updated_at > memory.high_water:
                memory.high_water = pull.updated_at
        for facts in list(memory.pulls.values()):
            if facts.reverts is not None and facts.state == "merged":
                self._check_revert_target(facts)

    def _check_revert_target(self, revert: PullFacts) -> None:
        assert revert.reverts is not None
        target = revert.reverts
        if target in self.memory.pulls:
            return
        named = revert.reverts_repo or self.tracker.repo
        if named.lower() != self.tracker.repo.lower():
            self.report.problems.append(
                f"revert PR #{revert.number} names {named}#{target}, another repository "
                "(moved?); ignored"
            )
            return
        try:
            pull = self.tracker.get_pull(target)
        except RepoNotFound:
            self.report.problems.append(
                f"revert PR #{revert.number} names #{target}, which is not a pull request here "
                "(deleted, or moved to another repository)"
            )
            return
        # Remembered even when it is not ours, so it is not fetched again on every run.
        self.memory.pulls[target] = PullFacts.of(pull)

    def _default_branch(self) -> str:
        if self.memory.default_branch is None:
            self.memory.default_branch = self.tracker.repo_info().default_branch
        return self.memory.default_branch

    def _read_commits(self, ours: list[PullFacts]) -> set[str]:
        """SHAs on the default branch since the oldest merge still watched; records reverts."""
        memory = self.memory
        branch = self._default_branch()
        cutoff = iso(self.clock() - self.window.total_seconds())
        watched = [
            p.merged_at for p in ours if p.merged_at and p.merged_at >= cutoff and p.base == branch
        ]
        if not watched:
            memory.commits_since, memory.commits_etag = None, None
            memory.commit_shas, memory.revert_edges = [], []
            return set()
        # An hour early: a merge commit may be stamped a little before `merged_at`, and the
        # listing filters by the commit's own date.
        since = _earlier(min(watched), SINCE_MARGIN_S)
        etag = memory.commits_etag if memory.commits_since == since else None
        listing = self.tracker.commits_since(branch, since, etag)
        if not listing.not_modified:
            self.report.commits_read = len(listing.items)
            memory.commits_since, memory.commits_etag = since, listing.etag
            memory.commit_shas = [c.sha for c in listing.items]
            memory.revert_edges = [
                (c.sha, m.group(1).lower())
                for c in listing.items
                for m in REVERT_COMMIT_RE.finditer(c.message)
            ]
        return set(memory.commit_shas)

    # -- deciding ---------------------------------------------------------------------------
    def _outcomes(self) -> dict[tuple[str, str], tuple[PullFacts, Outcome]]:
        pulls = self.memory.pulls
        ours = [
            p
            for p in pulls.values()
            if p.item is not None and (self.plan_key is None or p.plan == self.plan_key)
        ]
        self.report.tracked = len(ours)
        shas = self._read_commits(ours)
        graph = RevertGraph(pulls, shas)
        for pull in pulls.values():
            if pull.reverts is not None and pull.state == "merged":
                graph.add(f"pr:{pull.number}", f"pr:{pull.reverts}")
        for revert_sha, target_sha in self.memory.revert_edges:
            target = graph.node_of(target_sha)
            if target is None:
                self.report.unknown_reverts += 1
                continue
            graph.add(graph.node_of(revert_sha) or f"c:{revert_sha}", target)
        branch = self._default_branch()
        cutoff = iso(self.clock() - self.window.total_seconds())
        # The newest pull request of an item decides, but a merged one outranks later closed ones.
        chosen: dict[tuple[str, str], PullFacts] = {}
        for pull in sorted(ours, key=lambda p: p.number):
            assert pull.item is not None
            held = chosen.get((pull.plan or "", pull.item))
            if held is None or pull.state != "closed" or held.state != "merged":
                chosen[(pull.plan or "", pull.item)] = pull
        out: dict[tuple[str, str], tuple[PullFacts, Outcome]] = {}
        for (plan, item), pull in chosen.items():
            evidence: dict[str, Any] = {"pr": pull.number}
            if pull.state == "open":
                continue
            if pull.state == "closed":
                out[plan, item] = (pull, Outcome("closed", f"closed:{pull.number}", evidence))
                continue
            evidence |= {"sha": pull.merge_sha, "merged_at": pull.merged_at}
            node = f"pr:{pull.number}"
            watched = bool(pull.merged_at and pull.merged_at >= cutoff and pull.base == branch)
            # A merged revert pull request stands on its own: the commits listing is not needed
            # to see it, so it is looked for first.
            revoker = graph.live_revoker(node)
            if revoker is not None:
                evidence |= describe_revoker(revoker)
                out[plan, item] = (pull, Outcome("reverted", f"reverted:{revoker}", evidence))
                continue
            if watched and shas and pull.merge_sha and pull.merge_sha not in shas:
                self.report.problems.append(
                    f"{item}: merge commit {pull.merge_sha[:12]} of PR #{pull.number} is not "
                    f"among the commits on {branch} since it merged (force-pushed, or merged "
                    "as an older commit?); not marked reverted"
                )
            # Revokers none of which stands: reverted once, and that revert itself undone.
            undone = sorted(graph.revokers.get(node, []))
            key = f"merged:{pull.merge_sha}"
            if undone:  # reverted once, and that revert was itself undone: merged again
                key += ":after:" + ",".join(undone)
                evidence["reapplied_after"] = [describe_revoker(n) for n in undone]
            out[plan, item] = (pull, Outcome("merged", key, evidence))
        return out

    def _issue_listing(self) -> dict[int, IssueRecord]:
        if self._issues is None:
            self._issues = {i.number: i for i in self.tracker.list_issues()}
        return self._issues

    def _already(self, slot: str, pull: PullFacts, outcome: Outcome) -> bool:
        if not self.report.stateless:
            return self.memory.recorded.get(slot) == outcome.key
        # No memory: the status label on the issue says what was recorded last, but only for
        # the issue. A queue we were given must itself be in that state, or it still has to move.
        if self.store is not None and pull.item and pull.plan:
            from agent_harness.queue import items as work

            try:
                record = work.get_item(self.store, f"{self.tracker.repo}:{pull.plan}", pull.item)
            except work.UnknownItem:
                record = None
            if record is not None and str(record.state) != outcome.state:
                return False
        if pull.issue is None:
            return False
        issue = self._issue_listing().get(pull.issue)
        if issue is None:
            return False
        if status_label(outcome.state) in {label.lower() for label in issue.labels}:
            self.memory.recorded[slot] = outcome.key
            return True
        return False

    # -- writing ----------------------------------------------------------------------------
    def _comment(self, transition: Transition) -> str:
        ev = transition.evidence
        pr = f"#{transition.pr}"
        if transition.state == "merged" and "reapplied_after" in ev:
            text = f"The revert of {pr} was itself undone; **{transition.item}** is merged again."
        elif transition.state == "merged":
            sha = str(ev.get("sha") or "")[:12]
            text = f"{pr} was merged ({sha}); **{transition.item}** is done."
        elif transition.state == "closed":
            text = (
                f"{pr} was closed without merging; **{transition.item}** is marked closed and "
                "will not run again unless it is retried."
            )
        else:
            by = (
                f"#{ev['revert_pr']}" if "revert_pr" in ev else f"commit {ev['revert_commit'][:12]}"
            )
            then = "re-queued" if "requeued" in transition.done else "flagged for a person"
            text = f"The change from {pr} was reverted by {by}; **{transition.item}** is {then}."
        marker = json.dumps({"item": transition.item, "key": transition.key})
        return f"{text}\n\n<!-- agent-harness-reconcile {marker} -->"

    def _has_comment(self, number: int, key: str) -> bool:
        for comment in self.tracker.list_comments(number):
            for found in COMMENT_RE.finditer(comment.body):
                try:
                    if read_json(found.group(1)).get("key") == key:
                        return True
                except UNREADABLE_JSON:
                    continue
        return False

    def _update_issue(self, transition: Transition) -> bool:
        """Comment once, then set the status label (the label is the commit point)."""
        number = transition.issue
        if number is None:
            self.report.problems.append(
                f"{transition.item}: PR #{transition.pr} names no issue; issue not updated"
            )
            return True
        listed = self._issues.get(number) if self._issues is not None else None
        issue = listed or self.tracker.get_issue(number)
        try:
            marker = read_marker(issue.body)
        except DamagedMarker:
            marker = None
        if marker is None or marker.item_id != transition.item:
            self.report.problems.append(
                f"{transition.item}: issue #{number} no longer carries its agent-harness marker "
                "(edited by hand?); issue left alone"
            )
            return True
        if not self._has_comment(number, transition.key):
            try:
                self.tracker.create_comment(number, self._comment(transition))
            except WriteUncertain:
                if not self._has_comment(number, transition.key):
                    raise
            transition.done.append("comment")
        keep = [label for label in issue.labels if not label.lower().startswith(LABEL_PREFIX)]
        wanted = (*keep, status_label(transition.state))
        if {x.lower() for x in issue.labels} != {x.lower() for x in wanted}:
            self.tracker.set_labels(number, wanted)
            transition.done.append("label")
        return True

    def _record(self, transition: Transition) -> None:
        if self.store is None:
            return
        from agent_harness.queue import items as work

        # The run pipeline queues a plan's items under the project "owner/repo:plankey".
        project = f"{self.tracker.repo}:{transition.plan}"
        try:
            if transition.state == "reverted":
                self._merged_first(project, transition)
            moved = work.record_outcome(
                self.store, project, transition.item, transition.state, transition.evidence
            )
        except work.UnknownItem:
            self.report.notes.append(f"{transition.item}: not in the queue; reported only")
            return
        except work.IllegalTransition as exc:
            self.report.notes.append(f"{transition.item}: queue not moved ({exc.message})")
            return
        if moved:
            transition.done.append("queue")
        if transition.state == "reverted" and self.requeue_reverted:
            try:
                from agent_harness.queue.retries import retry

                retry(self.store, project, transition.item)
                transition.done.append("requeued")
            except HarnessError as exc:
                self.report.problems.append(f"{transition.item}: not re-queued ({exc.message})")

    def _merged_first(self, project: str, transition: Transition) -> None:
        """Merged and reverted between two looks: the queue records the merge, then the revert.

        Without this the item would stay pr_open for ever (a revert needs a merge before it),
        and could never be retried.
        """
        from agent_harness.queue import items as work

        assert self.store is not None
        state = work.get_item(self.store, project, transition.item).state
        if state not in (work.ItemState.MERGED, work.ItemState.REVERTED):
            merge = {
                k: v for k, v in transition.evidence.items() if k in ("pr", "sha", "merged_at")
            }
            work.record_outcome(self.store, project, transition.item, "merged", merge)

    def _apply(self, transition: Transition) -> None:
        # The queue follows the tracker even when the issue cannot be written (a 403).
        self._record(transition)
        try:
            self._update_issue(transition)
        except (AuthError, RateLimited):
            raise
        except TrackerError as exc:
            self.report.problems.append(
                f"{transition.item}: issue #{transition.issue} not updated: {exc.message}"
            )
            return  # not remembered: the next run tries the issue again
        self.memory.recorded[transition.slot] = transition.key

    def _clean(self, transitions: Iterable[Transition]) -> None:
        if self.work is None:
            return
        from agent_harness.git.cleanup import clean_plans

        finished = {
            (t.plan, t.item): t.state for t in transitions if t.state in ("merged", "closed")
        }
        heads = {
            (p.plan, p.item): p.head_sha or ""
            for p in self.memory.pulls.values()
            if p.plan is not None and p.item is not None and p.state == "merged"
        }
        # And every item whose merge was recorded before, whose worktree a pass without the
        # clone (no --work) could not remove: the first pass that has it does. (Merged as
        # recorded last: a reverted one keeps its worktree, and a merged head is compared with
        # the worktree's, so a later attempt's worktree is never taken.)
        for plan, item in heads:
            if self.memory.recorded.get(f"{plan}/{item}", "").startswith("merged:"):
                finished.setdefault((plan, item), "merged")
        pruned = clean_plans(self.work, finished, heads)
        self.report.cleaned = [i.item_id for i in pruned.removed]
        for info in pruned.kept:
            self.report.kept.append(info.item_id)
            self.report.notes.append(f"{info.item_id}: worktree {info.path} kept ({info.reason})")

    # -- the run ----------------------------------------------------------------------------
    def run(self) -> ReconcileReport:
        start_requests = self.tracker.tally.requests
        start_writes = self.tracker.tally.writes
        self._read_pulls()
        for (plan, item), (pull, outcome) in sorted(self._outcomes().items()):
            if self._already(f"{plan}/{item}", pull, outcome):
                continue
            assert pull.plan is not None
            transition = Transition(
                item,
                pull.plan,
                outcome.state,
                outcome.key,
                pull.number,
                pull.issue,
                outcome.evidence,
            )
            self.report.transitions.append(transition)
            if not self.dry_run:
                self._apply(transition)
        if not self.dry_run:
            self._clean(self.report.transitions)
            if self.store is not None:
                self.store.set_meta(self.meta_key, self.memory.dumps())
        self.report.requests = self.tracker.tally.requests - start_requests
        self.report.writes = self.tracker.tally.writes - start_writes
        return self.report


def reconcile(
    tracker: Tracker,
    *,
    store: Store | None = None,
    plan_key: str | None = None,
    dry_run: bool = False,
    requeue_reverted: bool = False,
    revert_window_days: int = 30,
    work: WorkRepo | None = None,
    clock: Callable[[], float] = time.time,
) -> ReconcileReport:
    """Bring merged / closed / reverted back from the tracker; see the module docstring. One
    pass at a time of a repository, whichever process or host starts it: the next one reads
    what the last recorded."""
    from agent_harness.store.hostlock import held_by_this_host, reconcile_lock

    def one_pass() -> ReconcileReport:
        return Reconciler(
            tracker,
            store=store,
            plan_key=plan_key,
            dry_run=dry_run,
            requeue_reverted=requeue_reverted,
            revert_window_days=revert_window_days,
            work=work,
            clock=clock,
        ).run()

    if store is None or dry_run:
        return one_pass()
    with held_by_this_host(store, reconcile_lock(tracker.repo)):
        return one_pass()


def work_repo(path: Path | None, state_dir: Path) -> WorkRepo | None:
    if path is None:
        return None
    from agent_harness.git.worktrees import WorkRepo

    return WorkRepo(path, state_dir)
