"""Reading a planner's answer into steps the executor can run, or the reasons it cannot.

Models wrap JSON in fences and prose, rename fields and write checks in words. The reader
accepts the common variations but insists on what matters: every check must be something a
machine can run inside the worktree, and every dependency must point to an earlier step. All
problems are gathered into one `PlanAnswerInvalid`, so the planner can fix them in one go.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from agent_harness.errors import UNREADABLE_JSON, HarnessError, read_json
from agent_harness.implement.steps import Check, Step


class PlanAnswerInvalid(HarnessError):
    """The planner's answer is not a plan the executor can run."""

    def __init__(self, reasons: Sequence[str]) -> None:
        self.reasons = tuple(reasons)
        super().__init__("; ".join(self.reasons))


_FENCED = re.compile(r"```[ \t]*([A-Za-z0-9_-]*)[^\n]*\n(.*?)```", re.DOTALL)


def _json_candidates(text: str) -> list[Any]:
    """JSON values in a model's answer: fenced blocks first, then any object or array in prose."""
    found: list[Any] = []
    for match in _FENCED.finditer(text):
        with contextlib.suppress(*UNREADABLE_JSON):
            found.append(read_json(match.group(2)))
    decoder = json.JSONDecoder()
    index = 0
    while index < len(text):
        if text[index] in "{[":
            try:
                value, end = decoder.raw_decode(text, index)
            except ValueError:
                index += 1
                continue
            except RecursionError:
                # Nested deeper than any plan: every later start inside it would recurse as
                # deep again (a long run of brackets would cost time squared), so stop here.
                break
            found.append(value)
            index = end  # a value's insides are not candidates of their own
        else:
            index += 1
    return found


def parse_plan_answer(text: str) -> list[Mapping[str, Any]]:
    """The raw steps of a planner answer: `{"steps": [...]}` or a bare list, fenced or amid
    prose. Raises `PlanAnswerInvalid` when there is none."""
    for value in _json_candidates(text):
        # Some models wrap the plan once more, e.g. {"plan": {"steps": [...]}}.
        wrapped = (
            [v for v in value.values() if isinstance(v, dict)] if isinstance(value, dict) else []
        )
        for candidate in [value, *wrapped]:
            steps = candidate.get("steps") if isinstance(candidate, dict) else candidate
            if isinstance(steps, list) and steps and all(isinstance(s, dict) for s in steps):
                return steps
    if not text.strip():
        raise PlanAnswerInvalid(["the answer was empty"])
    raise PlanAnswerInvalid(
        ['the answer holds no JSON object with a non-empty "steps" list of step objects']
    )


def _safe_relative(path: str, worktree: Path) -> str | None:
    """Why `path` cannot be checked inside the worktree, or None when it can."""
    if not path.strip():
        return "names no path"
    if Path(path).is_absolute():
        return f"names the absolute path {path!r}; paths are relative to the repository root"
    root = worktree.resolve()
    target = (root / path).resolve()
    if target != root and root not in target.parents:
        return f"names {path!r}, which is outside the repository"
    return None


def read_check(raw: Any, worktree: Path, have_item_checks: bool) -> Check | str:
    """A planner's check as a `Check`, or the reason it is not observable."""
    if raw is None or raw == "" or raw == {}:
        return "has no success check"
    if isinstance(raw, str):
        text = raw.strip()
        if text.startswith("$ ") and text[2:].strip():
            raw = {"kind": "command", "command": text[2:].strip()}
        elif text.lower() in ("item_checks", "the item's checks pass"):
            raw = {"kind": "item_checks"}
        else:
            return (
                f"has the check {text[:80]!r}, which is prose, not something a machine can run "
                "(use a command, file_exists, regex or item_checks object)"
            )
    if not isinstance(raw, dict):
        return "has a check that is neither an object nor a string"
    kind = raw.get("kind") or raw.get("type")
    if kind is None:
        if "command" in raw:
            kind = "command"
        elif "pattern" in raw:
            kind = "regex"
        elif "path" in raw:
            kind = "file_exists"
    if kind == "command":
        command = raw.get("command")
        if not isinstance(command, str) or not command.strip():
            return "has a command check with no command"
        return Check(kind="command", command=command.strip())
    if kind in ("file_exists", "regex"):
        path = raw.get("path")
        if not isinstance(path, str):
            return f"has a {kind} check with no path"
        problem = _safe_relative(path, worktree)
        if problem:
            return f"has a {kind} check that {problem}"
        if kind == "file_exists":
            return Check(kind="file_exists", path=path)
        pattern = raw.get("pattern")
        if not isinstance(pattern, str) or not pattern:
            return "has a regex check with no pattern"
        try:
            re.compile(pattern, re.MULTILINE)
        except re.error as exc:
            return f"has a regex check whose pattern does not compile ({exc})"
        return Check(kind="regex", path=path, pattern=pattern)
    if kind == "item_checks":
        if not have_item_checks:
            return "uses item_checks, but this item has no check commands configured"
        return Check(kind="item_checks")
    return f"has a check of unknown kind {kind!r}"


