"""The grammar of one plan line: ids, item lines, titles, metadata keys and milestone headings.

The markdown walker decides where a line sits (a heading, a checkbox, a table cell); this module
decides what the line's text says. Titles carry the conventions other planning tools write into
them (spec-kit's `[P]` and `[US1]` markers, a closing `(depends on T1, T2)`), and they are taken
out of the title here so every item form reads them the same way.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Collection
from dataclasses import dataclass

ID = r"[A-Z][A-Z0-9]*(?:[-_][A-Z0-9]+)*"


ID_RE = re.compile(rf"^{ID}$")


ID_ANYWHERE = re.compile(rf"(?<![A-Za-z0-9_-])({ID})(?![A-Za-z0-9_-])")


# `：` is the colon a Chinese or Japanese keyboard types (`### T4：添加缓存层`).
SEP = r"(?::|：|\.|\)|—|–|-{1,2})"


# A heading item needs a separator after its id, so "## Q3 goals" stays a plain heading.
HEADING_ITEM = re.compile(rf"^\[?({ID})\]?\s*{SEP}\s*(.*)$|^\[({ID})\]\s*(.*)$")


def heading_item_id(text: str) -> str | None:
    """The id `text` would be a heading item of, if it ends in a digit as ids do."""
    match = HEADING_ITEM.match(text)
    item_id = (match.group(1) or match.group(3)) if match else None
    return item_id if item_id and item_id[-1].isdigit() else None


LOOSE_ID = re.compile(rf"^({ID})\s+\S")
# A list line with something after its bullet (an empty `-` says nothing).
BULLET_TEXT = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+\S")
# Like an id but with lower-case letters, followed by a separator: reported, never guessed.
ALMOST_ID = re.compile(rf"^\[?([A-Za-z][A-Za-z0-9]*(?:[-_][A-Za-z0-9]+)*)\]?\s*{SEP}\s")


# An id with a dot and digits right after it (`T1.1`, `[T2.10]`): ids hold no dot, so this is
# reported, never read as item T1 titled "1: ...".
DOTTED_ID = re.compile(rf"^\[?({ID}(?:\.\d+)+)\b")


def dotted_id_reason(dotted: str) -> str:
    """Why a line whose id has a dot in it is not read as an item."""
    return (
        f"'{dotted}' has a dot in its id: ids hold upper-case letters, digits, '-' and '_' "
        f"(write {dotted.replace('.', '-')}); not read as an item"
    )


# `[ ]` open, `[x]` done; `[-]`, `[/]` and `[~]` are tasks under way (Kiro marks a task in
# progress `[-]`), still open: read as `[ ]`, never dropped.
CHECKBOX = re.compile(r"^\[( |x|X|-|/|~)\]\s*(.*)$", re.DOTALL)
DONE_BOX = frozenset({"x", "X"})


CHECKBOX_ITEM = re.compile(rf"^\[?({ID})\]?(?:\s*{SEP}\s*|\s+|$)(.*)$")


META = re.compile(r"^\s*([A-Za-z][A-Za-z _-]{0,30}?)\s*:\s*(.*?)\s*$")


# "Milestone" as a word of its own, then a separator, a space or nothing: "Milestone: v0.1",
# "Milestone M1: Foundations", "Milestone — Beta". "Milestone-based planning" is not one.
_MILESTONE_HEADING = re.compile(r"^milestone(?:\s*[:—–]|\s+-{1,2}(?=\s|$)|(?=\s)|$)\s*(.*)$", re.I)


_MENTIONS_MILESTONE = re.compile(r"\bmilestone\b", re.IGNORECASE)


KEYS: dict[str, str] = {
    "labels": "labels",
    "label": "labels",
    "tags": "labels",
    "milestone": "milestone",
    "depends on": "depends_on",
    "depends": "depends_on",
    "deps": "depends_on",
    "dependencies": "depends_on",
    "blocked by": "depends_on",
    "after": "depends_on",
    "requires": "depends_on",
    "check": "success_check",
    "success": "success_check",
    "success check": "success_check",
    "acceptance": "success_check",
    "acceptance criteria": "success_check",
    "done when": "success_check",
    "verify": "success_check",
    "files": "files",
    "status": "status",
}


# The longest label name GitHub takes (a longer one refuses the whole issue).
LABEL_MAX = 50


def read_labels(marked: tuple[str, ...], value: str) -> tuple[list[str], list[str]]:
    """An item's labels (its title's markers, then a `labels:` line's, each once), and why
    any was left out: one longer than GitHub takes would make the issue refused."""
    labels, too_long = list(marked), []
    for label in (part.strip().strip("`'\"").strip() for part in value.split(",")):
        if len(label) > LABEL_MAX:
            too_long.append(f"label of {len(label)} characters left out: GitHub takes at most "
                            f"{LABEL_MAX}")  # fmt: skip
        elif label and label not in labels:
            labels.append(label)
    return labels, too_long


TABLE_COLUMNS: dict[str, str] = {
    **KEYS,
    "id": "id",
    "task id": "id",
    "issue key": "id",  # Jira's export (a plain "Key" column is as often a key/value table's)
    "issue id": "id",
    "ticket": "id",
    "title": "title",
    "task": "title",
    "name": "title",
    "summary": "title",
    "body": "body",
    "description": "body",
    "details": "body",
    "notes": "body",
    "done": "status",
    "state": "status",
}


ITEM_FORMS = (
    "Items are `### T1: ...` headings, `- [ ] T1 ...` checkboxes or table rows with an id column"
)


DONE_WORDS = {"x", "[x]", "yes", "y", "true", "done", "complete", "completed", "merged", "✅", "✓",
              # Work decided against is not to be done either (Taskmaster and Cursor plans
              # read their "cancelled" the same way): no issue is made for it, none is run.
              "cancelled", "canceled", "won't do", "wont do", "won't fix", "wontfix",
              "dropped", "abandoned", "obsolete", "not planned", "rejected"}  # fmt: skip
DONE_MARKS = ("✅", "✓", "✔", "☑")  # a status, or a heading (`### ✅ T12: Ship it`), done


def status_done(value: str) -> bool:
    """Whether a `status:` value (or a table's status cell) says done, however it is dressed:
    `Done`, `done.`, `Done ✅`, `✅ Done`, `Done (2025-01-02)`, `**Complete**`. Only that: "Done
    by Friday" or "Complete: 40%" says something else, and is not done."""
    text = value.strip().lower()
    marked = any(mark in text for mark in DONE_MARKS)
    for mark in DONE_MARKS:
        text = text.replace(mark, " ")
    text = re.sub(r"\([^)]*\)", " ", text).strip(" \t*_`.!:;,-—")
    return text in DONE_WORDS or (marked and not text)


NO_DEPS = {"", "none", "-", "—", "n/a", "na", "nothing"}

# What a plan writes where a value is yet to come (`files: N/A`, `check: TBD`): no value. A
# placeholder taken at its word would be a file named `N/A`, a label `none`, a check `TBD`.
PLACEHOLDERS = NO_DEPS | {"–", "tbd", "tba", "todo", "?", "??", "null", "nil", "not yet"}


def placeholder(value: str) -> bool:
    """Whether a metadata value holds the place of one to come, however dressed (`*TBD*`)."""
    return value.strip().strip("*_`.!").strip().lower() in PLACEHOLDERS


# What a `status:` may say of an item still to do, said without a word: any other status that
# is not done (`Blocked on legal review`) is reported, and stays in the body for the agent.
OPEN_WORDS = {"open", "todo", "to do", "not done", "not started", "pending", "planned", "new",
              "in progress", "in-progress", "wip", "doing", "started", "ready", "backlog", "",
              "[ ]", "no", "n", "false"}  # fmt: skip


def status_open(value: str) -> bool:
    """Whether a `status:` value plainly says the item is still to do, however dressed
    (`🟡 In Progress`, `**Todo**`)."""
    words = "".join(" " if unicodedata.category(char)[0] == "S" else char for char in value)
    return " ".join(words.lower().split()).strip(" \t*_`.!:;,-—") in OPEN_WORDS


# The programs a check is usually run with: a `check:` that starts with one (`pytest -q`) but
# is no code span is read by the reviewer and never run, and the plan says so.
_PROGRAMS = frozenset({
    "pytest", "py.test", "python", "python3", "npm", "npx", "yarn", "pnpm", "bun", "deno", "node",
    "make", "cargo", "go", "uv", "uvx", "tox", "nox", "ruff", "mypy", "pyright", "jest", "vitest",
    "mocha", "mvn", "gradle", "./gradlew", "./mvnw", "dotnet", "bundle", "rake", "rspec",
    "phpunit", "composer", "swift", "xcodebuild", "ctest", "cmake", "just", "poetry", "hatch",
    "pip", "bash", "sh", "zsh", "bazel", "mix", "flutter", "dart", "sbt", "lein", "stack",
    "cabal", "tsc", "eslint", "pylint", "flake8", "black", "pre-commit", "playwright", "cypress",
    "docker", "curl",
})  # fmt: skip


NO_TITLE_COLUMN = (
    "table has an id column but no title column (title, task, name, summary or description); "
    "not read as items"
)

# The fields a placeholder value (`N/A`, `TBD`) leaves empty, and what the item then lacks.
PLACEHELD = {"files": "file list", "labels": "labels", "success_check": "success check",
              "milestone": "milestone"}  # fmt: skip


def unquoted_check(item_id: str, check: str) -> str | None:
    """What to say of a success check in words that starts like a command (`python -m pytest`
    without backticks): the reviewer reads it, and nothing runs it. None for any other."""
    words = check.strip()
    if words.startswith("`") or not command_like(words):
        return None
    return (
        f"{item_id}'s check reads like a command but is not in backticks: the reviewer reads "
        f"it, nothing runs it; write `{words}` in backticks to run it"
    )


def command_like(value: str) -> bool:
    """Whether a success check written as plain text starts like a shell command."""
    words = value.strip().removeprefix("$").split()
    return bool(words) and (words[0] in _PROGRAMS or words[0].startswith("./"))


# The label a title marker becomes: spec-kit's `[P]` (safe to run in parallel with its
# neighbours) and `[US1]` (the user story the task serves).
PARALLEL_LABEL = "parallel"
STORY_LABEL_PREFIX = "story:"


_WORD = r"[A-Za-z][A-Za-z0-9_-]{0,30}"
# One marker, or several in one pair of brackets (spec-kit's `[US1,US2]`).
_MARKER = re.compile(rf"^\[({_WORD}(?:\s*,\s*{_WORD}){{0,9}})\](?!\()\s*")
# spec-kit's own markers at the end of a title, after its `(depends on …)`: `… (depends on
# T001) [P]`. Only those: any other word in brackets there (`index [i]`) is the title's own.
_END_MARKER = re.compile(r"\s*\[(P|US\d+(?:\s*,\s*US\d+){0,9})\]\s*$")


_STORY = re.compile(r"^US\d+$")


# Only words that cannot mean anything else: "(after HTTP2)" or "(requires TLS13)" in a title
# may name no item at all, so those stay in the title.
_DEP_WORDS = r"depends\s+on|depends|deps|dependencies|blocked\s+by"


_TRAILING_DEPS = re.compile(
    rf"\s*\(\s*(?:{_DEP_WORDS})\b\s*:?\s*([^()]*?)\s*\)\s*[.;,]?\s*$", re.IGNORECASE
)


# An id with a letter after its number (spec-kit's `T012a`, slipped in after T012): no id,
# but a `(depends on T012a)` naming one is a dependency to report, not part of the title.
_INSERTED = re.compile(rf"(?<![A-Za-z0-9_-]){ID}(?<=\d)[a-z](?![A-Za-z0-9_-])")


def norm_key(key: str) -> str:
    return " ".join(re.split(r"[\s_-]+", key.strip().lower()))


@dataclass(frozen=True)
class Title:
    """An item's title with the markers other tools put in it taken out."""

    text: str
    labels: tuple[str, ...] = ()
    depends_on: str | None = None  # the ids of a closing `(depends on ...)`, as written


def read_title(raw: str) -> Title:
    """Split `[P] [US1] Create model (depends on T012, T013)` into the title `Create model`, the
    labels `parallel` and `story:US1`, and the dependency text `T012, T013`.

    A marker shaped like an item id (`[T3]`) is left in the title: whether it names a
    dependency or a story is a guess. So is a closing parenthesis that names no id at all."""
    text = raw.strip()
    labels: list[str] = []
    while (match := _MARKER.match(text)) and _take_marker(match.group(1), labels):
        text = text[match.end() :]
    ending: list[str] = []
    while (match := _END_MARKER.search(text)) and _take_marker(match.group(1), ending):
        text = text[: match.start()]
    labels += [label for label in ending if label not in labels]
    depends = None
    trailing = _TRAILING_DEPS.search(text)
    if trailing and (ID_ANYWHERE.search(trailing.group(1)) or _INSERTED.search(trailing.group(1))):
        depends = trailing.group(1)
        text = text[: trailing.start()]
    return Title(text.strip(), tuple(labels), depends)


def _take_marker(words: str, labels: list[str]) -> bool:
    """Add the labels of one marker's words to `labels`; False, adding none, when a word is
    shaped like an item id (`[T3]` may be a dependency or a name: it stays in the title)."""
    found: list[str] = []
    for word in (part.strip() for part in words.split(",")):
        if word == "P":
            found.append(PARALLEL_LABEL)
        elif _STORY.match(word):
            found.append(STORY_LABEL_PREFIX + word)
        elif ID_RE.match(word) and word[-1].isdigit():
            return False
        else:
            found.append(word)
    labels += [label for label in dict.fromkeys(found) if label not in labels]
    return True


@dataclass(frozen=True)
class MilestoneHeading:
    """What a plain heading says about milestones: a name, or why it gives none."""

    name: str | None
    problem: str | None = None


def read_milestone_heading(text: str) -> MilestoneHeading | None:
    """The milestone a heading opens (`Milestone M1: Foundations` opens `M1: Foundations`),
    or the reason a heading that speaks of a milestone opens none; None for other headings."""
    match = _MILESTONE_HEADING.match(text)
    if match:
        name = match.group(1).strip()
        if name:
            return MilestoneHeading(name)
        return MilestoneHeading(None, "milestone heading has no name; the items under it get none")
    if _MENTIONS_MILESTONE.search(text):
        return MilestoneHeading(
            None,
            "heading mentions a milestone but does not start with 'Milestone'; "
            "the items under it get no milestone from it",
        )
    return None


# A checkbox that only names an issue or pull request (GitHub's task lists): `#1423`,
# `acme/docs#88`, or its address.
_ISSUE_REF = re.compile(
    r"^(?:[\w.-]+/[\w.-]+)?#\d+$|^https?://\S+/(?:issues|pull)/\d+/?$", re.IGNORECASE
)


def checkbox_without_id(text: str) -> str:
    """Why a checkbox is no item, naming a lower-case id when it starts with one."""
    if _ISSUE_REF.match(text.strip()):
        # An item (and so an issue) made for it would repeat the issue it names.
        return "checkbox names an issue or pull request, not a task: no item is made for it"
    first = re.match(r"\[?([A-Za-z][A-Za-z0-9]*(?:[-_][A-Za-z0-9]+)*)\]?", text)
    word = first.group(1) if first else ""
    if word and word[-1].isdigit() and not ID_RE.match(word):
        upper = word.upper()
        return f"checkbox has no item id: '{word}' is not one (ids are upper case, like {upper})"
    if len(word) > 2 and word[-1].islower() and word[-2].isdigit() and ID_RE.match(word[:-1]):
        # spec-kit's way of slipping a task in between two (`T012a` after T012)
        return (
            f"checkbox has no item id: '{word}' is not one (an id ends in its number); "
            "give the task a number of its own"
        )
    late = _LATE_ID.match(text)
    if late is not None and late.group(2)[-1].isdigit():
        # `(T6) Paren`, `TODO: T13 …`, `🔴 T14 …`: an id given a second one would be lost
        return (
            f"checkbox has its id {late.group(2)} after '{late.group(1).strip()}'; "
            f"write it first (`- [ ] {late.group(2)} …`) to make it an item"
        )
    return "checkbox has no item id"


# How the reason for a checkbox whose id reads as a word goes on: `--add-ids` numbers it.
WORD_NOT_ID = "reads as a word of the task"


def id_prefix(item_id: str) -> str:
    """What an id says before its number: `T` of T12, `AUTH-` of AUTH-3."""
    return item_id.rstrip("0123456789")


def word_not_id(word: str) -> str:
    """Why `- [ ] S3 bucket policy` is no item S3: no other item's id starts with its prefix."""
    return (
        f"checkbox has no item id: '{word}' {WORD_NOT_ID} (no other id starts with "
        f"'{id_prefix(word)}'); write `{word}:` to make it one"
    )


# An id after a checkbox's opening bracket, marks or status word (`(T6)`, `🔴 T14`, `TODO: T13`):
# it names the item already, and --add-ids never gives it a second. ("Review T1 output" is a
# task about T1, and gets an id of its own.)
_STATUS_WORD = r"(?i:todo|done|doing|task|next|later|now|wip|fixme|blocked|cancell?ed)"
_LATE_ID = re.compile(rf"^((?:\(|[^\w\s(]{{1,4}}\s*|{_STATUS_WORD}:?\s+))({ID})(?![\w-])")


# Words a title does not end on: a line that ends with one was wrapped (spec-kit's older
# template wraps `- [ ] T003 [P] Contract test POST /api/users in` onto the next line).
_DANGLING = re.compile(
    r"(?:^|\s)(?:in|into|to|for|of|and|or|the|a|an|with|on|at|from|by|via|as|under|over|per)"
    r"$|,$"
)
# Words a title may end on and a sentence start with a lower-case word after ("Let users sign
# in" over "they use OAuth" is a title and its body): then only a path or a name joins it.
_PARTICLES = re.compile(r"(?:^|\s)(?:in|on|at|a|an|over|under)$")


def wrapped_title(title: str, following: str) -> str:
    """The title's continuation on the paragraph's next line, when the title was cut in the
    middle of a phrase (it ends on `to`, `for`, `the`, a comma, ...) and that line goes on
    with it: one word or path (`tests/contract/test_users_post.py`), or words starting in
    lower case after a word no title ends on. "" otherwise: the line is the body's."""
    title, following = title.rstrip(), following.strip()
    if not following or not _DANGLING.search(title) or META.match(following):
        return ""
    if " " not in following and not following[0].isupper():
        return following  # a path, a name: what a title cut short goes on with
    if following[0].islower() and not _PARTICLES.search(title):
        return following
    return ""


# A list entry (not a checkbox: that is the next item), with its indent.
_ENTRY = re.compile(r"^(\s*)[-*+]\s+(?!\[[ xX/~-]\])(\S.*?)\s*$")
_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")


def value_below(lines: list[str], line0: int, key: str) -> tuple[str, range]:
    """The value of a `key:` line left empty, from the lines right under it, and those lines:
    a list's entries (`Files:` over `- src/a.py`, `Dependencies:` over `- T1`), no deeper out
    than the key and never a checkbox (the next item), joined as one line would write them; for
    a check, the commands of a fenced block under it, each to pass (`a && b`). Nothing (and no
    lines) when neither is there."""
    at = line0 + 1
    fence = _FENCE.match(lines[at]) if at < len(lines) else None
    if fence is not None:
        if key != "success_check":
            return "", range(0)
        close = next((n for n in range(at + 1, len(lines))
                      if lines[n].strip().startswith(fence.group(1))), None)  # fmt: skip
        commands = [line.strip() for line in lines[at + 1 : close] if line.strip()]
        if close is None or not commands or any("`" in command for command in commands):
            return "", range(0)
        return f"`{' && '.join(commands)}`", range(at, close + 1)  # each must pass
    indent = len(lines[line0]) - len(lines[line0].lstrip())
    end = at
    while end < len(lines) and (entry := _ENTRY.match(lines[end])) and len(entry[1]) >= indent:
        end += 1
    entries = [_ENTRY.match(lines[n])[2] for n in range(at, end)]  # type: ignore[index]
    joiner = "; " if key == "success_check" else ", "
    return joiner.join(entries), range(at, end)


# A title's closing words that name what it waits for in other words than `(depends on …)`:
# `(after T1)`, `(needs T1, T2)`, `(requires T1)`, `[depends: T1]`, `[depends on T1]`,
# `— depends on T1`.
# An id or a task's number (`T1`, `2.1`), then more joined by commas or `and`; a word such as
# `task` or `items` may come first (`after tasks 1 and 2`, as Kiro's tasks and people write).
_ONE_ID = rf"(?:{ID}|\d{{1,6}}(?:\.\d{{1,6}}){{0,3}})"
_IDS = rf"((?i:(?:the\s+)?(?:tasks?|items?|steps?)\s+)?{_ONE_ID}(?:\s*(?:,|&|and)\s*{_ONE_ID})*)"
_ANY_ID = re.compile(rf"(?<![\w.-]){_ONE_ID}(?![\w-]|\.\d)")
_SOFT_DEPS = (
    re.compile(
        r"\s*[(\[]\s*(?i:after|needs|requires|waits\s+for|blocked\s+(?:on|by)|depends(?:\s+on)?)"
        rf"\s*:?\s*{_IDS}"
        r"\s*[)\]]\s*[.;,]?\s*$"
    ),
    re.compile(rf"\s+[—–-]{{1,2}}\s*(?i:depends\s+on|after|needs)\s+{_IDS}\s*[.]?\s*$"),
)

# A line of an item's body that says, in a sentence of its own, what the item waits for:
# `Depends on task 1`, `This depends on tasks 1 and 2.`, `Blocked by T3`. It has no colon, so it
# is no `depends on:` field; it is read only when every id it names is an item of the plan, and
# it stays in the body.
PROSE_DEPENDS = re.compile(
    r"^\s*(?i:(?:this\s+(?:task\s+|item\s+|step\s+)?)?(?:depends\s+on|requires|needs|"
    r"(?:is\s+)?blocked\s+(?:on|by)|waits\s+(?:for|on)|comes\s+after|(?:do\s+|only\s+)?after))"
    rf"\s+{_IDS}\s*[.;]?\s*$"
)


def named_ids(text: str) -> list[str]:
    """The ids and task numbers `text` (a list such as `tasks 1 and 2.1`) names, in order."""
    return _ANY_ID.findall(text)


# A title's closing words that wait for an issue by its number (`(depends on #12)`): no item
# id, so it is not read as a dependency, and the reader is told so.
_ISSUE_DEPS = re.compile(
    r"[(\[]\s*(?i:after|needs|requires|waits\s+for|blocked\s+(?:on|by)|depends(?:\s+on)?)"
    r"\s*:?\s*(#\d+(?:\s*(?:,|&|and)\s*#\d+)*)\s*[)\]]\s*[.;,]?\s*$"
)


def issue_dependency(title: str) -> str | None:
    """Why `Add D (depends on #12)` waits for nothing: the issues it names are no items."""
    match = _ISSUE_DEPS.search(title)
    if match is None:
        return None
    issues = "issues" if "#" in match.group(1)[1:] else "issue"
    return (
        f"a dependency on {issues} {match.group(1)} is not read: a plan's items wait for items; "
        "name their ids (`depends on: T3`)"
    )


def soft_dependencies(title: str, known: Collection[str]) -> tuple[str, str | None]:
    """`title` without a closing dependency written in other words, and the ids it names: only
    when each is an item of the plan (`(requires TLS13)` names none, and stays the title's)."""
    for pattern in _SOFT_DEPS:
        match = pattern.search(title)
        named = named_ids(match.group(1)) if match else []
        if match is not None and named and all(name in known for name in named):
            return title[: match.start()].rstrip(), ", ".join(named)
    return title, None


def prose_dependencies(line: str, known: Collection[str]) -> str | None:
    """The ids a sentence of its own such as `Depends on tasks 1 and 2.` names, when each is an
    item of the plan (`Requires TLS13` names none, and stays prose)."""
    match = PROSE_DEPENDS.match(line)
    named = named_ids(match.group(1)) if match else []
    return ", ".join(named) if named and all(name in known for name in named) else None


# A comma between files, not one inside a glob's braces (`src/{a,b}.ts`).
_FILE_COMMA = re.compile(r",(?![^{}]*\})")


def split_files(value: str) -> list[str]:
    """A `files:` value's paths and globs, each unquoted, a brace glob (`src/{a,b}.ts`) kept
    whole."""
    parts = (part.strip().strip("`'\"").strip() for part in _FILE_COMMA.split(value))
    return [part for part in parts if part]
