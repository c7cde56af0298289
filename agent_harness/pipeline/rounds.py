"""After the pull request: failed CI, requested changes and conflicts go back to the item's agent.

`watch_pulls` runs after reconcile (in `reconcile` and in `run`), over the open pull requests of
ours that changed since the last look (reconcile's `sort=updated` listing with its ETag and
high-water mark) plus those a single search says newly fail (`status:failure`, with its ETag).
Each is read once (`pull_feedback`) and answered at most once per head; one that cannot need an
answer (the listing shows the head the harness pushed, on the base tip its work started from,
with no hold label; the search does not say it fails; nobody reviewed or commented on it:
`pull_untouched`) is looked at with one read of its timeline instead of read whole. One whose
mergeable state GitHub was still computing (`unknown`) is read whole again on the next pass.
What a pull request read whole asks for:

- a person's brake (`/agent-harness stop`, the `agent-harness:hold` label) or a commit on the
  branch the harness did not push stops the rounds, said once on the pull request;
- a failed check or status, a review requesting changes, line comments on the head, or a
  conflict with the base sends the item back to its agent as a new attempt on the same branch,
  with the feedback in its prompt (a conflict is first rebased here, and needs no agent when
  the rebase applies);
- with the round budget spent, the item fails, saying why;
- with `merge_when_green`, an approved, green, conflict-free head is merged.

Every round is a `pr_round` event with its trigger and feedback.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agent_harness.errors import HarnessError
from agent_harness.git.naming import plan_namespace
from agent_harness.pipeline.history import ItemHistory
from agent_harness.queue import items
from agent_harness.queue.items import ItemState
from agent_harness.store.events import (
    FeedbackGiven,
    PullMerge,
    PullRound,
    PullRoundsStopped,
    Pushed,
    WorktreeReady,
)
from agent_harness.tracker.protocol import PullFeedback, Tracker, TrackerError
from agent_harness.tracker.reconcile import Memory, PullFacts, iso

if TYPE_CHECKING:
    from agent_harness.git.workspace import Workspace
    from agent_harness.store.database import Store

# A pull request held from merging (no check has reported, a person asked for changes, a
# dependency is not merged) is read again at most this often: its hold may end with nothing on
# it changing (a dependency merged elsewhere), and each read is several requests.
HELD_LOOK_S = 300.0
HOLD_LABEL = "agent-harness:hold"
STOP_COMMAND = "/agent-harness stop"
ROUND_MARK = "agent-harness-round"


@dataclass
class Trigger:
    kind: str  # check_run, review, conflict
    summary: str
    detail: str
    keys: tuple[str, ...]


def _holds_of(memory: dict[str, Any]) -> dict[str, Any]:
    """The holds a pass remembered (none from a memory written before holds were)."""
    held = memory.get("held")
    return held if isinstance(held, dict) else {}


@dataclass
class WatchReport:
    """What one watch pass read and did (rounds, stops, merges), for reports and --json."""

    read: list[int] = field(default_factory=list)
    rounds: list[dict[str, Any]] = field(default_factory=list)
    stopped: list[dict[str, Any]] = field(default_factory=list)
    merged: list[dict[str, Any]] = field(default_factory=list)
    failed: list[dict[str, Any]] = field(default_factory=list)  # round budget spent
    left: list[dict[str, Any]] = field(default_factory=list)  # needs the clone: a later pass

    def as_json(self) -> dict[str, Any]:
        return {
            "read": self.read,
            "rounds": self.rounds,
            "stopped": self.stopped,
            "merged": self.merged,
            "failed": self.failed,
            "left": self.left,
        }


class PullWatch:
    """One pass over the open pull requests of one plan."""

    def __init__(
        self,
        tracker: Tracker,
        store: Store,
        plan_key: str,
        *,
        max_rounds: int = 3,
        merge_when_green: bool = False,
        repo: Workspace | None = None,
        clock: Callable[[], float] = time.time,
        dry_run: bool = False,
    ) -> None:
        self.clock = clock
        self.dry_run = dry_run  # read and report what would be done; write nothing
        self.tracker = tracker
        self.store = store
        self.plan_key = plan_key
        self.project = f"{tracker.repo}:{plan_key}"
        self.max_rounds = max_rounds
        self.merge_when_green = merge_when_green
        self.repo = repo
        self.meta_key = f"pullwatch:{self.project}"
        self.report = WatchReport()
        self._tips: dict[str, str] = {}  # base branch -> its head, as this pass read it

    def run(self, changed: list[int]) -> WatchReport:
        """One pass over `changed` and what else asks to be read; one at a time of a repository
        (with reconcile's passes), whichever process or host starts it."""
        from agent_harness.store.hostlock import held_by_this_host, reconcile_lock

        if self.dry_run:
            return self._run(changed)
        with held_by_this_host(self.store, reconcile_lock(self.tracker.repo)):
            return self._run(changed)

    def _run(self, changed: list[int]) -> WatchReport:
        memory = json.loads(self.store.get_meta(self.meta_key) or "{}")
        newly: set[int] = set()
        # CI's word does not move a pull request's updated_at: one search per word asked.
        for state in ("failure", "success") if self.merge_when_green else ("failure",):
            seen = memory.get(state) or {}
            found = self.tracker.pulls_with_status(state, seen.get("etag"))
            if not found.not_modified:
                newly |= set(found.items) - set(seen.get("items", []))
                memory[state] = {"etag": found.etag, "items": list(found.items)}
        # Read whole: what CI says fails, what the base moved under, and all of them when
        # merging is asked (that needs the checks' and the reviews' word).
        whole = set(newly) | set((memory.get("failure") or {}).get("items", []))
        pulls = Memory.loads(self.store.get_meta(f"reconcile:{self.tracker.repo}"))
        known = pulls.pulls if pulls is not None else {}
        ours = {
            n: f
            for n, f in known.items()
            if f.item is not None and f.plan == self.plan_key and f.state == "open"
        }
        moved = self._base_moved(memory, ours)
        newly |= moved
        whole |= moved
        self._tips = {b: str(seen.get("sha") or "") for b, seen in memory["bases"].items()}
        # Timestamps have whole seconds: a pull request read in the second it was last updated
        # is read once more, or a review landing later in that second would go unseen (the
        # listing would not change).
        read_at = memory.setdefault("read", {})
        green_at = memory.setdefault("read_green", {})  # reads by passes that may merge
        newly |= {n for n, f in ours.items() if read_at.get(str(n), "~") <= f.updated_at}
        # GitHub answers `mergeable_state: unknown` while it computes whether a pull request
        # merges (after its base moved): such a one is read whole again next time, since
        # nothing else about it may change to bring it back.
        computing = {int(n) for n in memory.get("computing", [])} & set(ours)
        newly |= computing
        whole |= computing
        memory["computing"] = []
        # A conflict a pass without the clone left for one with it: nothing about the pull
        # request or its base need change again, so a pass with the clone reads it whole.
        left = {int(n) for n in memory.get("left", [])} & set(ours)
        if self.repo is not None:
            newly |= left
            whole |= left
            left = set()
        green = self._green_reads(memory, ours)
        newly |= green
        whole |= green
        for number in sorted((set(changed) | newly) & set(ours)):
            item = ours[number].item
            assert item is not None
            read_at[str(number)] = iso(self.clock())
            if self.merge_when_green:
                green_at[str(number)] = read_at[str(number)]
            skim = not self.merge_when_green and number not in whole
            if self._one(number, item, ours[number] if skim else None) == "unknown":
                memory["computing"].append(number)
        memory["left"] = sorted(left | {int(entry["pr"]) for entry in self.report.left})
        self._remember(memory, ours)
        return self.report

    def _remember(self, memory: dict[str, Any], ours: dict[int, PullFacts]) -> None:
        """Keep what the next pass needs of this one (nothing of a dry pass, which leaves what
        it read for the real one to read again), forgetting pull requests no longer open."""
        for seen in (memory["read"], memory["read_green"]):
            for gone in set(seen) - {str(n) for n in ours}:
                del seen[gone]
        if self.merge_when_green:
            memory["held"] = self._holds(memory, ours)
        if not self.dry_run:
            self.store.set_meta(self.meta_key, json.dumps(memory))

    def _green_reads(self, memory: dict[str, Any], ours: dict[int, PullFacts]) -> set[int]:
        """The pull requests a pass that may merge reads whole besides: each one not read by
        such a pass since it last changed (a pass that does not merge may have read it since,
        and a quiet, approved one with no CI then got no word from any later pass), and those
        held (no check yet, a request for changes) whose last read is HELD_LOOK_S old."""
        if not self.merge_when_green:
            return set()
        now, green_at = self.clock(), memory["read_green"]
        due = {int(n) for n, h in _holds_of(memory).items() if now - h["at"] >= HELD_LOOK_S}
        unread = {n for n, f in ours.items() if green_at.get(str(n), "") <= f.updated_at}
        return (unread | due) & set(ours)

    def _holds(self, memory: dict[str, Any], ours: dict[int, PullFacts]) -> dict[str, Any]:
        """The holds to remember: those this pass read and held, and those it did not read
        again (read at most every HELD_LOOK_S), said in its report as the last read said."""
        held = _holds_of(memory)
        now = self.clock()
        holds = {
            str(m["pr"]): {"item": m["item"], "detail": m["detail"], "at": now}
            for m in self.report.merged
            if not m["merged"]
        }
        for number, hold in held.items():
            if int(number) in ours and int(number) not in self.report.read:
                holds[number] = hold
                said = {"item": hold["item"], "pr": int(number), "merged": False}
                self.report.merged.append(said | {"detail": hold["detail"]})
        return holds

    def _base_moved(self, memory: dict[str, Any], ours: dict[int, PullFacts]) -> set[int]:
        """Our open pull requests whose base branch moved since the last look (then they may
        conflict, or be behind): one conditional read per base branch."""
        moved: set[int] = set()
        bases = memory.setdefault("bases", {})
        for base in sorted({f.base for f in ours.values()}):
            seen = bases.get(base) or {}
            head = self.tracker.branch_head(base, seen.get("etag"))
            if head.not_modified or not head.items:
                continue
            if seen.get("sha") and seen["sha"] != head.items[0]:
                moved |= {n for n, f in ours.items() if f.base == base}
            bases[base] = {"etag": head.etag, "sha": head.items[0]}
        return moved

    # -- one pull request ---------------------------------------------------------------------
    def _one(self, number: int, item_id: str, skim: PullFacts | None = None) -> str | None:
        """Answer what pull request `number` says; with `skim` (its facts from the listing),
        first see whether it can say anything at all (`_untouched`). Its mergeable state as
        read, when it was read whole."""
        try:
            record = items.get_item(self.store, self.project, item_id)
        except items.UnknownItem:
            return None
        if record.state != ItemState.PR_OPEN:
            return None  # being worked on, or ended: nothing to answer now
        history = ItemHistory.read(self.store, self.project, item_id)
        if skim is not None and self._untouched(number, skim, history):
            self.report.read.append(number)
            return None
        feedback = self.tracker.pull_feedback(number)
        self.report.read.append(number)
        self._answer(item_id, feedback, history)
        return feedback.mergeable_state

    def _answer(self, item_id: str, feedback: PullFeedback, history: ItemHistory) -> None:
        """What the pull request's head asks for, done at most once: a stop, a merge, a
        rebase, a round for the agent, or the item failed with its budget spent."""
        number = feedback.number
        said = {key for r in history.all(PullRound) for key in r.keys}
        said |= {s.key for s in history.all(PullRoundsStopped)}
        said |= {f"merge:{m.head_sha}" for m in history.all(PullMerge)}
        # What the harness last pushed to this pull request's own branch: an item that started
        # over pushes to a new branch, and that is no stranger's commit on the old one.
        on_branch = [p for p in history.all(Pushed) if p.branch == feedback.head_ref]
        pushed = on_branch[-1] if on_branch else history.last(Pushed)
        if self._stopped(item_id, feedback, pushed, said):
            return
        trigger = _trigger(feedback)
        if trigger is None or set(trigger.keys) <= said:
            if (
                trigger is None
                and self.merge_when_green
                and f"merge:{feedback.head_sha}" not in said
            ):
                self._merge(item_id, feedback, history)
            return
        if trigger.kind in ("conflict", "behind") and self.repo is None:
            # The base is merged or rebased in the item's worktree, which a pass without the
            # clone cannot reach: the agent would get a conflict it has no copy of, and spend
            # a round pushing a head that still conflicts. A pass with the clone takes it up.
            reason = (
                f"{'conflicts with' if trigger.kind == 'conflict' else 'is behind'} its base "
                f"`{feedback.base_ref}`: left for a pass with the clone (`reconcile --work "
                "CLONE`, or `run`)"
            )
            self.report.left.append({"item": item_id, "pr": number, "reason": reason})
            return
        self._take_up(item_id, feedback, trigger, history)

    def _take_up(
        self, item_id: str, feedback: PullFeedback, trigger: Trigger, history: ItemHistory
    ) -> None:
        """Act on a trigger the pull request's clone can answer: rebase, fail the item with its
        round budget spent, or send it back to its agent."""
        number = feedback.number
        # Rebasing onto a base that moved on is the harness's own chore: it spends no round.
        # Rounds are this pull request's own: an item that started over (`work retry`) has a
        # new pull request, with its budget whole and its rounds counted from 1.
        of_pull = [r for r in history.all(PullRound) if r.pr == number]
        rounds = [r for r in of_pull if r.action == "agent"]
        round_no = len(of_pull) + 1
        # A dry pass reports what it would do (`would` set) and does none of it.
        would = {"item": item_id, "pr": number, "round": round_no, "trigger": trigger.kind}
        if trigger.kind == "behind":
            if self.dry_run:
                self.report.rounds.append(would | {"would": "rebase"})
            else:
                self._rebased(item_id, round_no, feedback, trigger)
            return
        if len(rounds) >= self.max_rounds:
            reason = (
                f"PR #{number}: the budget of {self.max_rounds} PR "
                f"round{'' if self.max_rounds == 1 else 's'} is spent; "
                f"the last {trigger.kind} said: {trigger.summary}"
            )
            if self.dry_run:
                self.report.failed.append({"item": item_id, "pr": number, "reason": reason})
                return
            event = self._round(number, round_no, trigger, feedback, "failed")
            if items.reopen_for_round(self.store, self.project, item_id, event, fail=reason):
                self._say(number, f"No more rounds: {reason}.", f"budget:{number}")
                self.report.failed.append({"item": item_id, "pr": number, "reason": reason})
            return
        if self.dry_run:
            self.report.rounds.append(would | {"would": "send back"})
            return
        if trigger.kind == "conflict" and self._rebased(item_id, round_no, feedback, trigger):
            return
        self._send_back(item_id, number, round_no, trigger, feedback)

    def _untouched(self, number: int, facts: PullFacts, history: ItemHistory) -> bool:
        """Nothing on this pull request can need an answer: its head is what the harness
        pushed, on the base tip its work started from (so it can neither conflict nor be
        behind), it has no hold label, CI has not failed it (the search said), and nobody has
        reviewed or commented on it. Then its full read (the pull, its checks and statuses)
        is not needed; any doubt, and it is read whole."""
        pushed, ready = history.last(Pushed), history.last(WorktreeReady)
        return (
            pushed is not None
            and ready is not None
            and bool(facts.head_sha)
            and facts.head_sha == pushed.sha
            and facts.labels is not None
            and HOLD_LABEL not in facts.labels
            and self._tips.get(facts.base) == ready.base
            and self.tracker.pull_untouched(number)
        )

    def _stopped(
        self, item_id: str, feedback: PullFeedback, pushed: Pushed | None, said: set[str]
    ) -> bool:
        number = feedback.number
        reason, key = None, ""
        # Keyed by pull request: a retried item's new one is answered too.
        if HOLD_LABEL in feedback.labels:
            reason, key = f"the label `{HOLD_LABEL}` holds it", f"hold:{number}"
        elif any(text.strip().startswith(STOP_COMMAND) for text in _said_by_people(feedback)):
            reason, key = f"a person asked `{STOP_COMMAND}`", f"stop:{number}"
        elif pushed is not None and feedback.head_sha and feedback.head_sha != pushed.sha:
            reason = (
                f"the branch carries commit {feedback.head_sha[:12]} that the harness did not "
                "make; it will not push over it"
            )
            key = f"foreign:{feedback.head_sha}"
        if reason is None:
            return False
        if key not in said and self.dry_run:
            self.report.stopped.append({"item": item_id, "pr": number, "reason": reason})
        elif key not in said:
            event = PullRoundsStopped(pr=number, reason=reason, key=key)
            self.store.append_event(self.project, item_id, event)
            items.note_rounds_stopped(self.store, self.project, item_id, reason)
            self.report.stopped.append({"item": item_id, "pr": number, "reason": reason})
            # Said on the pull request too, once, so whoever applied the brake sees it held.
            then = {
                "hold": " Take the label off to let the rounds go on.",
                "stop": " It pushes nothing more to this branch.",
            }.get(key.split(":")[0], "")
            self._say(number, f"The harness stops its rounds here: {reason}.{then}", key)
        return True

    def _round(
        self, number: int, round_no: int, trigger: Trigger, feedback: PullFeedback, action: str
    ) -> PullRound:
        return PullRound(
            pr=number,
            round=round_no,
            trigger=trigger.kind,
            head_sha=feedback.head_sha,
            action=action,
            summary=trigger.summary,
            detail=trigger.detail[-6000:],
            keys=list(trigger.keys),
        )

    def _send_back(
        self, item_id: str, number: int, round_no: int, trigger: Trigger, feedback: PullFeedback
    ) -> None:
        event = self._round(number, round_no, trigger, feedback, "agent")
        if not items.reopen_for_round(self.store, self.project, item_id, event):
            return
        given = FeedbackGiven(
            source=f"pr_{trigger.kind}",
            summary=f"PR #{number} round {round_no}: {trigger.summary}",
            detail=trigger.detail[-6000:],
        )
        self.store.append_event(self.project, item_id, given)
        self.report.rounds.append(
            {"item": item_id, "pr": number, "round": round_no, "trigger": trigger.kind}
        )

    def _rebased(
        self, item_id: str, round_no: int, feedback: PullFeedback, trigger: Trigger
    ) -> bool:
        """Rebase the branch on its base in the worktree and push it (only over our own head),
        recorded as round `round_no` of the pull request; True when that settled it. A rebase
        that does not apply leaves the merge's markers in the worktree for the agent, and
        names the files in the feedback."""
        number = feedback.number
        if self.repo is None or not feedback.head_ref:
            return False
        updated = self.repo.update_from_base(feedback.head_ref, feedback.head_sha)
        if updated is None and self._rebuilt(item_id, feedback.head_ref):
            updated = self.repo.update_from_base(feedback.head_ref, feedback.head_sha)
        if updated is None:
            return False  # its worktree holds other work: the agent's attempt takes it up
        conflicts, head = updated
        if conflicts:
            files = ", ".join(conflicts)
            trigger.detail += (
                "\nThe base was merged into the branch in your worktree; these files have "
                f"conflict markers to resolve: {files}"
            )
            return False
        pushed = Pushed(branch=feedback.head_ref, sha=head)
        self.store.append_event(self.project, item_id, pushed)
        event = self._round(number, round_no, trigger, feedback, "rebase")
        self.store.append_event(self.project, item_id, event)
        self.report.rounds.append(
            {"item": item_id, "pr": number, "round": round_no, "trigger": trigger.kind}
        )
        self._say(
            number, "The base moved on; the branch was rebased onto it cleanly.", event.keys[0]
        )
        return True

    def _rebuilt(self, item_id: str, branch: str) -> bool:
        """Make the item's worktree again when there is none here (removed by hand, or the
        branch worked on another host), as its next attempt would: the base is then merged
        there, with the markers of a conflict for the agent, instead of sending the agent a
        conflict it has no copy of."""
        assert self.repo is not None
        if self.repo.worktree_of(branch) is not None:
            return False
        history = ItemHistory.read(self.store, self.project, item_id)
        generation, _fresh = history.generation()
        worked = history.last(WorktreeReady)
        title = items.get_item(self.store, self.project, item_id).title
        try:
            self.repo.prepare(
                item_id, title, plan_namespace(self.plan_key), generation, pushed=True,
                known=worked.branch if worked is not None else branch,
                others=lambda: items.item_ids(self.store, self.project),
            )  # fmt: skip
        except HarnessError:  # the branch gone, a folder in the way: the agent's attempt sees
            return False
        return True  # (`update_from_base` finds none still if the branch is checked out elsewhere)

    def _merge(self, item_id: str, feedback: PullFeedback, history: ItemHistory) -> None:
        approved = history.approval() is not None or any(
            r[1] == "APPROVED" and r[3] == feedback.head_sha for r in feedback.reviews
        )
        # A person's request for changes stands until that person approves or it is
        # dismissed (the reviews read are the standing ones), whatever the harness's own
        # reviewer said: as on GitHub's merge box, it holds the merge.
        changes_asked = any(r[1] == "CHANGES_REQUESTED" for r in feedback.reviews)
        if not approved:
            return
        held = (
            "a person's request for changes stands"
            if changes_asked
            else "a dependency is no longer merged"
            if self._waits_for_dependencies(item_id)
            # Green means checks that passed: with none at all (no CI on the repository) it
            # would wait for ever, saying nothing.
            else "no check has reported on its head, and green needs one"
            if not feedback.checks
            else None
        )
        if held is not None:  # said in the report of each pass that holds it; nothing written
            self.report.merged.append(
                {"item": item_id, "pr": feedback.number, "merged": False, "detail": held}
            )
            return
        if not (feedback.passing() and feedback.mergeable_state == "clean"):
            return
        if self.dry_run:
            self.report.merged.append(
                {"item": item_id, "pr": feedback.number, "merged": False, "detail": "would merge"}
            )
            return
        try:
            sha = self.tracker.merge_pull(feedback.number, feedback.head_sha)
            event = PullMerge(
                pr=feedback.number, merged=True, head_sha=feedback.head_sha, detail=sha
            )
        except TrackerError as exc:
            event = PullMerge(
                pr=feedback.number,
                merged=False,
                head_sha=feedback.head_sha,
                detail=f"{exc.status or ''} {exc.message}".strip(),
            )
        self.store.append_event(self.project, item_id, event)
        self.report.merged.append(
            {"item": item_id, "pr": feedback.number, "merged": event.merged, "detail": event.detail}
        )

    def _waits_for_dependencies(self, item_id: str) -> bool:
        """An item whose dependency is no longer merged (reverted since, or reopened) is not
        merged by the harness: its work was built on that change."""
        try:
            record = items.get_item(self.store, self.project, item_id)
            states = [items.get_item(self.store, self.project, d).state for d in record.depends_on]
        except items.UnknownItem:
            return True  # a dependency gone from the queue: a person decides
        return any(str(state) not in items.DEFAULT_READY_WHEN for state in states)

    def _say(self, number: int, text: str, key: str) -> None:
        say_on_pull(self.tracker, number, text, key)


def say_on_pull(tracker: Tracker, number: int, text: str, key: str) -> None:
    """A comment of the harness's own on a pull request, marked so that no pass reads it as a
    person's feedback."""
    marker = json.dumps({"key": key})
    tracker.create_comment(number, f"{text}\n\n<!-- {ROUND_MARK} {marker} -->")


def _said_by_people(feedback: PullFeedback) -> list[str]:
    """Everything people wrote on the pull request where a command may stand: its comments,
    the bodies of its reviews and its line comments (a review's body is a comment on GitHub)."""
    return [
        *feedback.comments,
        *(review[2] for review in feedback.reviews),
        *(line[3] for line in feedback.line_comments),
    ]


def watch_all(
    tracker: Tracker,
    store: Store,
    changed: list[int],
    *,
    plan_key: str | None = None,
    max_rounds: int = 3,
    merge_when_green: bool = False,
    repo: Workspace | None = None,
    clock: Callable[[], float] = time.time,
    dry_run: bool = False,
) -> WatchReport:
    """One watch pass for `plan_key`, or for every plan with an open pull request of ours
    (what `agent-harness reconcile` runs after its own pass); with `dry_run`, what it would
    do, read but not done."""
    keys = [plan_key] if plan_key else []
    if not keys:
        memory = Memory.loads(store.get_meta(f"reconcile:{tracker.repo}"))
        pulls = memory.pulls.values() if memory is not None else ()
        keys = sorted({p.plan for p in pulls if p.plan and p.item and p.state == "open"})
    total = WatchReport()
    for key in keys:
        one = PullWatch(
            tracker,
            store,
            key,
            max_rounds=max_rounds,
            merge_when_green=merge_when_green,
            repo=repo,
            clock=clock,
            dry_run=dry_run,
        ).run(changed)
        for name in ("read", "rounds", "stopped", "merged", "failed", "left"):
            getattr(total, name).extend(getattr(one, name))
    return total


def _trigger(feedback: PullFeedback) -> Trigger | None:
    """What the pull request's head asks for, most pressing first; None when nothing."""
    head = feedback.head_sha
    failing = feedback.failing()
    if failing:
        lines = [
            f"check `{name}` concluded {word}:\n{text}".rstrip() for name, word, text in failing
        ]
        names = ", ".join(f"{name} ({word})" for name, word, _ in failing)
        keys = tuple(f"check:{head}:{name}" for name, _, _ in failing)
        return Trigger("check_run", f"failed: {names}", "\n\n".join(lines), keys)
    asked = [r for r in feedback.reviews if r[1] == "CHANGES_REQUESTED" and r[3] == head]
    lines_on_head = [c for c in feedback.line_comments if c[4] == head]
    if asked or lines_on_head:
        parts = [f"review (changes requested): {r[2]}" for r in asked]
        parts += [f"- {path}:{line or ''}: {body}" for _, path, line, body, _ in lines_on_head]
        keys = tuple(f"review:{r[0]}" for r in asked) + tuple(
            f"comment:{c[0]}" for c in lines_on_head
        )
        said = f"{len(asked)} review(s) requested changes, {len(lines_on_head)} line comment(s)"
        return Trigger("review", said, "\n".join(parts), keys)
    if feedback.mergeable_state == "behind":
        said = f"behind {feedback.base_ref}, which must be merged up to date"
        return Trigger("behind", said, said, (f"behind:{head}",))
    if feedback.mergeable_state == "dirty":
        detail = f"The pull request conflicts with its base `{feedback.base_ref}`."
        return Trigger(
            "conflict", f"conflicts with {feedback.base_ref}", detail, (f"conflict:{head}",)
        )
    return None


def round_comment(round_event: PullRound, sha: str, checks_table: str) -> str:
    """The one comment a round leaves on its pull request once its fix is pushed."""
    marker = json.dumps({"key": f"round:{round_event.round}:{sha}"})
    asked = round_event.detail.strip().splitlines()[:20]
    lines = [
        f"**Round {round_event.round}** ({round_event.trigger}): {round_event.summary}.",
        "",
        "What this round answers:",
        "",
        *[f"> {line}" for line in asked],
        "",
        f"Pushed {sha[:12]} to the same branch; what the harness ran:",
        "",
        checks_table,
        "",
        f"<!-- {ROUND_MARK} {marker} -->",
    ]
    return "\n".join(lines)