def read_steps(
    raw_steps: Sequence[Mapping[str, Any]],
    worktree: Path,
    *,
    kept_ids: Sequence[str] = (),
    first_number: int = 1,
    min_steps: int = 3,
    max_steps: int = 7,
    have_item_checks: bool = False,
) -> list[Step]:
    """Turn a planner's raw steps into `Step`s numbered from `first_number`.

    Every problem is collected, so the planner hears all of them at once; any problem raises
    `PlanAnswerInvalid`. `depends_on` may name the answer's own ids or `kept_ids` (done steps);
    left out, a step depends on the one before it, the cautious reading.
    """
    problems: list[str] = []
    if not min_steps <= len(raw_steps) <= max_steps:
        problems.append(f"the plan has {len(raw_steps)} steps; write {min_steps} to {max_steps}")
    local = _renumbering(raw_steps, first_number, problems)
    steps: list[Step] = []
    for position, raw in enumerate(raw_steps):
        label = _label(raw, position)
        description = _read_description(raw, label, problems)
        check = read_check(raw.get("success_check", raw.get("check")), worktree, have_item_checks)
        if isinstance(check, str):
            problems.append(f"step {label} {check}")
        earlier = {local[k] for k in list(local)[:position]} | set(kept_ids)
        previous = str(first_number + position - 1) if position > 0 else None
        depends = _read_depends(
            raw.get("depends_on"), label, previous, local, kept_ids, earlier, problems
        )
        if not isinstance(check, str):
            steps.append(
                Step(
                    id=str(first_number + position),
                    description=description,
                    success_check=check,
                    depends_on=depends,
                )
            )
    if problems:
        raise PlanAnswerInvalid(problems)
    return steps


def _label(raw: Mapping[str, Any], position: int) -> str:
    """The id the planner gave a step, or its 1-based position when it gave none."""
    return str(raw.get("id", position + 1)).strip() or str(position + 1)


def _renumbering(
    raw_steps: Sequence[Mapping[str, Any]], first_number: int, problems: list[str]
) -> dict[str, str]:
    """The planner's step ids mapped to the plan's own numbers, which continue the plan."""
    local: dict[str, str] = {}
    for position, raw in enumerate(raw_steps):
        label = _label(raw, position)
        if label in local:
            problems.append(f"step id {label!r} is used twice")
        local[label] = str(first_number + position)
    return local


def _read_description(raw: Mapping[str, Any], label: str, problems: list[str]) -> str:
    description = raw.get("description") or raw.get("title") or raw.get("step")
    if not isinstance(description, str) or not description.strip():
        problems.append(f"step {label} has no description")
        return ""
    return description.strip()


def _read_depends(
    deps_raw: Any,
    label: str,
    previous: str | None,
    local: Mapping[str, str],
    kept_ids: Sequence[str],
    earlier: set[str],
    problems: list[str],
) -> list[str]:
    """A step's dependencies as plan ids; none stated means the step before it."""
    if deps_raw is None:
        return [previous] if previous is not None else []
    if not isinstance(deps_raw, list):
        problems.append(f"step {label} has depends_on that is not a list")
        return []
    depends: list[str] = []
    for dep in deps_raw:
        name = str(dep).strip()
        resolved = local.get(name, name if name in kept_ids else None)
        if resolved is None:
            problems.append(f"step {label} depends on unknown step {name!r}")
        elif resolved not in earlier:
            problems.append(f"step {label} depends on {name!r}, which is not before it")
        elif resolved not in depends:
            depends.append(resolved)
    return depends
