"""How an implementer's run ended, as the event that records it and as a failure class."""

from __future__ import annotations

from agent_harness.failures import FailureClass, ends_the_item
from agent_harness.implement.protocol import ImplementResult
from agent_harness.store.events import AgentFinished

# How an implementer's run ended, as a failure class (when no provider failure says more).
_ENDED = {
    "missing_binary": FailureClass.MISSING_PROGRAM,
    "refused": FailureClass.PERMISSION_DENIED,
    "timeout": FailureClass.AGENT_TIMEOUT,
}


def result_class(result: ImplementResult) -> FailureClass:
    """The failure class of an implementer's unsuccessful run. A provider failure it reported
    names the class (a spent cap, a bad key); otherwise how it ended does. An implementer that
    judged its own failure final (`permanent`: a blocked step plan, say) is taken at its word."""
    if result.failure is not None:
        found = FailureClass(result.failure.kind)
    else:
        found = _ENDED.get(result.state, FailureClass.AGENT_CRASHED)
    if result.permanent and not ends_the_item(found):
        return FailureClass.AGENT_GAVE_UP
    return found


def lost(session: str, run_id: str) -> AgentFinished:
    return AgentFinished(
        ok=False,
        state="lost",
        reason=f"its session {session} was gone when the run came back (the machine restarted, "
        "or the terminal server was killed): its work and cost are not known",
        run_id=run_id or None,
        usage_from="agent",
    )


def finished(result: ImplementResult, run_id: str) -> AgentFinished:
    return AgentFinished(
        ok=result.ok,
        state=result.state,
        reason=result.reason,
        failure=result.failure.kind.value if result.failure else None,
        wait_until=result.wait_until,
        permanent=result.permanent,
        tokens_in=result.tokens_in,
        tokens_out=result.tokens_out,
        cost_usd=result.cost_usd,
        run_id=run_id or None,
        tail=result.output_tail[-1500:],
        usage_from=result.usage_from,
    )
