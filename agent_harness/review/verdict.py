"""The reviewer: a model of another vendor judges a change and answers with a structured verdict.

It judges the result, not the story: a `ReviewRequest` holds the item, its success check, the
check results and the diff, and has no place for the implementer's transcript or reasoning.
An answer without a usable verdict is asked for once more, then counts as a "no" (fail closed).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from agent_harness.errors import HarnessError

if TYPE_CHECKING:
    from agent_harness.pipeline.checks import CheckRun


Number = TypeVar("Number", int, float)


NO_REASON = "reviewer gave no reason"


NO_VERDICT = "reviewer gave no structured verdict"


SAME_VENDOR_FLAG = "reviewed by the same vendor as the implementer (--allow-same-vendor)"


VERDICT_SHAPE = '{"approved": true or false, "reasons": ["..."], "permanent": true or false}'


SYSTEM_PROMPT = f"""\
You review one code change made by an automated coding agent for one work item.
You are shown the item, its success check, the results of the automated checks and the diff.
You are not shown how the change came about, and you must not guess: judge only whether this
diff, as it stands, does what the item asks and meets its success check without breaking
anything else.

Reject the change when it does not do what the item asks, when the success check would not be
met, when it introduces a bug, or when it deletes, skips or weakens tests or checks, hardcodes
expected results, or makes changes unrelated to the item. Approve it when it does what the item
asks and you found nothing that blocks it; style preferences are not reasons to reject.

Set "permanent" to true only when no further attempt at this item could succeed: the item
contradicts itself, is impossible in this codebase, or needs a human decision. A change that is
merely wrong or incomplete is not permanent.

Answer with exactly one JSON object and nothing else:
{VERDICT_SHAPE}
Each reason is one sentence that names the file or behaviour it is about. When you approve,
reasons may be empty or hold minor remarks."""


@dataclass(frozen=True)
class Verdict:
    """The reviewer's decision. `permanent` means another attempt cannot fix it."""

    approved: bool
    reasons: tuple[str, ...]
    permanent: bool


@dataclass(frozen=True)
class ReviewRequest:
    """Everything the reviewer sees. There is deliberately no field for the implementer's
    transcript or reasoning: the reviewer judges the result, not the story told about it."""

    item_id: str
    title: str
    success_check: str | None
    diff: str
    checks: CheckRun | None


@dataclass(frozen=True)
class ReviewReply:
    """One raw answer from a reviewer. Usage and cost are None when unknown, never 0."""

    text: str
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost_usd: float | None = None
    model: str | None = None


@dataclass(frozen=True)
class ReviewOutcome:
    """The verdict and what it took to get it. Usage sums every attempt and is None as soon as
    one attempt's usage is unknown. `problems` says what was wrong with each unusable answer."""

    verdict: Verdict
    attempts: int
    malformed: bool
    tokens_in: int | None
    tokens_out: int | None
    cost_usd: float | None
    vendor: str
    model: str | None
    problems: tuple[str, ...] = ()


class Reviewer(Protocol):
    """Anything that can answer a review prompt with one call."""

    @property
    def vendor(self) -> str: ...

    def ask(self, prompt: str, system: str) -> ReviewReply: ...


class SameVendorRefused(HarnessError):
    """The reviewer is from the same vendor as the implementer."""

    exit_code = 2

    def __init__(self, vendor: str) -> None:
        self.vendor = vendor
        super().__init__(
            f"the reviewer and the implementer are both {vendor} models; route the reviewer "
            "role to another vendor, or pass --allow-same-vendor to accept it (the pull "
            "request will say so)"
        )


def build_review_prompt(request: ReviewRequest, max_diff_chars: int = 60_000) -> tuple[str, str]:
    """(system, user) prompts for one review. A diff longer than `max_diff_chars` is cut at a
    line boundary, and the prompt says how much is missing."""
    parts = [f"# Work item {request.item_id}: {request.title}", "", "## Success check"]
    if request.success_check and request.success_check.strip():
        parts.append(request.success_check.strip())
    else:
        parts.append("None was given; judge the change against the item's title.")
    parts += ["", "## Automated checks"]
    if request.checks is None or not (request.checks.results or request.checks.skipped):
        parts.append("No automated checks were run.")
    else:
        parts.append(request.checks.table_markdown())
        for result in request.checks.results:
            if not result.passed and result.output_tail.strip():
                parts += [
                    "",
                    f"Last output of the failing check {result.command!r}:",
                    _fenced(result.output_tail.rstrip(), ""),
                ]
    diff, note = _clip_diff(request.diff, max_diff_chars)
    parts += ["", "## Diff"]
    if not diff.strip():
        parts.append("The diff is empty: the change touches no file.")
    else:
        if note:
            parts.append(note)
        parts.append(_fenced(diff.rstrip("\n"), "diff"))
        if note:
            parts.append("[the diff is cut here]")
    parts += ["", f"Answer with one JSON object: {VERDICT_SHAPE}"]
    return SYSTEM_PROMPT, "\n".join(parts)


def _clip_diff(diff: str, limit: int) -> tuple[str, str | None]:
    if len(diff) <= limit:
        return diff, None
    cut = diff.rfind("\n", 0, limit)
    shown = diff[: cut + 1] if cut > 0 else diff[:limit]
    hidden_lines = diff.count("\n", len(shown)) + (0 if diff.endswith("\n") else 1)
    note = (
        f"Note: the diff is {len(diff)} characters long and was truncated: only the first "
        f"{len(shown)} characters are shown and {hidden_lines} more lines are not. Judge what "
        "is shown, and say in your reasons if the missing part could change your verdict."
    )
    return shown, note


