"""One attempt at one item, under one lease: worktree, agent, gates, checks, review, delivery.

The attempt is a straight line of stages, each of which either hands on to the next or ends the
lease (failed with evidence for the next prompt, parked with its attempt refunded, or delivered).
Before the agent starts, the item's history says whether a finished stage can be skipped: an
approved commit goes straight to delivery, a checked one straight to review.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_harness.errors import HarnessError
from agent_harness.failures import Action, FailureClass, action_for, can_retry
from agent_harness.git.errors import RepoRefused
from agent_harness.git.settings import GitSettingsChanged
from agent_harness.git.worktrees import Worktree
from agent_harness.implement.protocol import OVER_BUDGET, ImplementResult
from agent_harness.models.client import ModelCallFailed
from agent_harness.models.parking import EndpointParked
from agent_harness.pipeline.agent_end import finished, lost, result_class
from agent_harness.pipeline.budgets import (
    call_bound,
    counted_usd,
    item_bound,
    item_over_budget,
    next_call_refused,
)
from agent_harness.pipeline.checks import CheckResult, absent_for_good, not_found, order_checks
from agent_harness.pipeline.delivery import deliver
from agent_harness.pipeline.gates import (
    carries_huge_file,
    leaks_secret,
    leaves_conflicts,
    touches_protected,
)
from agent_harness.pipeline.history import AGENT_PICKED_UP, ItemHistory
from agent_harness.pipeline.parts import ITEM_AT_WORK, RunParts
from agent_harness.pipeline.prompt import Feedback, build_prompt, read_agents_md
from agent_harness.pipeline.settings import RunRefused
from agent_harness.plan.model import WorkItem, check_command
from agent_harness.queue import items, leases
from agent_harness.queue.items import ItemState
from agent_harness.queue.leases import Lease, LeaseLost
from agent_harness.review.verdict import ReviewRequest, review
from agent_harness.secrets.environment import without_secrets
from agent_harness.sessions.groups import GROUP_FILE, stop_leftover
from agent_harness.store.errors import StoreError
from agent_harness.store.events import (
    AgentStarted,
    AgentStateChanged,
    AttemptStarted,
    CheckRan,
    ChecksPassed,
    Deferred,
    LeaseLostNote,
    Payload,
    Pushed,
    Resumed,
    Reviewed,
    WorktreeReady,
)
from agent_harness.store.model_events import ModelLost, ReviewAskedAgain
from agent_harness.tracker.protocol import TrackerError
from agent_harness.tracker.protocol import failure_class as tracker_failure

if TYPE_CHECKING:
    from agent_harness.pipeline.checks import CheckRun


DELIVERY_WAITS = "delivery waits for the tracker"
_DELIVERY_BACKOFF_S = 60.0
DELIVERY_BACKOFF_CAP_S = 1800.0
_REVIEWER_BACKOFF_S = 60.0
_REVIEWER_BACKOFF_CAP_S = 1800.0


class Attempt:
    """The stages of one attempt. `run` never raises for the item's own troubles: every way it
    can end is recorded and ends the lease."""

    def __init__(self, parts: RunParts, item: WorkItem, lease: Lease) -> None:
        self.parts = parts
        self.item = item
        self.lease = lease
        self.history = ItemHistory.read(parts.store, parts.project, item.id)
        self.scanned: str | None = None  # the commit this attempt's gates found no secret in

    def run(self) -> None:
        at_work = ITEM_AT_WORK.set(self.item.id)
        try:
            self._run()
        finally:
            ITEM_AT_WORK.reset(at_work)

    def _run(self) -> None:
        parts, item, lease = self.parts, self.item, self.lease
        parts.note(item.id, AttemptStarted(attempt=lease.attempt, worker=lease.worker))
        asked = self.history.unanswered_review()
        if asked is not None:  # its run died while the reviewer was asked: paid, unknown
            self._emit(ModelLost(role="reviewer", worker=asked.worker, run_id=None))
        try:
            self._stages()
        except LeaseLost:
            parts.emit(item.id, LeaseLostNote(worker=lease.worker, attempt=lease.attempt))
        except GitSettingsChanged as exc:
            # Not the item's fault for sure (another worker's agent may have written them), and
            # no git of ours may run here until a person looked: the item waits, its attempt
            # given back, and the run stops.
            parts.defer(lease, parts.store.clock(), f"the run stops: {exc.message}", self.history)
            parts.halt(exc)
        except RepoRefused as exc:  # the clone refuses as it is set up: no attempt would do
            parts.fail(lease, f"{type(exc).__name__}: {exc.message}", FailureClass.REPOSITORY)
        except StoreError as exc:
            # The database failed, not the item: its attempt is given back, and it runs again
            # once the database answers (if it does not, recording this fails too, and says so).
            parts.defer(lease, parts.store.clock(), f"the database failed: {exc}", self.history)
        except HarnessError as exc:
            # Classified errors of our own (git, tracker, sessions) fail this attempt visibly.
            parts.fail(lease, f"{type(exc).__name__}: {exc.message}", FailureClass.TRACKER)

    def _stages(self) -> None:
        tree = self._worktree()
        answering = self.history.answering_round()
        if tree.foreign is not None and answering is not None:
            self.parts.stop_rounds(self.lease, answering.pr, tree.foreign, self.history)
            return
        if self._resume_approved(tree) or self._resume_checked(tree):
            return
        result = self._resume_finished_run(tree)
        if result is None:
            if self._agent_parked():
                return
            held = self._may_pay("implementer")
            if held is None:
                return
            try:
                result = self._implement(tree, self._allowance(held))
            finally:
                self._paid(held)
        if not result.ok:
            self._agent_failed(result)
            return
        if self._over_budget():
            return
        sha = self._commit(tree, result)
        if sha is None:
            return
        parts, item, lease, history = self.parts, self.item, self.lease, self.history
        if (
            touches_protected(parts, item, lease, tree, history, sha)
            or leaks_secret(parts, item, lease, tree, history)
            or leaves_conflicts(parts, item, lease, tree, history, sha)
            or carries_huge_file(parts, item, lease, tree, history, sha)
        ):
            return
        self.scanned = sha
        leases.advance(self.parts.store, self.lease, ItemState.CHECKS)
        checks = self._checks(tree)
        if checks.passed:
            self._emit(ChecksPassed(sha=sha))
            self._review_and_deliver(tree, checks, sha)
            return
        failed = checks.first_failure
        assert failed is not None
        if self._check_cannot_run(failed, tree):
            return
        summary = f"check `{failed.command}` {failed.status}"
        feedback = Feedback("checks", summary, failed.output_tail)
        self.parts.remember(self.item.id, feedback, self.history)
        self.parts.fail(self.lease, summary, FailureClass.CHECK_FAILED)

    def _emit(self, payload: Payload) -> None:
        self.parts.emit(self.item.id, payload, self.history)

    # -- stages --------------------------------------------------------------------------------
    def _worktree(self) -> Worktree:
        """The item's worktree. Each retry by a person (or the reconciler), and each attempt
        after a change that touched a protected path, is a generation of its own: a new branch
        from the current default branch, so neither work merged and reverted since nor a
        rejected commit is built on; the old branch is left as it was, or discarded when the
        retry said so (`work retry --fresh`)."""
        generation, fresh = self.history.generation()
        parts = self.parts
        # A check an earlier run was killed in could still be writing into the worktree.
        stopped = stop_leftover(self._check_group())
        checking = self._checking().exists()
        with parts.git_lock:
            if fresh:
                parts.repo.discard(self.item.id, parts.namespace, generation - 1, self._other_ids())
            worked = self.history.last(WorktreeReady)
            tree = parts.repo.prepare(
                self.item.id,
                self.item.title,
                parts.namespace,
                generation,
                pushed=self.history.last(Pushed) is not None,
                known=worked.branch if worked is not None else None,
                guard_private=True,
                ours=self._pushed_by_us(),
                others=self._other_ids,
            )
        # What that check wrote is no agent's work: the next commit must not take it in. A
        # person may have edited the worktree while no run held it: the tracked files'
        # changes are kept as a patch first.
        saved: Path | None = None
        left: list[str] = []
        if checking:
            saved = parts.item_dir(self.item.id) / f"put-back-{int(parts.store.clock())}.patch"
            left = parts.repo.discard_uncommitted(tree, save_to=saved)
        if len(left) > 50:  # a folder of output git does not ignore: named in part
            left = [*left[:50], f"... and {len(left) - 50} more"]
        self._checking().unlink(missing_ok=True)
        self._emit(
            WorktreeReady(
                path=str(tree.path),
                branch=tree.branch,
                base=tree.base_sha,
                reused=tree.reused,
                kept=tree.kept,
                stopped_check=stopped,
                discarded=left,
                saved=str(saved) if saved is not None and saved.exists() else None,
            )
        )
        return tree

    def _pushed_by_us(self) -> set[str] | None:
        """For an attempt answering a round on its pull request, the heads harness runs pushed:
        any other head on the branch is a person's, never built on or pushed over."""
        if self.history.answering_round() is None:
            return None
        return {pushed.sha for pushed in self.history.all(Pushed)}

    def _other_ids(self) -> list[str]:
        """The plan's other items: a branch of one whose id goes on from this one's is no
        branch of this item's."""
        return [
            i for i in items.item_ids(self.parts.store, self.parts.project) if i != self.item.id
        ]

    def _check_group(self) -> Path:
        """Where the process group of the item's running check is written down."""
        return self.parts.item_dir(self.item.id) / GROUP_FILE

    def _checking(self) -> Path:
        """There from the checks' start until the worktree is back at the checked commit."""
        return self.parts.item_dir(self.item.id) / "checks.running"

    def _resume_approved(self, tree: Worktree) -> bool:
        """Work approved and pushed before a crash is delivered again, never re-reviewed."""
        approval = self.history.approval()
        if approval is None or approval.sha is None:
            return False
        head = self.parts.repo.head(tree)
        if head != approval.sha:
            return False
        self._emit(Resumed(sha=head, why="this commit was already approved"))
        self._deliver(tree, None, approval)
        return True

    def _resume_checked(self, tree: Worktree) -> bool:
        """A commit that passed its checks but never got a verdict (the reviewer was down, or
        the run died) goes straight back to review: the agent is not paid to redo it."""
        sha = self.history.checked_sha()
        repo = self.parts.repo
        if sha is None or repo.head(tree) != sha or repo.has_uncommitted(tree):
            return False
        self._emit(Resumed(sha=sha, why="checked, not yet reviewed"))
        self._review_and_deliver(tree, None, sha)
        return True

    def _resume_finished_run(self, tree: Worktree) -> ImplementResult | None:
        """An agent that finished before its worker died (during the commit or the checks) is
        not run again: its work is in the worktree, and the attempt goes on from there."""
        finished = self.history.finished_run(str(tree.path))
        if finished is None:
            return None
        self._emit(Resumed(sha=self.parts.repo.head(tree), why="the agent had finished"))
        return ImplementResult(
            ok=True, state=finished.state, reason=finished.reason, output_tail=finished.tail
        )

    def _implement(self, tree: Worktree, allowance: float | None) -> ImplementResult:
        parts, item = self.parts, self.item
        feedback = self.history.feedback()
        prompt = build_prompt(
            item,
            checks=parts.settings.checks,
            agents_md=read_agents_md(tree.path),
            feedback=feedback,
            attempt=self.lease.attempt,
        )
        host = getattr(parts.implementer, "host", None)
        session, item_dir = self._session_and_folder(host)
        started = self.history.unfinished_start(str(tree.path))
        # The same agent, in the same session: after a restart with another --agent, the old
        # agent's output is no answer of the new one's (its rules would misread it).
        resume = (
            started is not None
            and started.session == session
            and started.implementer == parts.implementer.name
        )
        if resume and host is not None and not host.exists(session):
            # Gone with the machine or the terminal server: what that agent did and cost is
            # not known (an unknown cost, never 0), and a new one starts, said as such.
            self._emit(lost(session, parts.run_id))
            resume = False
        if resume:
            self._emit(Resumed(sha=parts.repo.head(tree), why=AGENT_PICKED_UP))
        else:
            if self.history.last(AgentStarted) is not None:  # an earlier attempt's may be left
                _close_ended(host, session)
            self._emit(
                AgentStarted(
                    implementer=parts.implementer.name,
                    session=session,
                    attempt=self.lease.attempt,
                    host=getattr(host, "kind", None),
                    host_url=getattr(host, "base_url", None),
                    log=str(item_dir / "logs" / f"{session}.log"),
                    worktree=str(tree.path),
                )
            )
        result = parts.implementer.implement(
            item,
            tree,
            prompt,
            session=session,
            state_dir=item_dir,
            on_state=lambda state, detail: self._emit(
                AgentStateChanged(state=state, detail=detail)
            ),
            feedback=None if feedback is None else feedback.text(),
            on_event=self._emit,
            resume=resume,
            allowance_usd=allowance,
        )
        self._emit(finished(result, parts.run_id))
        return result

    def _allowance(self, held: float) -> float | None:
        """What the implementer may spend in this run of it: what the item's budget and the
        run's (beside the other calls in flight) have left, less what the review after it may
        cost; None when neither is set."""
        rooms = [room for room in self._rooms(held) if room is not None]
        return max(0.0, min(rooms)) if rooms else None

    def _rooms(self, held: float) -> tuple[float | None, float | None]:
        """The room the item's budget and the run's leave the implementer (see `_allowance`),
        each spend counted alike (a call of unknown cost as max_call_usd), None where unset."""
        parts, settings = self.parts, self.parts.settings
        limit, run, max_call = settings.item_cost_usd, parts.run_budget, settings.max_call_usd
        if limit is None and (run is None or run.limit is None):
            return None, None
        review = call_bound(parts.store, parts.project, "reviewer", max_call)
        spent = counted_usd(self.history.call_costs(), max_call)
        mine = None if limit is None else limit - (limit if spent is None else spent) - review
        room = None if run is None else run.room(held)
        return mine, None if room is None else room - review

    def _stopped_before_passing(self, result: ImplementResult) -> None:
        """The implementer stopped before a call its allowance could not pay for: the item
        fails for good when its own budget was the smaller, else the run's is spent (the item
        waits for the next run, its attempt refunded, and the run stops claiming)."""
        parts, lease, run = self.parts, self.lease, self.parts.run_budget
        mine, room = self._rooms(0.0)  # both less what this run spent, so in the same order
        if run is not None and room is not None and (mine is None or room < mine):
            run.stop(result.reason)
            parts.defer(lease, parts.store.clock(), run.reason or "", self.history)
            return
        reason = f"item cost budget: {result.reason} (budgets.item_cost_usd)"
        parts.fail(lease, reason, FailureClass.OVER_BUDGET)

    def _session_and_folder(self, host: Any) -> tuple[str, Path]:
        """The item's session name and folder. An earlier start of this item under other names
        (a harness before the names took a plan's whole key) goes on under those: its agent may
        still be alive in that session, and its saved steps are in that folder."""
        parts, item = self.parts, self.item
        session, item_dir = parts.session_name(item.id), parts.item_dir(item.id)
        before = self.history.last(AgentStarted)
        if before is None:
            return session, item_dir
        if before.session != session and host is not None:
            with contextlib.suppress(HarnessError):  # a host that cannot say: the new name
                if host.exists(before.session):
                    session = before.session
        old_dir = Path(before.log).parent.parent if before.log else item_dir
        moved = old_dir != item_dir and old_dir.parent == item_dir.parent
        if moved and old_dir.is_dir() and not item_dir.exists():
            item_dir = old_dir
        return session, item_dir

    def _agent_failed(self, result: ImplementResult) -> None:
        parts, lease = self.parts, self.lease
        if result.state == OVER_BUDGET:
            self._stopped_before_passing(result)
            return
        if result.wait_until is not None:
            # A spent window or cap: wait for its reset (or a person) without burning an
            # attempt, and keep every other item off the same account until then.
            reason = result.reason
            if result.parked_endpoint is None:
                key = f"agent:{parts.implementer.name}"
                parts.store.park(key, result.wait_until, result.reason)
                reason = f"{key} parked: {result.reason}"
            parts.defer(lease, result.wait_until, reason, self.history)
            return
        feedback = Feedback("agent", result.reason, result.output_tail)
        parts.remember(lease.item_id, feedback, self.history)
        parts.fail(lease, f"agent {result.state}: {result.reason}", result_class(result))

    def _reviewer_parked(self) -> bool:
        """A CLI reviewer whose account is parked is not asked (and paid) again before its
        reset or a person's `work unpark`: the checked commit waits, attempt refunded."""
        key = getattr(self.parts.reviewer, "parking_key", None)
        parked = self.parts.store.parked(key) if isinstance(key, str) else None
        if parked is not None:
            reason = f"reviewer: {key} is parked: {parked[1]}"
            self.parts.defer(self.lease, parked[0], reason, self.history)
        return parked is not None

    def _agent_parked(self) -> bool:
        """An agent account whose window or cap is spent is not started again before its
        reset (or a person's `work unpark`): the item waits, its attempt refunded."""
        key = f"agent:{self.parts.implementer.name}"
        parked = self.parts.store.parked(key)
        if parked is not None:
            self.parts.defer(self.lease, parked[0], f"{key} parked: {parked[1]}", self.history)
        return parked is not None

    def _may_pay(self, role: str) -> float | None:
        """May the item pay for one more call of `role`? Its spend plus a bound on that call
        must stay within the item's budget (else it fails for good) and the run's (else it
        waits, attempt refunded, and the run stops claiming). The bound held for the run, to
        give back with `_paid`; None when refused."""
        parts, lease = self.parts, self.lease

        def bound() -> float:
            return call_bound(parts.store, parts.project, role, parts.settings.max_call_usd)

        limit = parts.settings.item_cost_usd
        # The bound reads the project's costs so far: not paid for when no budget asks for it.
        reason = None
        if limit is not None:
            max_call = parts.settings.max_call_usd
            whole = item_bound(parts.store, parts.project, role, max_call)
            reason = next_call_refused(self.history, limit, role, whole, max_call)
        if reason is not None:
            parts.fail(lease, reason, FailureClass.OVER_BUDGET)
            return None
        budget = parts.run_budget
        held = 0.0 if budget is None else budget.reserve(bound)
        if held is None:
            assert budget is not None
            parts.defer(lease, parts.store.clock(), budget.reason or "", self.history)
        return held

    def _paid(self, held: float) -> None:
        if self.parts.run_budget is not None:
            self.parts.run_budget.settle(held)

    def _over_budget(self) -> bool:
        reason = item_over_budget(self.history, self.parts.settings.item_cost_usd)
        if reason is not None:
            self.parts.fail(self.lease, reason, FailureClass.OVER_BUDGET)
        return reason is not None

    def _commit(self, tree: Worktree, result: ImplementResult) -> str | None:
        """Commit what the agent left, so the checks, the review and the push all see one
        commit and a resumed run can tell a checked commit by its sha; None when the agent
        changed nothing (the attempt has failed)."""
        repo = self.parts.repo
        repo.verify_branch(tree)
        sha = repo.commit_all(tree, f"{self.item.id}: {self.item.title}") or repo.head(tree)
        refused = any(r.sha == sha and not r.approved for r in self.history.all(Reviewed))
        answering = self.history.answering_round()
        unanswered = (
            answering is not None and answering.action == "agent" and sha == answering.head_sha
        )
        if sha != tree.base_sha and not refused and not unanswered:
            return sha
        reason = f"the agent finished but changed nothing ({result.reason})"
        if unanswered:
            # A round's feedback on the pull request's head, and the head as it was: pushing it
            # again would tell the pull request its feedback was answered.
            assert answering is not None
            reason = (
                f"the agent left pull request #{answering.pr} as it was in answer to round "
                f"{answering.round} ({answering.summary}; {result.reason})"
            )
        elif refused:
            # The reviewer already said no to this very commit: asking again pays for the
            # same answer.
            reason = f"the agent left the commit the reviewer refused unchanged ({result.reason})"
        feedback = Feedback("agent", reason, result.output_tail)
        self.parts.remember(self.item.id, feedback, self.history)
        self.parts.fail(self.lease, reason, FailureClass.NO_CHANGE)
        return None

    def _check_env(self) -> dict[str, str]:
        parts = self.parts
        return without_secrets(
            parts.env, allow=parts.settings.check_env_pass, known=parts.known_secrets
        )

    def _check_cannot_run(self, failed: CheckResult, tree: Worktree) -> bool:
        """A check whose program is not installed here fails every attempt of every item
        alike, and no agent can install it: the item waits with its attempt given back, and
        the run stops saying what to install (as it would have before starting, had the
        program been in plain sight)."""
        env = self._check_env()
        program = absent_for_good(failed, env, tree.path)
        if program is None:
            return False
        reason = not_found(failed.command, program, env)
        parts = self.parts
        parts.defer(self.lease, parts.store.clock(), f"the run stops: {reason}", self.history)
        parts.halt(RunRefused(reason))
        return True

    def _checks(self, tree: Worktree) -> CheckRun:
        parts = self.parts
        commands = list(parts.settings.checks)
        own = check_command(self.item.success_check)
        if own and own not in commands:
            commands.append(own)
        ordered = order_checks(commands, parts.check_durations())
        env = self._check_env()
        checking = self._checking()
        checking.parent.mkdir(parents=True, exist_ok=True)
        checking.touch()
        run = parts.check_runner(
            ordered,
            tree.path,
            timeout_s=parts.settings.check_timeout_s,
            env=env,
            group_file=self._check_group(),
        )
        # What the checks wrote (reports, caches git does not ignore, a formatter's rewrites)
        # is not the checked commit: left, the agent's next commit would take it in. Only while
        # the lease holds: one lapsed meanwhile means another attempt works in this tree now.
        self.lease = leases.heartbeat(parts.store, self.lease)
        parts.repo.discard_uncommitted(tree)
        checking.unlink(missing_ok=True)
        for result in run.results:
            self._emit(
                CheckRan(
                    command=result.command,
                    exit_code=result.exit_code,
                    duration_s=round(result.duration_s, 3),
                    timed_out=result.timed_out,
                    missing=result.missing,
                    tail=result.output_tail[-1500:],
                )
            )
        parts.add_check_durations(run.durations())
        return run

    def _review_and_deliver(self, tree: Worktree, checks: CheckRun | None, sha: str) -> None:
        parts, lease = self.parts, self.lease
        if self._reviewer_parked():
            return
        held = self._may_pay("reviewer")
        if held is None:
            return
        try:
            leases.advance(parts.store, lease, ItemState.REVIEW)
            verdict = self._review(tree, checks, sha)
        except EndpointParked as exc:
            # The reviewer's window or cap is spent: keep the checked commit and wait, attempt
            # refunded; a CLI reviewer's account is parked here for every worker (a model
            # endpoint's, by its client).
            if exc.endpoint == getattr(parts.reviewer, "parking_key", None):
                parts.store.park(exc.endpoint, exc.until, exc.reason)
            parts.defer(lease, exc.until, f"reviewer: {exc.message}", self.history)
            return
        except ModelCallFailed as exc:
            self._reviewer_failed(exc)
            return
        finally:
            self._paid(held)
        if not verdict.approved:
            reasons = "; ".join(verdict.reasons) or "no reason given"
            feedback = Feedback("review", f"the reviewer said no: {reasons}")
            parts.remember(self.item.id, feedback, self.history)
            refused = (
                FailureClass.REVIEW_REFUSED_FOR_GOOD
                if verdict.permanent
                else FailureClass.REVIEW_REFUSED
            )
            parts.fail(lease, f"review: {reasons}", refused)
            return
        self._deliver(tree, checks, verdict)

    def _reviewer_failed(self, exc: ModelCallFailed) -> None:
        """A reviewer that did not answer is not a reviewer that said no. A failure another
        try can help (a busy or failing provider, a reviewer that timed out) makes the reviewer
        unavailable: the checked commit waits for it, with a growing backoff and the attempt
        refunded, so the implementer is not paid again. Any other class is the policy's."""
        parts, lease, failure = self.parts, self.lease, exc.failure
        reason = f"reviewer: {exc.message}"
        found = FailureClass(failure.kind)
        if can_retry(found):
            found = FailureClass.REVIEWER_UNAVAILABLE
        if action_for(found) is not Action.PARK:
            parts.fail(lease, f"reviewer failed: {exc.message}", found)
            return
        tries = sum(
            1
            for payload in self.history.all(Deferred)
            if (payload.reason or "").startswith("reviewer: ")
        )
        now = parts.store.clock()
        stated = failure.reset_at or (now + failure.retry_after if failure.retry_after else 0.0)
        backoff = now + min(_REVIEWER_BACKOFF_CAP_S, _REVIEWER_BACKOFF_S * 2**tries)
        parts.defer(lease, max(stated, backoff), reason, self.history)

    def _deliver(self, tree: Worktree, checks: CheckRun | None, verdict: Reviewed) -> None:
        """Deliver approved work; when the tracker is unavailable, park the item (attempt
        refunded) and deliver again later: the agent and the reviewer are never paid twice."""
        parts, lease = self.parts, self.lease
        try:
            scanned = verdict.sha is not None and verdict.sha == self.scanned
            deliver(parts, self.item, lease, tree, checks, verdict, self.history, scanned=scanned)
        except TrackerError as exc:
            failure = tracker_failure(exc)
            if action_for(failure) is not Action.PARK:
                parts.fail(lease, f"delivery: {exc.message}", failure)
                return
            reason = f"{DELIVERY_WAITS}: {exc.message}"
            if failure is FailureClass.TRACKER_CREDENTIALS:
                # No delivery gets past a token the tracker refuses: the work waits for the
                # next run (which has a good token, or stops at once), this one stops.
                parts.defer(lease, parts.store.clock(), reason, self.history)
                parts.halt(exc)
                return
            tries = sum(
                1
                for payload in self.history.all(Deferred)
                if (payload.reason or "").startswith(DELIVERY_WAITS)
            )
            wait = min(DELIVERY_BACKOFF_CAP_S, _DELIVERY_BACKOFF_S * 2**tries)
            parts.defer(lease, parts.store.clock() + wait, reason, self.history)

    def _review(self, tree: Worktree, checks: CheckRun | None, sha: str) -> Reviewed:
        item = self.item
        request = ReviewRequest(
            item_id=item.id,
            title=item.title,
            success_check=item.success_check,
            diff=self.parts.repo.diff(tree, sha),
            checks=checks,
        )
        # A second ask (the first answer unusable) is on record before it is paid for, so a run
        # that dies during it leaves that call counted as lost (see `unanswered_review`).
        outcome = review(
            self.parts.reviewer,
            request,
            on_asked_again=lambda problem: self._emit(ReviewAskedAgain(problem=problem)),
        )
        verdict = Reviewed(
            approved=outcome.verdict.approved,
            reasons=list(outcome.verdict.reasons),
            permanent=outcome.verdict.permanent,
            malformed=outcome.malformed,
            attempts=outcome.attempts,
            vendor=outcome.vendor,
            model=outcome.model,
            tokens_in=outcome.tokens_in,
            tokens_out=outcome.tokens_out,
            cost_usd=outcome.cost_usd,
            sha=sha,
            run_id=self.parts.run_id or None,
        )
        self._emit(verdict)
        return verdict


def _close_ended(host: Any, session: str) -> None:
    """Close an ended session left under the item's name (its worker died after it ended), so
    that a session found there after the new start is recorded is always that start's: a
    restart picks it up as this attempt's agent, never an earlier attempt's."""
    if host is None:
        return
    with contextlib.suppress(HarnessError):
        if host.exists(session) and not host.status(session).alive:
            host.kill(session)
