"""What the demo prints at its end: where its pull requests can be browsed again."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console

from agent_harness.cli.demo_view import render_demo
from agent_harness.demo.run import DemoReport
from agent_harness.pipeline.report import RunReport

pytestmark = pytest.mark.unit


def test_the_demo_says_how_to_serve_its_pages_again_and_where_they_are(tmp_path: Path) -> None:
    data = tmp_path / "forge"
    data.mkdir()
    (data / "address").write_text("http://127.0.0.1:24680\n")  # recorded by the local forge
    out = Console(width=300, record=True)

    render_demo(out, DemoReport(workdir=tmp_path), seconds=1.0)

    text = out.export_text()
    assert (
        f"Browse the pull requests again: agent-harness forge serve --data {data} "
        f"(then open http://127.0.0.1:24680/_html/demo/tally)"
    ) in text
    assert "FORGE_TOKEN" not in text  # the served forge finds the token in its data itself


def test_a_hint_that_shows_a_command_is_never_broken_at_the_terminal_width(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from agent_harness.cli.output import console

    monkeypatch.setenv("COLUMNS", "50")  # a narrow terminal; every hint below is longer
    render_demo(console(), DemoReport(workdir=tmp_path / "a-rather-long-work-directory"), 1.0)
    lines = capsys.readouterr().out.splitlines()
    data = tmp_path / "a-rather-long-work-directory" / "forge"
    assert any(f"agent-harness forge serve --data {data}" in line for line in lines), lines
    history = f"agent-harness work show T2 --db {data.parent / 'harness.sqlite'}"
    assert any(line.endswith(history) for line in lines), lines


def test_the_events_the_demo_says_it_recorded_are_those_of_every_pass(tmp_path: Path) -> None:
    # Six passes of `run` recorded 150 events; the summary said "1 events recorded", the last
    # pass's alone.
    passes = [RunReport(project="demo/tally:PLAN", sync=None, events=n) for n in (90, 59, 1)]
    out = Console(width=300, record=True)
    render_demo(out, DemoReport(workdir=tmp_path, passes=passes), seconds=1.0)
    assert "; 150 events recorded;" in out.export_text()
