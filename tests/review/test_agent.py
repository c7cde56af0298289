"""A CLI reviewer that does not answer raises the classified error a model call would.

Scripted reviewer agents print what real CLIs printed (the lines recorded in
tests/models/cli_outputs.json) or time out, exit quietly, or answer in prose; each run goes
through a real session, as `--reviewer codex` does. None of them may become a "no".
"""

from __future__ import annotations

import json
import random
import shlex
from pathlib import Path
from typing import Any

import pytest

from agent_harness.agents.presets import preset_for
from agent_harness.models.client import ModelCallFailed
from agent_harness.models.failures import FailureKind
from agent_harness.models.parking import EndpointParked
from agent_harness.review.agent import CliReviewer
from agent_harness.review.verdict import ReviewRequest, review
from agent_harness.sessions.headless import HeadlessHost
from agent_harness.testing.agents import write_scripted_agent
from tests.shared.sessions import base_env

pytestmark = pytest.mark.integration

NOW = 1_800_000_000.0
RECORDED: list[dict[str, Any]] = json.loads(
    (Path(__file__).parents[1] / "models" / "cli_outputs.json").read_text(encoding="utf-8")
)
REQUEST = ReviewRequest("T1", "Do a thing", None, "diff --git a/x b/x\n+x\n", None)


def recorded(agent: str, starts: str) -> list[str]:
    [row] = [r for r in RECORDED if r["agent"] == agent and r["output"].startswith(starts)]
    return list(row["lines"])


def reviewer(tmp_path: Path, argv: list[str], timeout_s: float = 30.0) -> CliReviewer:
    return CliReviewer(
        HeadlessHost(tmp_path / "sessions"),
        preset_for(shlex.join(argv) + " {prompt}"),
        base_env(),
        tmp_path / "state",
        timeout_s=timeout_s,
        poll_s=0.02,
        clock=lambda: NOW,
        rng=random.Random(3),
    )


def scripted(tmp_path: Path, lines: list[str], exit_code: int) -> CliReviewer:
    steps = [{"print": lines}] if lines else []
    argv = write_scripted_agent(tmp_path / "agents", {"steps": steps, "exit": exit_code})
    return reviewer(tmp_path, argv)


def test_a_reviewer_whose_key_is_refused_fails_as_auth_not_as_a_no(tmp_path: Path) -> None:
    lines = recorded("claude", "`result` with `api_error_status: 401`")
    with pytest.raises(ModelCallFailed) as failed:
        review(scripted(tmp_path, lines, 1), REQUEST)
    assert failed.value.failure.kind is FailureKind.AUTH
    assert "Invalid API key" in failed.value.message


def test_a_rate_limited_reviewer_parks_until_its_wait_is_over(tmp_path: Path) -> None:
    lines = recorded("codex", '`turn.failed`: "exceeded')
    with pytest.raises(EndpointParked) as parked:
        review(scripted(tmp_path, lines, 1), REQUEST)
    assert NOW + 60 <= parked.value.until <= NOW + 66
    assert parked.value.failure is not None and parked.value.failure.kind is FailureKind.BURST


def test_a_reviewer_whose_provider_fails_is_a_server_failure(tmp_path: Path) -> None:
    lines = recorded("claude", "`result` 500")
    with pytest.raises(ModelCallFailed) as failed:
        review(scripted(tmp_path, lines, 1), REQUEST)
    assert failed.value.failure.kind is FailureKind.SERVER


def test_a_reviewer_that_prints_nothing_is_server_like(tmp_path: Path) -> None:
    with pytest.raises(ModelCallFailed) as failed:
        review(scripted(tmp_path, [], 0), REQUEST)
    failure = failed.value.failure
    assert (failure.kind, failure.raw_code) == (FailureKind.SERVER, "no_output")


def test_a_reviewer_that_times_out_is_server_like(tmp_path: Path) -> None:
    argv = write_scripted_agent(tmp_path / "agents", "hang")
    with pytest.raises(ModelCallFailed) as failed:
        review(reviewer(tmp_path, argv, timeout_s=0.5), REQUEST)
    failure = failed.value.failure
    assert (failure.kind, failure.raw_code) == (FailureKind.SERVER, "timeout")
    assert "still running after 0.5s" in failure.message


