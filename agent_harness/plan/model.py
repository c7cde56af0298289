"""The plan as data: work items with stable ids, content hashes and dependencies.

Every other part reads plans through these models; this module imports nothing else of ours.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
from pathlib import Path, PurePath
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from agent_harness.errors import UsageError

ItemForm = Literal["heading", "checkbox", "table"]


class WorkItem(BaseModel):
    """One unit of work from a plan: what to do and how to tell it is done."""

    model_config = ConfigDict(frozen=True)

    id: str = Field(description="Stable id written in the plan, e.g. T1 or AUTH-3.")
    title: str = Field(description="One-line title.")
    body: str = Field(default="", description="Markdown under the item, metadata lines removed.")
    labels: tuple[str, ...] = Field(default=(), description="Tracker labels.")
    milestone: str | None = Field(default=None, description="Tracker milestone title.")
    depends_on: tuple[str, ...] = Field(default=(), description="Ids that must be done first.")
    success_check: str | None = Field(
        default=None, description="An observable check that says the item is done."
    )
    files: tuple[str, ...] = Field(
        default=(), description="Paths (globs) the item may change; empty means anywhere."
    )
    done: bool = Field(default=False, description="Checked off in the plan: never run.")
    line: int = Field(description="1-based line of the item in the source file.")
    form: ItemForm = Field(description="How the item was written: heading, checkbox or table.")

    @property
    def content_hash(self) -> str:
        """Hash of everything that shapes the item's issue; moving the item does not change it."""
        return content_hash(self)


def content_hash(item: WorkItem) -> str:
    payload = {
        "title": item.title,
        "body": item.body,
        "labels": sorted(item.labels),
        "milestone": item.milestone,
        "depends_on": sorted(item.depends_on),
        "success_check": item.success_check,
        "files": sorted(item.files),
    }
    raw = json.dumps(payload, sort_keys=True, ensure_ascii=False).encode()
    return hashlib.sha256(raw).hexdigest()[:16]


class Notice(BaseModel):
    """A line the parser could not read, or read with a caveat, and why."""

    model_config = ConfigDict(frozen=True)

    line: int = Field(description="1-based line in the source file.")
    reason: str = Field(description="What is wrong, in one sentence.")
    text: str = Field(default="", description="The line as written (trimmed).")


class Plan(BaseModel):
    """A parsed plan: its items, and what could not be read."""

    model_config = ConfigDict(frozen=True)

    source: str = Field(description="Where the plan came from (a path, or '-').")
    items: tuple[WorkItem, ...] = ()
    unread: tuple[Notice, ...] = ()
    notes: tuple[str, ...] = Field(
        default=(), description="Remarks on the whole file, e.g. that it holds no items."
    )

    def item(self, item_id: str) -> WorkItem:
        for candidate in self.items:
            if candidate.id == item_id:
                return candidate
        raise KeyError(item_id)

    @property
    def without_check(self) -> tuple[WorkItem, ...]:
        """Open items with no observable success check: allowed, and visibly flagged."""
        return tuple(item for item in self.items if not item.success_check and not item.done)


def _raw_value(raw_line: str) -> str:
    """The markdown after a metadata key: '**Check:** `make`' gives '`make`'."""
    _, _, value = raw_line.partition(":")
    return value.strip().lstrip("*_").strip()


def check_command(success_check: str | None) -> str | None:
    """The shell command a success check names, when it is exactly one `code span`."""
    if not success_check:
        return None
    text = success_check.strip()
    match = re.fullmatch(r"(`+)\s*([^`]+?)\s*\1", text)
    command = match.group(2).strip() if match else ""
    return command or None  # "` `" names no command: it would pass without checking anything


PLAN_KEY_PATTERN = r"^[A-Za-z0-9._-]{1,64}$"  # what a plan key may be
_PLAN_KEY = re.compile(PLAN_KEY_PATTERN.strip("^$"))


def check_plan_key(text: str) -> str:
    """A plan key given by hand, refused unless a key can hold it as it is. (A key that could
    not be written into an issue's marker and read back would find no issue of its own, and
    every sync would make the plan's issues again.)"""
    if not _PLAN_KEY.fullmatch(text):
        raise UsageError(
            f"plan key {text[:80]!a} may hold only letters, digits, '.', '_' and '-' "
            "(1 to 64 of them)"
        )
    return text