def _fenced(text: str, info: str) -> str:
    # The fence must be longer than any backtick run inside, or a diff of a markdown file
    # would close it early.
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{text}\n{fence}"


def parse_verdict(text: str) -> Verdict | None:
    """The verdict in a reviewer's answer, or None when there is none to use.

    Tolerates a fenced block, prose around the JSON, and "true"/"false"/"yes"/"no" as strings.
    When several objects carry a verdict, the last one wins (models tend to conclude at the
    end). A rejection without reasons gets the reason "reviewer gave no reason"; an approval
    is never permanent.
    """
    found = _find_verdict(text)
    return found if isinstance(found, Verdict) else None


def _find_verdict(text: str) -> Verdict | str:
    """The last usable verdict in `text`, or a sentence saying why there is none."""
    if not text.strip():
        return "the answer was empty"
    objects = _json_objects(text)
    if not objects:
        return "the answer contained no JSON object"
    problem = 'no JSON object in the answer had an "approved" field'
    for obj in reversed(objects):
        fields = {str(key).strip().lower(): value for key, value in obj.items()}
        if "approved" not in fields:
            continue
        approved = _as_bool(fields["approved"])
        if approved is None:
            problem = f'"approved" was {json.dumps(fields["approved"])}, not true or false'
            continue
        reasons = _as_reasons(fields.get("reasons"))
        if not approved and not reasons:
            reasons = (NO_REASON,)
        permanent = _as_bool(fields.get("permanent")) is True and not approved
        return Verdict(approved, reasons, permanent)
    return problem


def _json_objects(text: str) -> list[dict[str, Any]]:
    decoder = json.JSONDecoder()
    objects: list[dict[str, Any]] = []
    index = text.find("{")
    while index != -1:
        try:
            value, end = decoder.raw_decode(text, index)
        except ValueError:
            index = text.find("{", index + 1)
            continue
        except RecursionError:
            # Nested past the reader's limit: no verdict is that deep, and trying again at each
            # of the thousands of braces inside would take minutes. What was found stands.
            break
        if isinstance(value, dict):
            objects.append(value)
            # Skip what a verdict object contains; look inside a wrapper that is not one.
            if "approved" in {str(key).strip().lower() for key in value}:
                index = text.find("{", end)
                continue
        index = text.find("{", index + 1)
    return objects


def _as_bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        return {"true": True, "yes": True, "false": False, "no": False}.get(value.strip().lower())
    return None


def _as_reasons(value: Any) -> tuple[str, ...]:
    items: Sequence[Any]
    if isinstance(value, str):
        items = [value]
    elif isinstance(value, list):
        items = value
    else:
        return ()
    reasons = (
        " ".join(str(item).split())
        for item in items
        if item is not None and not isinstance(item, (dict, list))
    )
    return tuple(reason for reason in reasons if reason)


def review(
    reviewer: Reviewer,
    request: ReviewRequest,
    *,
    max_diff_chars: int = 60_000,
    on_asked_again: Callable[[str], None] = lambda _problem: None,
) -> ReviewOutcome:
    """Ask `reviewer` for a verdict on `request`; an unusable answer is asked for once more
    (saying what was wrong with it; `on_asked_again` hears why, before that call), and a second
    unusable answer fails closed: not approved, not permanent. Errors of the call itself (a
    parked endpoint, a spent cap) propagate."""
    system, prompt = build_review_prompt(request, max_diff_chars)
    replies = [reviewer.ask(prompt, system)]
    problems: list[str] = []
    found = _find_verdict(replies[0].text)
    if isinstance(found, str):
        problems.append(found)
        on_asked_again(found)
        retry = (
            f"{prompt}\n\nYour previous answer could not be used: {found}. Reply again with "
            f"only one JSON object of this form: {VERDICT_SHAPE}"
        )
        replies.append(reviewer.ask(retry, system))
        found = _find_verdict(replies[1].text)
        if isinstance(found, str):
            problems.append(found)
    malformed = isinstance(found, str)
    verdict = (
        Verdict(approved=False, reasons=(NO_VERDICT,), permanent=False)
        if isinstance(found, str)
        else found
    )
    return ReviewOutcome(
        verdict=verdict,
        attempts=len(replies),
        malformed=malformed,
        tokens_in=_sum_known([reply.tokens_in for reply in replies]),
        tokens_out=_sum_known([reply.tokens_out for reply in replies]),
        cost_usd=_sum_known([reply.cost_usd for reply in replies]),
        vendor=reviewer.vendor,
        model=replies[-1].model,
        problems=tuple(problems),
    )


def _sum_known(values: Sequence[Number | None]) -> Number | None:
    # One unknown part makes the whole unknown: a partial sum would pass for a real figure.
    if any(value is None for value in values):
        return None
    known = [value for value in values if value is not None]
    return sum(known[1:], known[0]) if known else None


def check_vendors(
    implementer_vendor: str, reviewer_vendor: str, allow_same_vendor: bool
) -> str | None:
    """None when the vendors differ. The same vendor raises `SameVendorRefused`, unless
    `allow_same_vendor`, which returns the flag text for the pull-request body instead.
    Names are compared case-insensitively; use `route_vendor` to name a route's vendor."""
    implementer = implementer_vendor.strip().lower()
    if implementer != reviewer_vendor.strip().lower():
        return None
    if allow_same_vendor:
        return SAME_VENDOR_FLAG
    raise SameVendorRefused(implementer)
