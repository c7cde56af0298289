"""Finding a secret in what is about to leave: the added lines of a diff.

Two kinds of hit: the exact value of a secret the harness knows (its tracker token, the keys
it holds or handed to an agent), and text in a vendor's documented key format. A hit names the
file, the line and which kind of secret it is, and never repeats the value.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from agent_harness.git.protect import glob_matches
from agent_harness.secrets.shapes import key_shape

_HUNK = re.compile(r"^@@ -\d+(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_ESCAPES = {"n": "\n", "t": "\t", '"': '"', "\\": "\\"}


@dataclass(frozen=True)
class SecretFinding:
    """One secret in one added line. `what` says which secret, never its value."""

    path: str
    line: int
    what: str
    exact: bool  # the value of a secret the harness knows, not just a key's shape

    def describe(self) -> str:
        return f"{self.path}:{self.line} holds {self.what}"


def scan_diff(
    diff: str, known: Mapping[str, str], *, shapes_ignored_in: Iterable[str] = ()
) -> list[SecretFinding]:
    """The secrets in the lines `diff` (a unified git diff) adds, in diff order.

    `known` maps each secret value to the name it is known by. Shape hits in files matching
    `shapes_ignored_in` (globs a person set, e.g. for test fixtures) are not reported; exact
    values are reported everywhere.
    """
    ignored = tuple(shapes_ignored_in)
    findings: list[SecretFinding] = []
    for path, number, text in added_lines(diff):
        found = _scan_line(text, known, skip_shapes=_matches(path, ignored))
        if found:
            findings.append(SecretFinding(path, number, found[0], found[1]))
    return findings


def added_lines(diff: str) -> Iterator[tuple[str, int, str]]:
    """The lines a unified git diff adds, as (file, line number in the new file, text), in diff
    order. Inside a hunk every line is content, as its header counts them: an added line that
    reads `++ x` (`+++ x` in the diff) is an added line, not the next file's header."""
    path = ""
    number = 0
    old_left = new_left = 0
    for raw in diff.split("\n"):
        if old_left > 0 or new_left > 0:
            if raw.startswith("+"):
                yield path, number, raw[1:]
                number += 1
                new_left -= 1
                continue
            if raw.startswith("-"):
                old_left -= 1
                continue
            if raw.startswith(" "):
                number += 1
                old_left, new_left = old_left - 1, new_left - 1
                continue
            if raw.startswith("\\"):  # "\ No newline at end of file"
                continue
            old_left = new_left = 0  # the counts were wrong: read it as a header line
        if raw.startswith("+++ "):
            path = _new_path(raw[4:])
            continue
        hunk = _HUNK.match(raw)
        if hunk:
            old_count, start, new_count = hunk.groups()
            number = int(start)
            old_left = int(old_count) if old_count is not None else 1
            new_left = int(new_count) if new_count is not None else 1


def _scan_line(
    text: str, known: Mapping[str, str], *, skip_shapes: bool
) -> tuple[str, bool] | None:
    for value, name in known.items():
        if value in text:
            return f"the value of {name}", True
    shape = None if skip_shapes else key_shape(text)
    return (shape, False) if shape else None


def _new_path(header: str) -> str:
    """The file name of a `+++ b/path` header, unquoted the way git quotes unusual names."""
    header = header.rstrip("\r")
    if header.startswith('"') and header.endswith('"') and len(header) > 1:
        header = _unquote(header[1:-1])
    return header[2:] if header.startswith("b/") else header


def _unquote(text: str) -> str:
    out = bytearray()
    index = 0
    while index < len(text):
        char = text[index]
        if char == "\\" and index + 1 < len(text):
            following = text[index + 1]
            octal = text[index + 1 : index + 4]
            if len(octal) == 3 and all(c in "01234567" for c in octal):
                out.append(int(octal, 8))
                index += 4
                continue
            out += _ESCAPES.get(following, following).encode("utf-8")
            index += 2
            continue
        out += char.encode("utf-8")
        index += 1
    return out.decode("utf-8", errors="replace")


def _matches(path: str, globs: tuple[str, ...]) -> bool:
    return any(glob_matches(glob, path) for glob in globs)
