"""The run pipeline: claim -> worktree -> implementer -> checks -> review -> pull request.

Each attempt at an item is one lease. A failed check or a reviewer's "no" ends the lease as a
transient failure carrying its evidence, and the next claim's prompt carries that evidence back
to the implementer. Everything that happens is an event in the store, and everything the tracker
already knows (an open PR, an approval of the same commit) is reused, so a run killed at any
point can simply be started again.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_harness.errors import HarnessError
from agent_harness.pipeline.prompt import Feedback, build_prompt, read_agents_md
from agent_harness.plan.model import Plan, WorkItem, check_command
from agent_harness.queue import work
from agent_harness.queue.work import ItemState, Lease, LeaseLost
from agent_harness.secrets.environment import without_secrets
from agent_harness.secrets.process import process_env
from agent_harness.tracker.sync import PullMarker, SyncReport, read_marker, sync_plan

if TYPE_CHECKING:
    from agent_harness.git.worktrees import WorkRepo, Worktree
    from agent_harness.implement.protocol import Implementer, ImplementResult
    from agent_harness.pipeline.checks import CheckRun
    from agent_harness.review.verdict import Reviewer
    from agent_harness.store.database import Store
    from agent_harness.store.events import Event
    from agent_harness.tracker.protocol import Tracker

Observer = Callable[[str, str, dict[str, Any]], None]


class RunInterrupted(HarnessError):
    """interrupted: items in flight keep their leases, and agents keep running in their
    sessions; run the same command again to take them back"""

    exit_code = 130


class RunRefused(HarnessError):
    """The run cannot start as configured."""

    exit_code = 2


@dataclass
class RunSettings:
    """Budgets and switches of one run (the CLI fills it from config and flags)."""

    checks: list[str] = field(default_factory=list)
    check_timeout_s: float = 600.0
    max_attempts: int = 3
    lease_s: float = 300.0
    workers: int = 1
    protected: list[str] = field(default_factory=lambda: [".github/**", "agent-harness.toml"])
    allow_same_vendor: bool = False
    item_cost_usd: float | None = None
    run_cost_usd: float | None = None
    only: set[str] | None = None
    reconcile: bool = True  # pull merged / closed / reverted back before claiming anything
    requeue_reverted: bool = False
    revert_window_days: int = 30
    worker_prefix: str | None = None  # default: this host and state dir, stable across restarts
    idle_poll_s: float = 0.2
    check_env_pass: list[str] = field(default_factory=list)  # secret-looking names checks get
    secret_shapes_ignored_in: list[str] = field(default_factory=list)  # globs: fixtures


@dataclass
class ItemOutcome:
    id: str
    title: str
    state: str
    attempts: int
    reason: str | None = None
    pr_number: int | None = None
    pr_url: str | None = None
    not_before: float | None = None


@dataclass
class RunReport:
    project: str
    sync: SyncReport | None
    items: list[ItemOutcome] = field(default_factory=list)
    events: int = 0
    cost_usd: float | None = None
    stopped_by_budget: bool = False
    reconciled: list[dict[str, Any]] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "project": self.project,
            "items": [vars(item) for item in self.items],
            "events": self.events,
            "cost_usd": self.cost_usd,
            "stopped_by_budget": self.stopped_by_budget,
            "reconciled": self.reconciled,
            "sync": self.sync.as_json() if self.sync else None,
        }


class Pipeline:
    """Runs the items of one plan on one repository."""

    def __init__(
        self,
        *,
        plan: Plan,
        plan_key: str,
        tracker: Tracker,
        store: Store,
        repo: WorkRepo,
        implementer: Implementer,
        reviewer: Reviewer,
        settings: RunSettings,
        state_dir: Path,
        env: Mapping[str, str] | None = None,
        observer: Observer | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
        known_secrets: Sequence[str] = (),
    ) -> None:
        self.plan = plan
        self.plan_key = plan_key
        self.project = f"{tracker.repo}:{plan_key}"
        self.tracker = tracker
        self.store = store
        self.repo = repo
        self.implementer = implementer
        self.reviewer = reviewer
        self.settings = settings
        self.state_dir = state_dir
        self.env = process_env() if env is None else dict(env)
        # Secret values held outside `env` (a token from a config file or `gh auth token`):
        # withheld from checks under any name, and refused in any diff.
        self._known_secrets = (
            *known_secrets,
            *_secrets_held_by(implementer),
            *_secrets_held_by(reviewer),
        )
        self.observer = observer or (lambda _kind, _item, _payload: None)
        self.clock = clock
        self.sleep = sleep
        self.issues: dict[str, int] = {}
        self.same_vendor_note: str | None = None
        self._budget_hit = threading.Event()
        self._setup_checked = False
        self._depends = {item.id: item.depends_on for item in plan.items}
        self._tracker_lock = threading.Lock()  # one tracker client, used by several workers
        self._git_lock = threading.Lock()
        self._durations_lock = threading.Lock()  # worktree add/prune share the repository's index

    # -- setup ---------------------------------------------------------------------------------
    def check_setup(self) -> None:
        """Refuse, before any work starts, what would fail every item the same way."""
        from agent_harness.review.verdict import check_vendors

        if self._setup_checked:
            return

        self.same_vendor_note = check_vendors(
            self.implementer.vendor, self.reviewer.vendor, self.settings.allow_same_vendor
        )
        info = self.tracker.repo_info()
        if info.archived:
            raise RunRefused(f"{self.tracker.repo} is archived: no pull request can be opened")
        self.repo.set_default_branch(info.default_branch)
        self.repo.check_clean_default()
        self._setup_checked = True

    def prepare(self) -> SyncReport:
        """Mirror the plan to issues (so every PR can close one) and queue the items."""
        with self._tracker_lock:
            report = sync_plan(self.plan, self.tracker, self.plan_key)
        for issue in self.tracker.list_issues():
            try:
                marker = read_marker(issue.body)
            except ValueError:
                continue
            if marker and marker.plan_key == self.plan_key:
                self.issues.setdefault(marker.item_id, issue.number)
        work.unhold(self.store, self.project)  # whatever an earlier --only run held back
        work.enqueue(
            self.store, self.project, self.plan.items, max_attempts=self.settings.max_attempts
        )
        in_plan = {item.id for item in self.plan.items}
        queued = {record.id for record in work.list_items(self.store, self.project)}
        for item_id in work.withdraw(
            self.store, self.project, sorted(queued - in_plan), "no longer in the plan"
        ):
            self.observer("withdrawn", item_id, {"reason": "no longer in the plan"})
        if self.settings.only is not None:
            others = sorted(in_plan - self.settings.only)
            work.hold(self.store, self.project, others)
        return report

    # -- the loop for one item ----------------------------------------------------------------
    def emit(self, item_id: str, kind: str, payload: dict[str, Any]) -> None:
        self.store.append_event(self.project, item_id, kind, payload)
        self.observer(kind, item_id, payload)

    def handle(self, lease: Lease) -> None:
        """The fleet's handler: one attempt at one item, ending the lease one way or another."""
        item = self.plan.item(lease.item_id)
        self.observer("attempt", item.id, {"attempt": lease.attempt, "worker": lease.worker})
        try:
            self._attempt(item, lease)
        except LeaseLost:
            self.emit(item.id, "lease_lost", {"worker": lease.worker, "attempt": lease.attempt})
        except HarnessError as exc:
            # Classified errors of our own (git, tracker, sessions) fail this attempt visibly.
            self._fail(lease, f"{type(exc).__name__}: {exc.message}", permanent=False)

    def _attempt(self, item: WorkItem, lease: Lease) -> None:
        with self._git_lock:
            tree = self.repo.prepare(item.id, item.title, self.namespace)
        self.emit(
            item.id,
            "worktree",
            {
                "path": str(tree.path),
                "branch": tree.branch,
                "base": tree.base_sha,
                "reused": tree.reused,
            },
        )
        if self._resume_open_pull(item, lease, tree):
            return
        if self._resume_at_review(item, lease, tree):
            return
        feedback = self._last_feedback(item.id)
        prompt = build_prompt(
            item,
            checks=self.settings.checks,
            agents_md=read_agents_md(tree.path),
            feedback=feedback,
            attempt=lease.attempt,
        )
        session = self.session_name(item.id)
        item_state = self.state_dir / "items" / re.sub(r"[^A-Za-z0-9_-]+", "-", item.id)
        host = getattr(self.implementer, "host", None)
        self.emit(
            item.id,
            "agent_started",
            {
                "implementer": self.implementer.name,
                "session": session,
                "attempt": lease.attempt,
                "host": getattr(host, "kind", None),
                "log": str(item_state / "logs" / f"{session}.log"),
                "worktree": str(tree.path),
            },
        )
        result = self.implementer.implement(
            item,
            tree,
            prompt,
            session=session,
            state_dir=item_state,
            on_state=lambda state, detail: self.emit(
                item.id, "agent_state", {"state": state, "detail": detail}
            ),
        )
        self.emit(item.id, "agent_finished", _result_payload(result))
        if not result.ok:
            self._agent_failed(lease, result)
            return
        if self._over_item_budget(item, lease):
            return
        self.repo.verify_branch(tree)
        # What the agent left is committed now, so the checks, the review and the push all
        # see one commit, and a resumed run can tell a checked commit by its sha.
        sha = self.repo.commit_all(tree, f"{item.id}: {item.title}") or self.repo.head(tree)
        if sha == tree.base_sha:
            reason = f"the agent finished but changed nothing ({result.reason})"
            self._remember(item.id, Feedback("agent", reason, result.output_tail))
            self._fail(lease, reason, permanent=False)
            return
        if self._protected(item, lease, tree) or self._leaks_secret(item, lease, tree):
            return
        work.advance(self.store, lease, ItemState.CHECKS)
        run = self._checks(item, tree)
        if not run.passed:
            failed = run.first_failure
            assert failed is not None
            summary = f"check `{failed.command}` {failed.status}"
            self._remember(item.id, Feedback("checks", summary, failed.output_tail))
            self._fail(lease, summary, permanent=False)
            return
        self.emit(item.id, "checks_passed", {"sha": sha})
        self._review_and_deliver(item, lease, tree, run, sha)

    def _review_and_deliver(
        self, item: WorkItem, lease: Lease, tree: Worktree, run: CheckRun | None, sha: str
    ) -> None:
        from agent_harness.models.client import ModelCallFailed
        from agent_harness.models.failures import FailureKind
        from agent_harness.models.parking import EndpointParked

        work.advance(self.store, lease, ItemState.REVIEW)
        try:
            verdict_payload = self._review(item, tree, run, sha)
        except EndpointParked as exc:
            # The reviewer's window is spent: keep the checked commit and wait, attempt refunded.
            work.defer(self.store, lease, exc.until, f"reviewer: {exc.message}")
            self.emit(item.id, "waiting", {"until": exc.until, "reason": exc.message})
            return
        except ModelCallFailed as exc:
            if exc.failure.kind is FailureKind.WINDOW and exc.failure.reset_at:
                work.defer(self.store, lease, exc.failure.reset_at, f"reviewer: {exc.message}")
                self.emit(
                    item.id, "waiting", {"until": exc.failure.reset_at, "reason": exc.message}
                )
                return
            permanent = not exc.failure.retryable
            self._fail(lease, f"reviewer failed: {exc.message}", permanent=permanent)
            return
        if not verdict_payload["approved"]:
            reasons = "; ".join(verdict_payload["reasons"]) or "no reason given"
            self._remember(item.id, Feedback("review", f"the reviewer said no: {reasons}"))
            self._fail(lease, f"review: {reasons}", permanent=bool(verdict_payload["permanent"]))
            return
        self._deliver(item, lease, tree, run, verdict_payload)

    @property
    def namespace(self) -> str:
        """Branches and worktrees of the main plan (key PLAN) need none; any other plan's do."""
        return "" if self.plan_key == "PLAN" else self.plan_key

    def session_name(self, item_id: str) -> str:
        """Stable across restarts (so a live agent is found again), distinct per state dir
        (so two clones of one repository on a machine never share a session)."""
        where = hashlib.sha256(str(self.state_dir.resolve()).encode()).hexdigest()[:6]
        repo = self.tracker.repo.split("/")[-1][:30]  # short enough that the hash survives
        space = f"{self.namespace[:20]}-" if self.namespace else ""
        return re.sub(r"[^A-Za-z0-9_-]+", "-", f"ah-{repo}-{space}{item_id[:40]}-{where}")

    # -- stages --------------------------------------------------------------------------------
    def _agent_failed(self, lease: Lease, result: ImplementResult) -> None:
        if result.wait_until is not None:
            # A spent window: wait for its reset without burning an attempt.
            self.store.park(f"agent:{self.implementer.name}", result.wait_until, result.reason)
            work.defer(self.store, lease, result.wait_until, result.reason)
            self.emit(
                lease.item_id, "waiting", {"until": result.wait_until, "reason": result.reason}
            )
            return
        self._remember(lease.item_id, Feedback("agent", result.reason, result.output_tail))
        self._fail(lease, f"agent {result.state}: {result.reason}", permanent=result.permanent)

    def _protected(self, item: WorkItem, lease: Lease, tree: Worktree) -> bool:
        from agent_harness.git.protect import changed_paths, protection_violations

        violations = protection_violations(
            changed_paths(tree.path, tree.base_sha), self.settings.protected, item.files
        )
        if not violations:
            return False
        self.emit(item.id, "protected_paths", {"violations": violations})
        self._fail(lease, "; ".join(violations), permanent=True)
        return True

    def _leaks_secret(self, item: WorkItem, lease: Lease, tree: Worktree) -> bool:
        """A secret in the change stops the item before anything is sent on: the reviewer (of
        another vendor) would read it in the diff, and a push would publish it."""
        from agent_harness.secrets.scan import scan_diff
        from agent_harness.secrets.shapes import known_values

        findings = scan_diff(
            self.repo.committed_diff(tree),
            known_values(self.env, self._known_secrets),
            shapes_ignored_in=self.settings.secret_shapes_ignored_in,
        )
        if not findings:
            return False
        where = [finding.describe() for finding in findings]
        self.emit(item.id, "secret_found", {"findings": where, "sha": self.repo.head(tree)})
        shown = "; ".join(where[:3]) + (f" (and {len(where) - 3} more)" if len(where) > 3 else "")
        self._fail(
            lease, f"a secret is in the change, so it was not sent on: {shown}", permanent=True
        )
        return True

    def _checks(self, item: WorkItem, tree: Worktree) -> CheckRun:
        from agent_harness.pipeline.checks import order_checks, run_checks

        commands = list(self.settings.checks)
        own = check_command(item.success_check)
        if own and own not in commands:
            commands.append(own)
        with self._durations_lock:
            known = json.loads(self.store.get_meta(f"check_durations:{self.project}") or "{}")
        ordered = order_checks(commands, known)
        run = run_checks(
            ordered,
            tree.path,
            timeout_s=self.settings.check_timeout_s,
            env=without_secrets(
                self.env, allow=self.settings.check_env_pass, known=self._known_secrets
            ),
        )
        for result in run.results:
            self.emit(
                item.id,
                "check",
                {
                    "command": result.command,
                    "exit_code": result.exit_code,
                    "duration_s": round(result.duration_s, 3),
                    "timed_out": result.timed_out,
                    "missing": result.missing,
                    "tail": result.output_tail[-1500:],
                },
            )
        with self._durations_lock:  # workers measure in parallel; keep every measurement
            latest = json.loads(self.store.get_meta(f"check_durations:{self.project}") or "{}")
            latest.update(run.durations())
            self.store.set_meta(f"check_durations:{self.project}", json.dumps(latest))
        return run

    def _review(
        self, item: WorkItem, tree: Worktree, run: CheckRun | None, sha: str
    ) -> dict[str, Any]:
        from agent_harness.review.verdict import ReviewRequest, review

        request = ReviewRequest(
            item_id=item.id,
            title=item.title,
            success_check=item.success_check,
            diff=self.repo.diff(tree),
            checks=run,
        )
        outcome = review(self.reviewer, request)
        payload = {
            "approved": outcome.verdict.approved,
            "reasons": list(outcome.verdict.reasons),
            "permanent": outcome.verdict.permanent,
            "malformed": outcome.malformed,
            "attempts": outcome.attempts,
            "vendor": outcome.vendor,
            "model": outcome.model,
            "tokens_in": outcome.tokens_in,
            "tokens_out": outcome.tokens_out,
            "cost_usd": outcome.cost_usd,
            "sha": sha,
        }
        self.emit(item.id, "review", payload)
        return payload

    def _deliver(
        self,
        item: WorkItem,
        lease: Lease,
        tree: Worktree,
        run: CheckRun | None,
        verdict: dict[str, Any],
    ) -> None:
        # Fencing before the first outside write: a worker whose lease lapsed while it worked
        # (a long agent, a suspended laptop) stops here instead of racing the new holder.
        work.heartbeat(self.store, lease)
        if self._leaks_secret(item, lease, tree):  # a resumed delivery skipped the first scan
            return
        with self._git_lock:  # a push and another worker's fetch both rewrite remote refs
            self.repo.push(tree)
        self.emit(item.id, "pushed", {"branch": tree.branch, "sha": self.repo.head(tree)})
        body = self._pull_body(item, run, verdict, lease.attempt)
        title = f"{item.id}: {item.title}"
        with self._tracker_lock:
            pull = self.tracker.find_pull(tree.branch)
            if pull is not None and pull.state == "open":
                pull = self.tracker.update_pull(pull.number, title, body)
                reused = True
            else:
                base = self.repo.default_branch()
                pull = self.tracker.create_pull(title, body, tree.branch, base)
                reused = False
        self.emit(
            item.id,
            "pr_opened",
            {"number": pull.number, "url": pull.url, "reused": reused, "branch": tree.branch},
        )
        work.complete(self.store, lease, ItemState.PR_OPEN)

    def _resume_open_pull(self, item: WorkItem, lease: Lease, tree: Worktree) -> bool:
        """Work approved and pushed before a crash is delivered again, never re-reviewed."""
        approved = self._approved_sha(item.id)
        if approved is None:
            return False
        head = self.repo.head(tree)
        if head != approved:
            return False
        self.emit(item.id, "resumed", {"sha": head, "why": "this commit was already approved"})
        verdict = self._last_event(item.id, "review") or {"approved": True, "reasons": []}
        self._deliver(item, lease, tree, None, verdict)
        return True

    def item_spent_usd(self, item_id: str) -> float | None:
        # Only the harness's own events: an ingested file cannot spend an item's budget.
        events = self.store.all_events(project=self.project, item=item_id)
        return _known_cost(event for event in events if event.external_id is None)

    def _over_item_budget(self, item: WorkItem, lease: Lease) -> bool:
        limit = self.settings.item_cost_usd
        spent = self.item_spent_usd(item.id)
        if limit is None or spent is None or spent <= limit:
            return False
        self._fail(
            lease,
            f"item cost budget spent: ${spent:.2f} of ${limit:.2f} (budgets.item_cost_usd)",
            permanent=True,
        )
        return True

    def _resume_at_review(self, item: WorkItem, lease: Lease, tree: Worktree) -> bool:
        """A commit that passed its checks but never got a verdict (the reviewer was down, or
        the run died) goes straight back to review: the agent is not paid to redo it."""
        last = self._last_of(item.id, ("checks_passed", "feedback", "review", "outcome"))
        if last is None or last[0] != "checks_passed":
            return False
        sha = str(last[1].get("sha"))
        if self.repo.head(tree) != sha or self.repo.has_uncommitted(tree):
            return False
        self.emit(item.id, "resumed", {"sha": sha, "why": "checked, not yet reviewed"})
        self._review_and_deliver(item, lease, tree, None, sha)
        return True

    def _last_of(self, item_id: str, kinds: tuple[str, ...]) -> tuple[str, dict[str, Any]] | None:
        found: tuple[str, dict[str, Any]] | None = None
        for event in self.store.all_events(project=self.project, item=item_id):
            if event.kind in kinds and event.external_id is None:
                found = (event.kind, dict(event.payload))
        return found

    # -- bookkeeping ---------------------------------------------------------------------------
    def _fail(self, lease: Lease, reason: str, *, permanent: bool) -> None:
        try:
            state = work.fail(self.store, lease, reason, permanent=permanent)
        except LeaseLost:
            self.emit(lease.item_id, "lease_lost", {"worker": lease.worker})
            return
        self.observer(
            "failed" if state == ItemState.FAILED else "retry", lease.item_id, {"reason": reason}
        )

    def _remember(self, item_id: str, feedback: Feedback) -> None:
        self.emit(
            item_id,
            "feedback",
            {"kind": feedback.kind, "summary": feedback.summary, "detail": feedback.detail[-6000:]},
        )

    def _last_event(self, item_id: str, kind: str) -> dict[str, Any] | None:
        # Only events the harness wrote itself: an ingested file cannot plant an approval.
        last = self._last_of(item_id, (kind,))
        return last[1] if last else None

    def _last_feedback(self, item_id: str) -> Feedback | None:
        payload = self._last_event(item_id, "feedback")
        if payload is None:
            return None
        return Feedback(
            str(payload.get("kind")), str(payload.get("summary")), str(payload.get("detail") or "")
        )

    def _approved_sha(self, item_id: str) -> str | None:
        # An approval counts until something newer speaks about the item: a later verdict,
        # feedback, or an outcome from the tracker (a revert re-queues the item afresh).
        last = self._last_of(item_id, ("review", "feedback", "outcome", "retried"))
        if last and last[0] == "review" and last[1].get("approved"):
            return str(last[1].get("sha"))
        return None

    def _pull_body(
        self, item: WorkItem, run: CheckRun | None, verdict: dict[str, Any], attempt: int
    ) -> str:
        issue = self.issues.get(item.id)
        lines = []
        if issue:
            lines += [f"Closes #{issue}", ""]
        lines += [f"**{item.id}: {item.title}** (plan `{self.plan_key}`, attempt {attempt})", ""]
        if item.success_check:
            lines += [f"Success check: {item.success_check}", ""]
        lines += ["### Checks", ""]
        if run is not None and run.results:
            lines += [run.table_markdown(), ""]
        elif run is None:
            lines += ["Checks passed on an earlier attempt of this same commit.", ""]
        else:
            lines += ["No checks were configured.", ""]
        lines += ["### Review", ""]
        mark = "approved" if verdict.get("approved") else "not approved"
        who = verdict.get("vendor") or self.reviewer.vendor
        model = verdict.get("model")
        lines.append(f"{mark} by {who}" + (f" ({model})" if model else ""))
        for reason in verdict.get("reasons") or []:
            lines.append(f"- {reason}")
        if self.same_vendor_note:
            lines += ["", f"**Note:** {self.same_vendor_note}"]
        lines += [
            "",
            "### Tokens and cost",
            "",
            "| role | tokens in | tokens out | cost (USD) |",
            "|---|---|---|---|",
        ]
        impl = self._last_event(item.id, "agent_finished") or {}
        lines.append(_cost_row(f"implementer ({self.implementer.name})", impl))
        lines.append(_cost_row(f"reviewer ({who})", verdict))
        lines += ["", "Unknown figures are shown as unknown, never as zero.", ""]
        lines.append(PullMarker(item.id, self.plan_key, issue).render())
        return "\n".join(lines)

    # -- the whole run -------------------------------------------------------------------------
    @property
    def worker_prefix(self) -> str:
        if self.settings.worker_prefix:
            return self.settings.worker_prefix
        where = hashlib.sha256(str(self.state_dir.resolve()).encode()).hexdigest()[:6]
        return f"{socket.gethostname()}-{where}"

    def run(self, *, fleet_factory: Callable[..., Any] | None = None) -> RunReport:
        with self._run_lock():
            return self._run(fleet_factory)

    @contextlib.contextmanager
    def _run_lock(self) -> Iterator[None]:
        """One run per project and state dir at a time: the workers' names are shared."""
        import fcntl

        locks = self.state_dir / "locks"
        locks.mkdir(parents=True, exist_ok=True)
        name = hashlib.sha256(self.project.encode()).hexdigest()[:12]
        with open(locks / f"run-{name}.lock", "a+", encoding="utf-8") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.seek(0)
                holder = handle.read().strip() or "another process"
                raise RunRefused(
                    f"another `agent-harness run` of {self.project} is running from "
                    f"{self.state_dir} ({holder}); wait for it or stop it first"
                ) from None
            handle.seek(0)
            handle.truncate()
            handle.write(f"pid {os.getpid()}\n")
            handle.flush()
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _run(self, fleet_factory: Callable[..., Any] | None) -> RunReport:
        from agent_harness.queue.fleet import Fleet

        self.check_setup()
        sync = self.prepare()
        reconciled = self.reconcile() if self.settings.reconcile else []
        # The run lock says no other run of ours is alive: leases our workers still hold were
        # left by a run that died, and are taken back now rather than when they lapse.
        for item_id in work.reclaim_own(
            self.store, self.project, self.worker_prefix + "/", prefix=True
        ):
            self.observer("reclaimed", item_id, {"workers": self.worker_prefix})
        fleet = (fleet_factory or Fleet)(
            self.store,
            sleep=self.sleep,
            idle_poll_s=self.settings.idle_poll_s,
            ready_when=work.DEFAULT_READY_WHEN,
        )
        fleet.add_project(
            self.project,
            self._guarded_handle,
            concurrency=self.settings.workers,
            lease_s=self.settings.lease_s,
            worker_prefix=self.worker_prefix,
        )
        fleet.start(self.project)
        try:
            stalled, last_mark = 0, -1
            while not self._budget_hit.is_set():
                # Idle can be declared just as another worker puts an item back: look again,
                # but never for ever: ten idle looks with nothing new recorded end the run.
                if not fleet.wait_idle(self.project, timeout=1.0):
                    stalled = 0
                    continue
                if not self._claimable():
                    break
                mark = self._last_event_id()
                stalled = stalled + 1 if mark == last_mark else 0
                last_mark = mark
                if stalled >= 10:
                    break
        except KeyboardInterrupt:
            fleet.drain(self.project)
            fleet.join(self.project, timeout=2.0)
            raise RunInterrupted() from None
        fleet.drain(self.project)
        fleet.join(self.project)
        work.unhold(self.store, self.project)
        report = self.report(sync)
        report.reconciled = reconciled
        return report

    def reconcile(self) -> list[dict[str, Any]]:
        """Bring merges, closes and reverts back, so merged work unblocks its dependents."""
        from agent_harness.tracker.reconcile import reconcile

        with self._tracker_lock:
            result = reconcile(
                self.tracker,
                store=self.store,
                plan_key=self.plan_key,
                requeue_reverted=self.settings.requeue_reverted,
                revert_window_days=self.settings.revert_window_days,
                work=self.repo,
            )
        moved = [
            {"item": t.item, "state": t.state, "pr": t.pr} for t in result.transitions if t.item
        ]
        for row in moved:
            self.observer("reconciled", str(row["item"]), row)
        return moved

    def _last_event_id(self) -> int:
        with self.store.transaction(write=False) as tx:
            row = tx.one("SELECT MAX(id) FROM events WHERE project = ?", (self.project,))
        return int(row[0] or 0) if row else 0

    @staticmethod
    def _unfinished_deps(deps: Sequence[str], records: Mapping[str, Any]) -> list[str]:
        """Dependencies not yet in a state the queue counts as ready (merged, done)."""
        return [
            dep
            for dep in deps
            if dep not in records or records[dep].state not in work.DEFAULT_READY_WHEN
        ]

    def _claimable(self) -> bool:
        """Is any item ready to be claimed right now (so the run is not done yet)?"""
        records = {r.id: r for r in work.list_items(self.store, self.project)}
        now = self.store.clock()
        for record in records.values():
            waiting_done = record.state == ItemState.WAITING and (record.not_before or 0) <= now
            if record.state != ItemState.PENDING and not waiting_done:
                continue
            if record.not_before and record.not_before > now:
                continue
            # list_items leaves dependencies out; the plan has them.
            if not self._unfinished_deps(self._depends.get(record.id, ()), records):
                return True
        return False

    def _guarded_handle(self, lease: Lease) -> None:
        if self._budget_hit.is_set():
            # Not this item's fault: give it back with its attempt refunded, for the next run.
            work.defer(self.store, lease, self.store.clock(), "run cost budget spent")
            return
        try:
            self.handle(lease)
        except Exception as exc:
            # The fleet records the crash on the item; the live view should not stay stale.
            self.observer("failed", lease.item_id, {"reason": f"{type(exc).__name__}: {exc}"})
            raise
        spent = self.spent_usd()
        if (
            self.settings.run_cost_usd is not None
            and spent is not None
            and (spent >= self.settings.run_cost_usd)
        ):
            self._budget_hit.set()

    def spent_usd(self) -> float | None:
        return _known_cost(self.store.all_events(project=self.project))

    def report(self, sync: SyncReport | None) -> RunReport:
        out = RunReport(
            project=self.project,
            sync=sync,
            cost_usd=self.spent_usd(),
            stopped_by_budget=self._budget_hit.is_set(),
        )
        records = {record.id: record for record in work.list_items(self.store, self.project)}
        for item in self.plan.items:
            record = records.get(item.id)
            if record is None:
                continue
            opened = self._last_event(item.id, "pr_opened") or {}
            reason = record.reason
            if record.state in (ItemState.PENDING, ItemState.WAITING) and not reason:
                waiting_on = [
                    f"{dep} ({records[dep].state})"
                    for dep in self._unfinished_deps(item.depends_on, records)
                    if dep in records
                ]
                if waiting_on:
                    reason = "waits for " + ", ".join(waiting_on) + " to be merged"
            out.items.append(
                ItemOutcome(
                    id=item.id,
                    title=item.title,
                    state=str(record.state),
                    attempts=record.attempts,
                    reason=reason,
                    pr_number=opened.get("number"),
                    pr_url=opened.get("url"),
                    not_before=record.not_before,
                )
            )
        out.events = len(self.store.all_events(project=self.project))
        return out


