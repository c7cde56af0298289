"""The direct-API implementer: a planner and an implementer model editing the worktree.

It wraps the executor and translates how a run ended (done, blocked, a spent window, a call
that no retry can fix) into the same `ImplementResult` the pipeline reads from a CLI agent.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_harness.implement.protocol import (
    OVER_BUDGET,
    EventCallback,
    ImplementResult,
    StateCallback,
)
from agent_harness.sessions.groups import GROUP_FILE
from agent_harness.store.events import USAGE_FROM_CALLS

if TYPE_CHECKING:
    from agent_harness.git.worktrees import Worktree
    from agent_harness.implement.executor import ExecutionResult
    from agent_harness.models.client import ModelCallFailed
    from agent_harness.plan.model import WorkItem


class ApiImplementer:
    """The direct-API executor: a planner and an implementer model editing the worktree."""

    def __init__(
        self,
        client: Any,
        *,
        vendor: str,
        name: str = "executor",
        item_checks: Callable[[WorkItem], list[str]] = lambda _item: [],
        check_env: Mapping[str, str] | None = None,
        budgets: Any = None,
    ) -> None:
        self.client = client
        self.vendor = vendor
        self.name = name
        self.item_checks = item_checks
        self.check_env = check_env
        self.budgets = budgets

    def secret_values(self) -> tuple[str, ...]:
        """The keys the planner and implementer calls carry; see `ModelClient.secret_values`."""
        held = getattr(self.client, "secret_values", None)
        return tuple(held()) if callable(held) else ()

    def implement(
        self,
        item: WorkItem,
        tree: Worktree,
        prompt: str,
        *,
        session: str,
        state_dir: Path,
        on_state: StateCallback,
        feedback: str | None = None,
        on_event: EventCallback | None = None,
        resume: bool = False,
        allowance_usd: float | None = None,
    ) -> ImplementResult:
        from agent_harness.implement.executor import Executor
        from agent_harness.models.client import ModelCallFailed
        from agent_harness.models.parking import EndpointParked

        state_dir.mkdir(parents=True, exist_ok=True)
        executor = Executor(
            self.client,
            budgets=self.budgets,
            events=_recorder(on_state, on_event),
            worker=session,
            item_checks=self.item_checks(item),
            check_env=self.check_env,
            group_file=state_dir / GROUP_FILE,  # where the item's next attempt looks
        )
        try:
            # The plan is resumed only in the worktree it was made in: a retry's fresh branch
            # starts a fresh plan. Feedback revises a finished plan instead of resuming it.
            result = executor.execute(
                item,
                tree.path,
                state_dir / "plan.json",
                resume=tree.reused,
                feedback=feedback,
                allowance_usd=allowance_usd,
            )
        except EndpointParked as exc:
            return ImplementResult(
                False,
                "rate_limited",
                str(exc),
                wait_until=exc.until,
                parked_endpoint=exc.endpoint,
                usage_from=USAGE_FROM_CALLS,
                cost_usd=executor.spent_usd,  # the calls made before the park were paid for
            )
        except ModelCallFailed as exc:
            return replace(_failed_call(exc), cost_usd=executor.spent_usd)
        return _ended(result)


def _recorder(
    on_state: StateCallback, on_event: EventCallback | None
) -> Callable[[str, dict[str, Any]], None]:
    """The executor's events as typed events of the item (its id is the event's own)."""
    from agent_harness.store.events import payload_of

    def record(kind: str, fields: dict[str, Any]) -> None:
        if on_event is None:
            on_state(kind, str(fields.get("step", "")))
        else:
            on_event(payload_of(kind, {k: v for k, v in fields.items() if k != "item"}))

    return record


def _ended(result: ExecutionResult) -> ImplementResult:
    """How the executor's run ended, as the pipeline reads an implementer's."""
    if result.status == "done":
        return ImplementResult(
            True,
            "done",
            f"plan done in {result.calls} model calls",
            tokens_in=result.tokens_in,
            tokens_out=result.tokens_out,
            cost_usd=result.cost_usd,
            usage_from=USAGE_FROM_CALLS,
        )
    where = f" at step {result.blocking_step}" if result.blocking_step else ""
    return ImplementResult(
        False,
        OVER_BUDGET if result.over_budget else "blocked",
        f"executor blocked{where}: {result.blocker}",
        permanent=result.permanent,
        tokens_in=result.tokens_in,
        tokens_out=result.tokens_out,
        cost_usd=result.cost_usd,
        usage_from=USAGE_FROM_CALLS,
    )


def _failed_call(exc: ModelCallFailed) -> ImplementResult:
    """A model call that ended the run: a spent window waits for its reset, a failure no
    retry can fix is refused for good, anything else counts as a crash worth retrying."""
    from agent_harness.models.failures import FailureKind

    kind = exc.failure.kind
    if kind is FailureKind.WINDOW:
        return ImplementResult(
            False,
            "rate_limited",
            exc.message,
            failure=exc.failure,
            wait_until=exc.failure.reset_at,
            usage_from=USAGE_FROM_CALLS,
        )
    never_retry = exc.failure.final
    return ImplementResult(
        False,
        "refused" if never_retry else "crashed",
        exc.message,
        failure=exc.failure,
        permanent=never_retry,
        usage_from=USAGE_FROM_CALLS,
    )