def test_an_answer_without_a_verdict_asks_the_reviewer_once_more(tmp_path: Path) -> None:
    # The first run answers in prose, the second with the verdict: it is the reviewer that
    # is asked again, and its answer is taken.
    mark = tmp_path / "asked-once"
    script = tmp_path / "reviewer.sh"
    script.write_text(
        "#!/bin/sh\n"
        f"if [ -e {shlex.quote(str(mark))} ]; then\n"
        '  echo \'{"approved": true, "reasons": ["fine"], "permanent": false}\'\n'
        f"else\n  : > {shlex.quote(str(mark))}\n  echo 'Looks good to me.'\nfi\n"
    )
    script.chmod(0o755)

    outcome = review(reviewer(tmp_path, [str(script)]), REQUEST)

    assert (outcome.verdict.approved, outcome.attempts, outcome.malformed) == (True, 2, False)
    assert outcome.problems == ("the answer contained no JSON object",)


def test_a_reviewer_whose_credit_is_spent_parks_until_a_person_clears_it(tmp_path: Path) -> None:
    from agent_harness.models.parking import UNTIL_CLEARED

    lines = recorded("claude", '`result` 400: "Credit balance is too low"')
    cli = scripted(tmp_path, lines, 1)
    with pytest.raises(EndpointParked) as parked:
        review(cli, REQUEST)
    assert parked.value.until == UNTIL_CLEARED and parked.value.endpoint == cli.parking_key
    assert f"agent-harness work unpark {cli.parking_key}" in parked.value.message


# A run that asks a CLI reviewer and is then SIGKILLed (as `kill -9` or the OOM killer would).
DYING_RUN = """
import sys
from pathlib import Path
from tests.review.test_agent import REQUEST, reviewer
from agent_harness.review.verdict import review
review(reviewer(Path(sys.argv[1]), sys.argv[2:], timeout_s=30.0), REQUEST)
"""


def test_a_review_its_dead_run_left_running_is_stopped_and_its_workspace_removed(
    tmp_path: Path,
) -> None:
    import os
    import subprocess
    import sys
    import time

    from agent_harness.agents.setup import own_tmp_path
    from tests.shared.sessions import wait_for

    hang = write_scripted_agent(tmp_path / "agents", "hang")
    root = Path(__file__).parents[2]
    dying = subprocess.Popen(
        [sys.executable, "-c", DYING_RUN, str(tmp_path), *hang], cwd=root, env=os.environ.copy()
    )
    host = HeadlessHost(tmp_path / "sessions")
    reviews = tmp_path / "state" / "reviews"

    def reviewing() -> bool:
        named = [p.read_text() for p in reviews.glob("review-*/session")]
        return bool(named) and host.status(named[0]).alive

    try:
        wait_for(reviewing)  # the reviewer agent has started (its record is written)
    finally:
        dying.kill()
        dying.wait()
    [left] = reviews.glob("review-*")
    session = (left / "session").read_text()
    assert host.status(session).alive  # the reviewer agent runs on, with nobody to read it
    own_tmp = own_tmp_path(left, session)
    assert (left / "workspace").is_dir() and own_tmp.is_dir()
    # Once the timeout and a minute have gone by, it cannot be a review a live run watches.
    long_ago = time.time() - 30.0 - 61.0
    os.utime(left, (long_ago, long_ago))

    script = tmp_path / "approves.sh"
    script.write_text('#!/bin/sh\necho \'{"approved": true, "reasons": ["fine"]}\'\n')
    script.chmod(0o755)
    outcome = review(reviewer(tmp_path, [str(script)]), REQUEST)

    assert outcome.verdict.approved
    assert not host.status(session).alive
    assert not (left / "workspace").exists() and not own_tmp.exists()
    assert list(left.glob("logs/*.log"))  # its record stays


def test_a_left_review_whose_session_cannot_be_named_does_not_stop_the_next(
    tmp_path: Path,
) -> None:
    import os
    import time

    left = tmp_path / "state" / "reviews" / "review-garbled"
    (left / "workspace").mkdir(parents=True)
    (left / "session").write_text("\n")  # a crash between its writes left no usable name
    long_ago = time.time() - 30.0 - 61.0
    os.utime(left, (long_ago, long_ago))
    script = tmp_path / "approves.sh"
    script.write_text('#!/bin/sh\necho \'{"approved": true, "reasons": ["fine"]}\'\n')
    script.chmod(0o755)
    assert review(reviewer(tmp_path, [str(script)]), REQUEST).verdict.approved