def _secrets_held_by(part: object) -> tuple[str, ...]:
    """The credentials an implementer or reviewer sends (its model API keys), when it says."""
    held = getattr(part, "secret_values", None)
    return tuple(held()) if callable(held) else ()


def _known_cost(events: Iterable[Event]) -> float | None:
    """The cost the agents and reviewers reported; None when none was known (never 0)."""
    costs = [
        float(event.payload["cost_usd"])
        for event in events
        if event.kind in ("agent_finished", "review")
        and isinstance(event.payload.get("cost_usd"), int | float)
    ]
    return sum(costs) if costs else None


def _cost_row(role: str, payload: Mapping[str, Any]) -> str:
    def show(value: Any) -> str:
        return "unknown" if value is None else str(value)

    return (
        f"| {role} | {show(payload.get('tokens_in'))} | {show(payload.get('tokens_out'))} | "
        f"{show(payload.get('cost_usd'))} |"
    )


def _result_payload(result: ImplementResult) -> dict[str, Any]:
    return {
        "ok": result.ok,
        "state": result.state,
        "reason": result.reason,
        "failure": result.failure.kind.value if result.failure else None,
        "wait_until": result.wait_until,
        "permanent": result.permanent,
        "tokens_in": result.tokens_in,
        "tokens_out": result.tokens_out,
        "cost_usd": result.cost_usd,
        "tail": result.output_tail[-1500:],
    }