def default_plan_key(path: PurePath) -> str:
    """The plan key a plan file's issues get unless one is given: the file's name without its
    extension. A Kiro spec's `.kiro/specs/<spec>/tasks.md` is keyed by its spec instead: every
    spec has a tasks.md numbered from 1, and two specs under one key would share issues. (Give
    a path that names the spec's directories: an absolute one, or one from the repository;
    a symbolic link keeps its own name, not its target's.)"""
    parts = path.parts
    if path.name == "tasks.md" and parts[-4:-2] == (".kiro", "specs"):
        # A name a key cannot hold is spelled with dashes and marked with a hash of itself
        # (`my spec` is `my-spec-` and 6 hex digits), so two specs never share one key.
        return plan_key_from(parts[-2])
    # A name that is not UTF-8, or holds a newline or another control character, can be no
    # key as it is: it would be written into every issue's marker.
    if shown_path(path.stem) != path.stem or not path.stem.isprintable():
        return plan_key_from(path.stem)
    return path.stem


def shown_path(text: str) -> str:
    """A path as text that can be written anywhere (an issue, a marker, a terminal): a byte of
    its name that is not UTF-8 (kept by Python as a lone surrogate) is spelled out as `\\xe9`,
    the same on every run, so what is shown can be compared with what was shown before. A lone
    surrogate no byte stands for (`\\ud800`, from text, not a name) is spelt out as such."""
    try:
        raw = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return raw.decode("utf-8", "backslashreplace")


def shell_word(text: str) -> str:
    """`text` quoted for a command the user will copy: shlex's quoting, or, for a name that is
    not UTF-8 or holds a control character, bash's `$'caf\\xe9.md'`, which gives the shell
    back the very bytes and sends no escape sequence to the terminal showing it."""
    shown = shown_path(text)
    if shown == text and text.isprintable():
        return shlex.quote(text)
    raw = text.encode("utf-8", "surrogateescape")
    return "$'" + "".join(_shell_byte(byte) for byte in raw) + "'"


def _shell_byte(byte: int) -> str:
    char = chr(byte)
    if byte < 0x80 and char.isprintable() and char not in "'\\":
        return char
    return f"\\x{byte:02x}"


def plan_key_for(source: str, given: str | None) -> str:
    """The plan key of the plan read from `source`: the one `given`, else its file's
    (`default_plan_key`). A plan read from standard input (`-`) has no file to key it by: keyed
    `-`, it would open every issue of the plan it stands for a second time, so a key is asked
    for instead."""
    if given:
        return given
    if source == "-":
        raise UsageError(
            "a plan read from standard input has no file name to key its issues by: give "
            "--plan-key, the key of the plan file it stands for (PLAN for PLAN.md)"
        )
    return default_plan_key(Path(os.path.abspath(source)))


def plan_key_from(name: str) -> str:
    """`name` as a plan key: itself when a key can hold it, else spelled with dashes and marked
    with a hash of itself (`my spec` is `my-spec-` and 6 hex digits), so two names never share
    one key."""
    if _PLAN_KEY.fullmatch(name):
        return name
    # A name that is not UTF-8 (a folder named in Latin-1) is hashed as the bytes it is.
    digest = hashlib.sha256(name.encode("utf-8", "surrogateescape")).hexdigest()[:6]
    return f"{re.sub(r'[^A-Za-z0-9._-]+', '-', name).strip('-.')[:50]}-{digest}".lstrip("-")


def plan_in_repo(source: str) -> tuple[Path, str] | None:
    """The git work tree holding the plan file `source` and the plan's path in it (with `/`),
    the same on every clone, from every directory and through every symbolic link; None for
    standard input, a plan that is no file, or one in no work tree we may look into."""
    if source in ("", "-"):
        return None
    try:
        path = Path(os.path.realpath(source))
        if not path.is_file():
            return None
        for parent in path.parents:
            if _is_work_tree(parent):
                return parent, shown_path(path.relative_to(parent).as_posix())
    except OSError:  # a directory we may not read, a name too long
        return None
    return None


def _is_work_tree(directory: Path) -> bool:
    """Whether `directory` is the top of a git work tree: its `.git` is a git directory (it has
    a HEAD) or the file a linked worktree or submodule has (`gitdir: ...`). A stray empty
    `.git` (some tools leave one in /tmp) is none."""
    dot_git = directory / ".git"
    if dot_git.is_dir():
        return (dot_git / "HEAD").is_file()
    if dot_git.is_file():
        with open(dot_git, "rb") as handle:
            return handle.read(8) == b"gitdir: "
    return False
