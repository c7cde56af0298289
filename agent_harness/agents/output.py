"""Reading what CLI agents print about their own run: JSON lines, usage, errors, refusals."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from agent_harness.errors import UNREADABLE_JSON, read_json
from agent_harness.store.payload import plausible_usd


def json_events(output: str) -> Iterator[dict[str, Any]]:
    """The JSON objects among an agent CLI's output lines (stream-json, --json); the rest of
    the output (progress, stderr) is skipped."""
    for line in output.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            event = read_json(line)
        except UNREADABLE_JSON:
            continue
        if isinstance(event, dict):
            yield event


def final_texts(output: str) -> list[str]:
    """The agent's final words from JSONL output (Claude Code stream-json, Codex --json); a
    `result` that reports an error is the CLI's words, not the model's, and is left out."""
    texts: list[str] = []
    for event in json_events(output):
        answered = event.get("type") == "result" and not event.get("is_error")
        if answered and isinstance(event.get("result"), str):
            texts.append(event["result"])
        item = event.get("item")
        if isinstance(item, dict) and item.get("type") == "agent_message":
            text = item.get("text")
            if isinstance(text, str):
                texts.append(text)
    return texts


def usage_of(output: str) -> tuple[int | None, int | None, float | None]:
    """Tokens in/out and cost the CLI reported about itself; None where it did not say.

    Claude Code's final `result` event carries the run's totals (Gemini CLI's, in `stats`);
    Codex reports usage per turn and opencode per step (with its price), which add up."""
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost: float | None = None
    unknown = False
    for event in json_events(output):
        usage = event.get("usage")
        total = event.get("type") == "result"
        if total and usage is None and isinstance(event.get("stats"), dict):
            usage = event["stats"]  # Gemini CLI's final `result` keeps its totals in `stats`
        if isinstance(usage, dict):
            got_in = usage.get("input_tokens")
            got_out = usage.get("output_tokens")
            if isinstance(got_in, int):
                tokens_in = got_in if total else (tokens_in or 0) + got_in
            if isinstance(got_out, int):
                tokens_out = got_out if total else (tokens_out or 0) + got_out
        if "total_cost_usd" in event:  # a figure no run can cost is unknown, never counted
            cost = plausible_usd(event["total_cost_usd"])
        part = event.get("part")
        if event.get("type") == "step_finish" and isinstance(part, dict):
            # opencode reports each step's tokens and price, which add up.
            got = part.get("tokens")
            tokens: dict[str, Any] = got if isinstance(got, dict) else {}
            if isinstance(tokens.get("input"), int):
                tokens_in = (tokens_in or 0) + tokens["input"]
            if isinstance(tokens.get("output"), int):
                tokens_out = (tokens_out or 0) + tokens["output"]
            if "cost" in part:  # one step's figure that is no cost: the sum is unknown
                step_cost = plausible_usd(part["cost"])
                unknown = unknown or step_cost is None
                cost = (cost or 0.0) + (step_cost or 0.0)
    return tokens_in, tokens_out, None if unknown else cost


@dataclass(frozen=True)
class CliReport:
    """What an agent CLI said about its own run in its structured output."""

    tokens_in: int | None = None
    tokens_out: int | None = None
    cost_usd: float | None = None
    error: str | None = None  # the CLI's own error text, when it reported one
    error_status: int | None = None  # the HTTP status behind that error, when given
    denials: tuple[str, ...] = field(default=())  # tool calls it was not allowed to make


def read_cli_report(output: str) -> CliReport:
    """Read Claude Code's `result` event and Codex's JSONL (`turn.*`, `error`, rejections)."""

    tokens_in, tokens_out, cost = usage_of(output)
    error: str | None = None
    status: int | None = None
    denials: list[str] = []
    for line in output.splitlines():
        line = line.strip()
        if "patch rejected" in line or "blocked by read-only sandbox" in line:
            # Codex logs a refused patch on stderr only, and still exits 0.
            denials.append(line.split("error=", 1)[-1])
            continue
        if not line.startswith("{"):
            continue
        try:
            event = read_json(line)
        except UNREADABLE_JSON:
            continue
        if not isinstance(event, dict):
            continue
        kind = event.get("type")
        if kind == "result":
            if event.get("is_error"):
                error = str(event.get("result") or event.get("subtype") or "error")
                got = event.get("api_error_status")
                status = got if isinstance(got, int) else status
            for denial in event.get("permission_denials") or []:
                if isinstance(denial, dict):
                    denials.append(_describe_denial(denial))
        elif kind == "turn.failed":
            failed = event.get("error")
            message = failed.get("message") if isinstance(failed, dict) else None
            error = str(message or "turn failed")
        elif kind == "error" and isinstance(event.get("message"), str):
            error = error or event["message"]
    return CliReport(tokens_in, tokens_out, cost, error, status, tuple(denials))


def _describe_denial(denial: Mapping[str, object]) -> str:
    tool = str(denial.get("tool_name") or "a tool")
    args = denial.get("tool_input")
    target = ""
    if isinstance(args, dict):
        target = str(args.get("file_path") or args.get("command") or "")
    return f"{tool} {target}".strip()
