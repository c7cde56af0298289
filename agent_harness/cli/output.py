"""Shared rendering helpers for CLI commands: one console, JSON printing, tables."""

from __future__ import annotations

import json
import math
import sys
import unicodedata
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from pathlib import Path

    from rich.console import Console

    from agent_harness.store.database import Store


def console(stderr: bool = False) -> Console:
    from rich.console import Console

    # soft_wrap: lines are never broken by us; a command in a hint stays whole when copied,
    # and the terminal folds what is too long. Tables still fit the width.
    return Console(stderr=stderr, highlight=False, soft_wrap=True)


def from_env(name: str) -> Any:
    """A click callback filling an option the command line left unset from variable `name`.

    Used instead of click's `envvar`, which reads only os.environ: credentials are sealed out
    of that at start-up (`agent_harness.secrets.process`) and are found here all the same.
    """
    from click.core import ParameterSource

    from agent_harness.secrets.process import process_env

    def fill(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
        given = ctx.get_parameter_source(param.name or "")
        found = process_env().get(name)
        if found and given in (None, ParameterSource.DEFAULT):
            return param.type_cast_value(ctx, found)
        return value

    return fill


def checked_name(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A click callback for text naming something in the database (a project, an item, a kind
    of event): UTF-8, with no control characters. A byte that is not UTF-8 could never match
    a name stored there, and failed at the database as a traceback instead."""
    if value is None:
        return None
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise click.BadParameter(f"{value[:80]!a} is not UTF-8 text", ctx, param) from None
    if any(unicodedata.category(char) == "Cc" for char in value):
        raise click.BadParameter(f"{value[:80]!a} holds a control character", ctx, param)
    return value


def checked_names(
    ctx: click.Context, param: click.Parameter, values: tuple[str, ...]
) -> tuple[str, ...]:
    """`checked_name` for an argument given several times."""
    return tuple(checked_name(ctx, param, value) or "" for value in values)


# Control characters in text from outside (an escape sequence in a plan's title, an agent's
# message, an ingested event's kind) are shown as `\x1b`, never sent to the terminal, where
# they could recolour, retitle or clear the screen.
_VISIBLE = {code: f"\\x{code:02x}" for code in (*range(0x20), *range(0x7F, 0xA0))}
# And the invisible ones that change what a reader sees: zero-width spaces and marks, and the
# bidirectional overrides that make a line read other than it is (not U+200D, which joins
# emoji).
_VISIBLE.update(
    {code: f"\\u{code:04x}" for code in (0x200B, 0x200C, 0x200E, 0x200F, *range(0x202A, 0x202F),
                                          *range(0x2060, 0x2065), *range(0x2066, 0x206A), 0xFEFF)}
)  # fmt: skip


def host_option(command: Any) -> Any:
    """`--host`, the address a server of ours listens on: loopback unless told, checked before
    anything starts (`checked_host`)."""
    return click.option(
        "--host",
        default="127.0.0.1",
        show_default=True,
        callback=lambda _ctx, _param, value: checked_host(value),
        help="Address to listen on (0.0.0.0 for every interface).",
    )(command)


def checked_host(host: str) -> str:
    """The address to bind, checked before anything starts: '' would bind every interface
    unsaid, and a name that does not resolve failed later inside the server's own log."""
    import socket

    if not host.strip():
        raise click.BadParameter("is empty; give 127.0.0.1, or 0.0.0.0 for every interface")
    try:
        socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        from agent_harness.plan.model import shown_path

        shown = shown_path(host)
        raise click.BadParameter(f"{shown[:100]!r} is no address here ({exc})") from None
    return host


def visible(text: str) -> str:
    """`text` with every control character spelt out, and bytes that are not UTF-8 as `\\xff`."""
    from agent_harness.plan.model import shown_path

    return shown_path(text.translate(_VISIBLE))


class FiniteRange(click.FloatRange):
    """click's FloatRange without NaN, which passes every bound (`nan < 0.1` is false)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


class PlanPath(click.Path):
    """A plan file's path; an empty one is refused by name (as a Path it would be '.', and the
    user would be told the current directory is no plan)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and not value.strip():
            self.fail("is empty: name a plan file", param, ctx)
        return super().convert(value, param, ctx)


def print_json(data: Any) -> None:
    text = json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n"
    try:
        sys.stdout.write(text)
    except UnicodeEncodeError:
        # A lone surrogate (a byte of a name that is not UTF-8) cannot be written as UTF-8: it
        # is written as JSON's own `\udcff` escape, so the output stays valid JSON.
        sys.stdout.write(text.encode("utf-8", "backslashreplace").decode("utf-8"))


def refuse_missing_database(url: str, hint: str) -> None:
    """A SQLite database that is not there, for a command that only reads what runs wrote: a
    one-line refusal (`hint` says what to do), never an empty database made there."""
    from agent_harness.errors import UsageError

    path = missing_sqlite_file(url)
    if path is not None and not url.startswith("-"):
        raise UsageError(f"no database at {path}: nothing has run here yet ({hint})")


def open_database(flag: str | None, *, must_exist: bool, check_protection: bool = True) -> Store:
    """Open the configured database; a read-only command never creates an empty one."""
    from agent_harness.config import database_url, load_settings
    from agent_harness.errors import UsageError
    from agent_harness.store.database import open_store
    from agent_harness.store.pglink import refuse_keyword_dsn

    if flag is not None and not flag.strip():  # `--db "$UNSET"`: not the default, by surprise
        raise UsageError("--db is empty: give a path, sqlite:///path or postgresql://...")
    url = database_url(load_settings().settings, flag)
    refuse_keyword_dsn(url)
    path = sqlite_file(url)
    if must_exist:
        refuse_missing_database(url, "pass --db URL or set AGENT_HARNESS_DB to read another")
    fresh = path is not None and not path.parent.exists()
    store = open_store(url, check_protection=check_protection)
    if fresh and path is not None:
        from agent_harness.git.ignore import keep_out_of_git

        keep_out_of_git(path.parent)  # a state folder made inside a clone: not for `git add`
    return store


def missing_sqlite_file(url: str) -> Path | None:
    """The SQLite file a database URL names, when it is not there (opening it would make it)."""
    path = sqlite_file(url)
    return path if path is not None and not path.exists() else None


def sqlite_file(url: str) -> Path | None:
    """The file a database URL names when it is SQLite (a path, or sqlite:///path)."""
    from pathlib import Path

    if "://" in url and not url.startswith("sqlite:///"):
        return None
    return Path(url.removeprefix("sqlite:///"))
