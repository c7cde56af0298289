"""The `agent-harness` command line: a thin adapter over the library.

Subcommands live one per module in this package and are imported only when invoked, so
`agent-harness --help` stays fast. Every `HarnessError` becomes one line on stderr and its exit
code; anything else is a bug and is reported as one line too (set AGENT_HARNESS_DEBUG=1 for the
traceback).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping

import click

# name -> (module, attribute, one-line help). Listed here so `--help` needs no imports.
COMMANDS: dict[str, tuple[str, str, str]] = {
    "plan": (
        "agent_harness.cli.plan_cmd",
        "plan",
        "Parse a markdown plan; show or sync its items.",
    ),
    "config": ("agent_harness.cli.config_cmd", "config", "Show the effective configuration."),
    "inception": (
        "agent_harness.cli.inception_cmd",
        "inception",
        "Argue a paragraph into an approved scope, then write PLAN.md.",
    ),
    "work": ("agent_harness.cli.work_cmd", "work", "Show the work queue, an item's events; retry."),
    "ingest": (
        "agent_harness.cli.ingest_cmd",
        "ingest",
        "Record the work log (and JSONL files, agents' logs) in the audit database, once.",
    ),
    "audit": (
        "agent_harness.cli.audit_cmd",
        "audit",
        "Audited answers: cost, delivery, health, events, rollups, baselines; maintain.",
    ),
    "demo": ("agent_harness.cli.demo_cmd", "demo", "Run the example plan offline, end to end."),
    "run": ("agent_harness.cli.run_cmd", "run", "Work a plan's items into reviewed pull requests."),
    "control": (
        "agent_harness.cli.control_cmd",
        "control",
        "Pause, drain or resume a running run; show its workers.",
    ),
    "attach": ("agent_harness.cli.attach_cmd", "attach", "Watch or answer an item's agent."),
    "forge": (
        "agent_harness.cli.forge_cmd",
        "forge",
        "The embedded forge: serve it, merge or close by hand.",
    ),
    "reconcile": (
        "agent_harness.cli.reconcile_cmd",
        "reconcile",
        "Pull merged / closed / reverted back from the tracker.",
    ),
    "worktrees": (
        "agent_harness.cli.worktrees_cmd",
        "worktrees",
        "List item worktrees with their size; prune the finished ones.",
    ),
    "agents": (
        "agent_harness.cli.agents_cmd",
        "agents",
        "List the CLI agent presets and how each is run.",
    ),
    "classify": (
        "agent_harness.cli.classify_cmd",
        "classify",
        "Name the limit an agent's output reports (burst, window, cap, …).",
    ),
    "serve": (
        "agent_harness.cli.serve_cmd",
        "serve",
        "Serve the HTTP API: watch the fleet, or run it with --supervise.",
    ),
    "smoke": (
        "agent_harness.cli.smoke_cmd",
        "smoke",
        "Check a deployed `serve`: healthy, and able to run anything?",
    ),
    "steps": (
        "agent_harness.cli.steps_cmd",
        "steps",
        "Show a direct-API executor's saved step plan and where it got to.",
    ),
}


class LazyGroup(click.Group):
    """A click group whose subcommands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = COMMANDS.get(cmd_name)
        if entry is None:
            return None
        module = importlib.import_module(entry[0])
        command = getattr(module, entry[1])
        assert isinstance(command, click.Command)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, COMMANDS[name][2]) for name in self.list_commands(ctx)]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


@click.group(
    cls=LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    epilog="""\b
Examples:
  agent-harness demo                             # the whole loop offline, in seconds
  agent-harness plan PLAN.md                     # what items does this plan hold?
  agent-harness plan PLAN.md --repo owner/name   # mirror them to issues (--dry-run first)
  agent-harness run --repo owner/name --work ./clone --plan PLAN.md \\
      --check 'pytest -q' --agent claude --reviewer openai:gpt-4.1
  agent-harness work                             # the queue, live claims, failures
  agent-harness reconcile --repo owner/name      # merged / closed / reverted
""",
)
@click.version_option(package_name="agent-harness-fleet", prog_name="agent-harness")
def cli() -> None:
    """Turn a markdown plan into tracker issues and run coding agents on them.

    Each item is claimed through a lease, worked in its own git worktree, checked, reviewed
    by a model of another vendor and delivered as a pull request. Run a subcommand with
    --help to see what it does and an example.
    """


def _wants_json(argv: list[str] | None) -> bool:
    import sys

    args = sys.argv[1:] if argv is None else argv
    words = args[: args.index("--")] if "--" in args else args
    return "--json" in words


def _fail(message: str, code: int, as_json: bool, prefix: str = "error: ") -> int:
    """One line on stderr; with --json, one JSON object a script can read instead. Credentials
    in it are masked: a provider's error may quote part of the key it was given."""
    from agent_harness.secrets.redact import redact

    message = redact(message)
    if as_json:
        import json

        click.echo(json.dumps({"error": message, "exit": code}), err=True)
    else:
        click.echo(prefix + message, err=True)
    return code


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the CLI and map every error to one line and an exit code."""
    from agent_harness.errors import HarnessError
    from agent_harness.git.runner import LOCAL_REPO_ENV
    from agent_harness.secrets.process import process_env

    # Started from a git hook or `git bisect run`: GIT_DIR and its like would point every git
    # the harness, its checks and its agents run at that repository, whatever --work says.
    for name in LOCAL_REPO_ENV:
        os.environ.pop(name, None)
    as_json = _wants_json(argv)
    try:
        result = cli.main(args=argv, prog_name="agent-harness", standalone_mode=False)
    except HarnessError as exc:
        return _fail(exc.message, exc.exit_code, as_json)
    except click.exceptions.Abort as exc:  # click's word for Ctrl-C (or a plain `kill`) too
        said = "interrupted" if isinstance(exc.__context__, KeyboardInterrupt) else "aborted"
        return _fail(said, 130, as_json, prefix="")
    except click.ClickException as exc:
        if as_json:
            return _fail(exc.format_message(), exc.exit_code, True)
        exc.show()
        return exc.exit_code
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except KeyboardInterrupt:
        return _fail("interrupted", 130, as_json, prefix="")
    except BrokenPipeError:
        return 141
    except OSError as exc:
        if isinstance(exc.filename, str | bytes) and not _debugging(process_env()):
            return _fail(_os_error(exc), 1, as_json)
        return _bug(exc, as_json, process_env())
    except Exception as exc:
        return _bug(exc, as_json, process_env())
    return result if isinstance(result, int) else 0


def _debugging(env: Mapping[str, str]) -> bool:
    return env.get("AGENT_HARNESS_DEBUG", "").strip().lower() not in ("", "0", "false", "no")


def _os_error(exc: OSError) -> str:
    """A file the machine would not let us use (a name too long, no room, no permission):
    the user's to fix, said as the file and the reason, not as a bug."""
    from agent_harness.plan.model import shown_path

    names = [name for name in (exc.filename, exc.filename2) if isinstance(name, str | bytes)]
    shown = " -> ".join(shown_path(os.fsdecode(name))[:200] for name in names)
    return f"{shown}: {exc.strerror or exc}"


def _bug(exc: BaseException, as_json: bool, env: Mapping[str, str]) -> int:
    """A traceback reaching the user is a bug: say so in one line, unless debugging."""
    if _debugging(env):
        raise exc
    message = (
        f"{type(exc).__name__}: {exc} "
        "(this is a bug; rerun with AGENT_HARNESS_DEBUG=1 for the traceback)"
    )
    return _fail(message, 70, as_json, prefix="internal error: ")
