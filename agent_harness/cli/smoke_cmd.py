"""`agent-harness smoke URL`: after a deploy, tell "healthy" from "able to run anything"."""

from __future__ import annotations

import click

from agent_harness.cli.output import console, print_json


@click.command(
    epilog="""\b
Exit codes: 0 healthy and able to run; 1 healthy, not able to run; 2 not healthy.

\b
Examples:
  HARNESS_TOKEN=... agent-harness smoke http://127.0.0.1:8765
  agent-harness smoke https://host.example/harness --json
"""
)
@click.argument("url")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def smoke(url: str, as_json: bool) -> int:
    """Check a running `agent-harness serve` without changing anything (GETs, plan parses and
    dry-run syncs only), with the token in HARNESS_TOKEN."""
    from agent_harness.api.smoke import smoke as run_smoke
    from agent_harness.secrets.process import process_env

    report = run_smoke(url, process_env().get("HARNESS_TOKEN", ""))
    if as_json:
        print_json(report.as_json())
    else:
        out = console()
        for check in report.checks:
            mark = "ok  " if check.ok else "FAIL"
            out.print(f"{mark} {check.name}: {check.detail}", markup=False, soft_wrap=True)
        verdict = (
            "able to run" if report.able_to_run else "healthy, NOT able to run"
            if report.healthy else "NOT healthy"
        )  # fmt: skip
        out.print(f"{report.url}: {verdict}", markup=False)
    return 0 if report.able_to_run else 1 if report.healthy else 2
