"""Text that came from outside (an agent's output, a provider's error message) made fit to keep
and to show: credentials in it are replaced by a mark that says what was there.

An agent that fails on a bad key often prints the key back ("Incorrect API key provided:
sk-proj-..."), and a tool may print a database URL with its password. Such text reaches the
run's table, `work show`, the event log and the audit; each of those goes through `redact`.
Three things are masked: the exact value of a secret this process holds (by the name it was
found under), text in a vendor's documented key format, and the password of a URL.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

from agent_harness.secrets.process import process_env
from agent_harness.secrets.shapes import KEY_SHAPES, known_values, mask_url

# Terminal colour and cursor codes: a token a program printed in colour has none of its shape.
_TERMINAL_CODES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[()][0-9A-Za-z]"
)


def strip_terminal_codes(text: str) -> str:
    """`text` without terminal colour and cursor codes (a check's `grep --color` output)."""
    return _TERMINAL_CODES.sub("", text)


def masked_output(text: str) -> str:
    """What a program printed (a check's output), fit to keep and to send on: colour codes off
    first (`grep --color` wraps a token in them, hiding its shape), then `redact`ed."""
    return redact(strip_terminal_codes(text))


def redact(text: str, known: Mapping[str, str] | None = None) -> str:
    """`text` with every credential in it masked. `known` maps secret values to their names
    (default: the secrets of this process's environment)."""
    if not text:
        return text
    values = _process_secrets() if known is None else known
    for value, name in values.items():
        if value in text:
            text = text.replace(value, f"[redacted {name}]")
    for shape in KEY_SHAPES:
        text = shape.pattern.sub(f"[redacted: {shape.name}]", text)
    return _SAID_KEY.sub(r"\1[redacted: a key it was given]", mask_url(text))


# A key a message says it was given, in any format ("Received API Key = sk-1234…", litellm's
# "Passed in: …", OpenAI's "Incorrect API key provided: sk-…", a netrc's `password …`, an AWS
# file's `aws_secret_access_key = …`): what follows the label and a
# space, `=` or `:` is masked, unless it is masked already (`api-key-rotation-v2`, a branch or
# an item's slug, has no such separator and is left alone).
_SAID_KEY = re.compile(
    r"(?i)\b((?:api[ _-]?key(?:\s{1,8}provided)?|passed in|bearer|password|passwd"
    r"|(?:aws_)?secret_access_key)(?:\s{0,8}[=:]\s{0,8}|\s{1,8}))"
    r"(?![\[*])(?=[^\s\"',}]{0,255}[0-9])([^\s\"',}]{8,256})"
)  # bounded: a megabyte of "-apikey" repeated would be read to its end from each one


# The payload fields that carry text from outside: what an agent, a check, a provider or a
# reviewer said. Only these are masked: the rest (paths, branches, shas, a plan's markdown)
# are data the harness reads back, and a branch slug such as `sk-learn-upgrade-to-version-2`
# has the shape of a key.
OUTSIDE_TEXT = frozenset(
    {"reason", "reasons", "detail", "why", "tail", "summary", "result", "feedback", "message",
     "failure_message", "output", "error", "stop_reason", "host_url", "blocker",
     # what a CI system's or another tool's event line says was said or printed
     "stderr", "stdout", "text", "comment", "comments", "messages", "note", "notes",
     "error_message", "description"}
)  # fmt: skip


def redact_values(value: Any, known: Mapping[str, str] | None = None) -> Any:
    """`value` (a payload: dicts, lists, strings, numbers) with every string in it redacted."""
    if isinstance(value, str):
        return redact(value, known)
    if isinstance(value, dict):
        return {key: redact_values(item, known) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [redact_values(item, known) for item in value]
    return value


def redact_payload(
    payload: dict[str, Any], known: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """An event's payload with the values of its `OUTSIDE_TEXT` fields redacted, at any depth;
    every other field exactly as it was. The process's secrets are looked up once for it."""
    out: dict[str, Any] = {}
    for key, value in payload.items():
        if key in OUTSIDE_TEXT and value:
            known = _process_secrets() if known is None else known
            out[key] = redact_values(value, known)
        elif isinstance(value, dict):
            out[key] = redact_payload(value, known)
        elif isinstance(value, list):
            out[key] = [redact_payload(item, known) if isinstance(item, dict) else item
                        for item in value]  # fmt: skip
        else:
            out[key] = value
    return out


def held_secrets() -> Mapping[str, str]:
    """The secret values this process holds, by the name each was found under: `known` for
    many `redact` calls in a row, looked up once."""
    return _process_secrets()


def _process_secrets() -> Mapping[str, str]:
    env = process_env()
    return _secrets_of(tuple(sorted(env.items())))


@functools.lru_cache(maxsize=4)
def _secrets_of(env: tuple[tuple[str, str], ...]) -> Mapping[str, str]:
    # Longest first, so a secret that contains another is masked whole.
    found = known_values(dict(env))
    return dict(sorted(found.items(), key=lambda pair: -len(pair[0])))
