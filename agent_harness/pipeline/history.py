"""Where an item got to, read from its events: what a resumed attempt may skip, and what it cost.

A run killed at any point is started again; this is how it knows not to redo finished work. A
finished step counts until something newer speaks about the item (a later verdict, feedback,
or the tracker's outcome). Only events the harness wrote itself are trusted: an ingested file
can neither plant an approval nor spend an item's budget.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeVar

from agent_harness.pipeline.prompt import Feedback
from agent_harness.store.database import Store
from agent_harness.store.events import (
    Advanced,
    AgentFinished,
    AgentStarted,
    AgentStateChanged,
    AttemptFailed,
    CheckRan,
    ChecksPassed,
    Claimed,
    Completed,
    Deferred,
    Event,
    FeedbackGiven,
    Outcome,
    Payload,
    ProtectedPaths,
    PullOpened,
    PullRound,
    Pushed,
    Released,
    Requeued,
    Resumed,
    Retried,
    Reviewed,
    Waiting,
    WorktreeReady,
)
from agent_harness.store.executor_events import ExecutorStepStarted
from agent_harness.store.model_events import ModelCall, ModelLost, ReviewAskedAgain

P = TypeVar("P", bound=Payload)
# Events after which an attempt's agent run is spent: it was judged, or the attempt ended.
_ENDS_AN_ATTEMPT = (
    FeedbackGiven,
    Reviewed,
    ChecksPassed,
    Outcome,
    Retried,
    AttemptFailed,
    Deferred,
    Requeued,
    Released,
    Waiting,
)
# Why a restarted attempt started no agent: the one its worker had started is picked up.
AGENT_PICKED_UP = "its agent had started before the restart: that session is picked up"
# Events after which a review stage has an end on record.
_LEAVES_REVIEW = (*_ENDS_AN_ATTEMPT, Completed)
# Events after which an agent's start has an end on record.
_ENDS_A_RUN = (AgentFinished, *_ENDS_AN_ATTEMPT)
# What an item is doing after each of these events (see `ItemHistory.activity`).
_DOING: dict[type[Payload], str] = {
    Claimed: "claimed",
    AgentStarted: "agent running",
    CheckRan: "checks",
    Reviewed: "review",
    Pushed: "opening PR",
}


# What a claimed item is doing once it reached a stage (it said "agent done" while its checks
# ran, until the first one ended).
_STAGE_DOING = {"checks": "checks running", "review": "in review"}


# Why an item came back, by the state it was retried from.
_RETRIED_AFTER = {
    "reverted": "its merged change was reverted on the default branch, so it has to land again",
    "closed": "its pull request was closed without merging",
    "failed": "it failed",
    "skipped": "it was skipped",
}


def _answered_review(payload: Payload) -> bool:
    """A reviewer's model call that was answered (a failed or refused one says nothing of
    whether the provider was paid)."""
    return (
        isinstance(payload, ModelCall)
        and payload.role == "reviewer"
        and payload.failure is None
        and not payload.parked
    )


class ItemHistory:
    """The harness's own events about one item, oldest first, kept current as the attempt adds
    more (`record`), so every question is answered from one read."""

    def __init__(self, events: Iterable[Event | Payload] = ()) -> None:
        self._payloads: list[Payload] = []
        for entry in events:
            if isinstance(entry, Event):
                if entry.written_by_harness and isinstance(entry.payload, Payload):
                    self._payloads.append(entry.payload)
            else:
                self._payloads.append(entry)

    @classmethod
    def read(cls, store: Store, project: str, item_id: str) -> ItemHistory:
        return cls(store.all_events(project=project, item=item_id))

    def record(self, payload: Payload) -> None:
        self._payloads.append(payload)

    def all(self, model: type[P]) -> list[P]:
        """Every event of `model`, oldest first."""
        return [payload for payload in self._payloads if isinstance(payload, model)]

    def last(self, *models: type[P]) -> P | None:
        """The latest event of one of `models`."""
        for payload in reversed(self._payloads):
            if isinstance(payload, models):
                return payload
        return None

    def approval(self) -> Reviewed | None:
        """The approving verdict that still stands, if any (its `sha` is the approved commit)."""
        said = self.last(Reviewed, FeedbackGiven, Outcome, Retried)
        return said if isinstance(said, Reviewed) and said.approved else None

    def checked_sha(self) -> str | None:
        """A commit that passed its checks and has had no verdict since."""
        said = self.last(ChecksPassed, FeedbackGiven, Reviewed, Outcome)
        return said.sha if isinstance(said, ChecksPassed) else None

    def finished_run(self, worktree: str | None = None) -> AgentFinished | None:
        """The implementer's successful run of an attempt that never got further because its
        worker died (killed during the commit or the checks): its work is in the worktree, and
        a resumed attempt goes on from there instead of paying the agent again.

        Only in that worktree, though: on another host (another clone, another state dir)
        sharing the queue the run's work is not there, so with `worktree` given a run that
        worked elsewhere is not resumed and the agent runs again."""
        finished: AgentFinished | None = None
        for payload in reversed(self._payloads):
            if finished is None and isinstance(payload, AgentFinished):
                if not payload.ok:
                    return None
                finished = payload
            elif finished is None and isinstance(payload, _ENDS_AN_ATTEMPT):
                return None
            elif finished is not None and isinstance(payload, AgentStarted):
                where = payload.worktree
                return None if worktree and where and where != worktree else finished
        return finished

    def unanswered_review(self) -> Advanced | None:
        """The review stage an earlier attempt entered and never left on record (its run died
        while the reviewer was asked): that call may have been paid, its cost unknown. None
        when the attempt before this one's claim left it (a verdict, a wait, a failure...)."""
        claims = 0
        asked_again = False  # the last ask is a second one, after an unusable answer
        for payload in reversed(self._payloads):
            if isinstance(payload, Claimed):
                claims += 1
                if claims == 2:
                    return None
            elif claims != 1:
                continue
            elif isinstance(payload, (*_LEAVES_REVIEW, ModelLost)):
                return None
            elif isinstance(payload, ReviewAskedAgain):
                asked_again = True
            elif _answered_review(payload) and not asked_again:
                return None  # the last ask's answer is on record, priced there
            elif isinstance(payload, Advanced) and payload.to == "review":
                return payload
        return None

    def unfinished_start(self, worktree: str | None = None) -> AgentStarted | None:
        """The implementer's start this attempt made that never came to an end on record:
        its worker died while the agent worked. Its session, where it is still there (the
        agent working on, or ended with nobody watching), is this attempt's to pick up rather
        than to start and pay for again. None on another host's worktree, as `finished_run`."""
        for payload in reversed(self._payloads):
            if isinstance(payload, _ENDS_A_RUN):
                return None
            if isinstance(payload, AgentStarted):
                where = payload.worktree
                return None if worktree and where and where != worktree else payload
        return None

    def generation(self) -> tuple[int, bool]:
        """The branch generation the next attempt works on, and whether the generation before
        it is to be discarded (`work retry --fresh`). A retry by a person (or the reconciler)
        and a change refused for a protected path each start a new generation; a retry of an
        item whose new generation was never worked on keeps that one."""
        generation, unused, fresh = 0, False, False
        for payload in self._payloads:
            if isinstance(payload, WorktreeReady):
                unused, fresh = False, False
            elif isinstance(payload, ProtectedPaths):
                generation, unused, fresh = generation + 1, True, False
            elif isinstance(payload, Retried) and payload.via is None:
                if not unused:
                    generation, unused = generation + 1, True
                fresh = payload.fresh
        return generation, fresh

    def feedback(self) -> Feedback | None:
        """What the previous attempt ran into, for the next prompt. After a retry, only what
        came after it: an item that starts over on a new branch is told why it came back, not
        an old round's feedback about a branch (and conflict markers) it no longer has."""
        given: FeedbackGiven | None = None
        retried: Retried | None = None
        for payload in self._payloads:
            if isinstance(payload, FeedbackGiven):
                given, retried = payload, None  # feedback since a retry stands on its own
            elif isinstance(payload, Retried) and payload.via is None:
                retried = payload
        if retried is None:
            return None if given is None else Feedback(given.source, given.summary, given.detail)
        why = _RETRIED_AFTER.get(str(retried.from_), f"it ended {retried.from_}")
        summary = (
            f"the item was started over after {why}; this attempt begins on a new branch from "
            "the current default branch"
        )
        if given is None or given.source.startswith("pr_"):
            # A pull-request round spoke of a branch (and conflict markers) no longer here.
            return Feedback("retry", summary, "")
        return Feedback(
            "retry",
            f"{summary}. The last attempt before it ended with: {given.summary}",
            given.detail,
        )

    def implementer_run(self) -> AgentFinished | None:
        return self.last(AgentFinished)

    def pull(self) -> PullOpened | None:
        return self.last(PullOpened)

    def answering_round(self) -> PullRound | None:
        """The round of its pull request the item's work now answers (the last one asked since
        that pull request opened); None when there is none."""
        last = self.last(PullRound, PullOpened)
        return last if isinstance(last, PullRound) else None

    @classmethod
    def opened_a_pull(cls, store: Store, project: str, item_id: str) -> bool:
        """Whether the item's record holds a pull request of ours."""
        return cls.read(store, project, item_id).pull() is not None

    def activity(self) -> str:
        """What a claimed item is doing now, in a few words, from its latest events."""
        note = ""
        for payload in self._payloads:
            if isinstance(payload, ExecutorStepStarted):
                note = f"executor step {payload.step}"
            elif isinstance(payload, Resumed) and payload.why == AGENT_PICKED_UP:
                note = "agent running"
            elif isinstance(payload, AgentStateChanged):
                waiting = payload.state == "waiting_for_input"
                note = (
                    "waiting for input: attach to answer" if waiting else f"agent {payload.state}"
                )
            elif isinstance(payload, Advanced):  # a stage begun: its first check is running
                note = _STAGE_DOING.get(str(payload.to), note)
            else:
                note = _DOING.get(type(payload), note)
        return note

    def spent_usd(self) -> float | None:
        """What the item's agent runs and reviews reported; None when nothing was known."""
        return known_cost(self._payloads)

    def call_costs(self) -> list[float | None]:
        """What each agent run and review of the item cost, None where it is not known (an
        agent that reported none); an agent that never started cost nothing and is left out."""
        return [
            payload.cost_usd
            for payload in self._payloads
            if isinstance(payload, Reviewed)
            or (isinstance(payload, AgentFinished) and payload.state != "missing_binary")
        ]


def known_cost(payloads: Iterable[Payload | object]) -> float | None:
    """The cost the agents and reviewers reported; None when none was known (never 0)."""
    costs = [
        payload.cost_usd
        for payload in payloads
        if isinstance(payload, AgentFinished | Reviewed) and payload.cost_usd is not None
    ]
    return sum(costs) if costs else None
