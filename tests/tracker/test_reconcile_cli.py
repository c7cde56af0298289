"""The reconcile and worktrees commands, and the shipped CI workflow checked against the CLI."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from agent_harness.cli import cli, main
from agent_harness.cli.reconcile_cmd import reconcile as reconcile_command
from agent_harness.git.worktrees import WorkRepo
from agent_harness.testing.forge import READ_ONLY_TOKEN, TOKEN

from .conftest import REPO, Scene

WORKFLOW = Path(__file__).parents[2] / "examples" / "github-actions" / "reconcile.yml"


@pytest.fixture
def env(scene: Scene, monkeypatch: pytest.MonkeyPatch) -> Scene:
    monkeypatch.chdir(scene.tmp)
    monkeypatch.setenv("GH_TOKEN", TOKEN)
    monkeypatch.setenv("AGENT_HARNESS_TRACKER__WRITE_SPACING_S", "0")
    return scene


def run_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, Any]:
    code = main(list(args))
    return code, json.loads(capsys.readouterr().out)


@pytest.mark.integration
def test_reconcile_command_json_and_exit_codes(
    env: Scene, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    env.merge(env.open_pr("T1"))
    url = env.rf.server.api_url
    db = str(env.tmp / "ci.sqlite")
    args = ("reconcile", "--repo", REPO, "--github-url", url, "--db", db, "--json")
    code, dry = run_json(capsys, *args, "--dry-run")
    assert code == 0 and [t["state"] for t in dry["transitions"]] == ["merged"]
    code, done = run_json(capsys, *args)
    assert code == 0 and done["transitions"][0]["done"] == ["comment", "label"]
    # Made where none was (in CI, as meant; in the wrong folder, a surprise): said so.
    made = f"no database was at {db}, so this pass made one and read the tracker alone"
    assert [note for note in done["notes"] if note.startswith(made)] != []
    code, again = run_json(capsys, *args)
    assert code == 0 and again["transitions"] == [] and again["writes"] == 0
    assert [note for note in again["notes"] if note.startswith(made)] == []
    env.close(env.open_pr("T2"))
    monkeypatch.setenv("GH_TOKEN", READ_ONLY_TOKEN)
    code, refused = run_json(capsys, *args)
    assert code == 4 and "not updated" in refused["problems"][0]


@pytest.mark.integration
def test_reconcile_command_renders_a_table(env: Scene, capsys: pytest.CaptureFixture[str]) -> None:
    env.merge(env.open_pr("T1"))
    code = main(["reconcile", "--repo", REPO, "--github-url", env.rf.server.api_url])
    out = capsys.readouterr().out
    assert code == 0 and "T1" in out and "merged" in out and "stateless" in out


@pytest.mark.integration
def test_worktrees_command_lists_total_and_prunes(
    env: Scene, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = WorkRepo(env.clone, env.tmp / ".agent-harness")
    tree = repo.prepare("T1", "T1 work")
    (tree.path / "wip.txt").write_text("work in progress\n")
    code, listed = run_json(capsys, "worktrees", "--work", str(env.clone), "--json")
    assert code == 0
    [info] = listed["worktrees"]
    assert info["item"] == "T1" and not info["safe"] and info["state"] is None
    assert listed["total_bytes"] == info["size_bytes"] > 0
    assert main(["worktrees", "--work", str(env.clone)]) == 0
    assert "TOTAL" in capsys.readouterr().out
    code, pruned = run_json(capsys, "worktrees", "prune", "--work", str(env.clone), "--json")
    assert code == 0 and pruned["removed"] == [] and [k["item"] for k in pruned["kept"]] == ["T1"]
    assert tree.path.exists()
    # From the folder `run` ran in (the clone beside it), no --work is needed: the state's
    # worktrees name their clone. It said "--work . is not a git repository".
    code, found = run_json(capsys, "worktrees", "--json")
    assert code == 0 and [w["item"] for w in found["worktrees"]] == ["T1"]


@pytest.mark.integration
def test_worktrees_where_nothing_ran_says_so_and_writes_nothing(
    env: Scene, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Run inside the clone, where no state is: it made `.agent-harness/harness.sqlite` there,
    # added a line to the clone's info/exclude, and answered "worktrees: 0".
    exclude = env.clone / ".git" / "info" / "exclude"
    before = exclude.read_text() if exclude.exists() else None
    monkeypatch.chdir(env.clone)
    assert main(["worktrees"]) == 2
    assert "no harness state at .agent-harness: nothing has run here yet" in (
        capsys.readouterr().err
    )
    assert not (env.clone / ".agent-harness").exists()
    assert (exclude.read_text() if exclude.exists() else None) == before


@pytest.mark.unit
def test_help_explains_with_examples() -> None:
    for args in (
        ["reconcile", "--help"],
        ["worktrees", "--help"],
        ["worktrees", "prune", "--help"],
    ):
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 0 and "Examples:" in result.output


@pytest.mark.unit
def test_shipped_workflow_runs_a_real_reconcile_command_least_privilege() -> None:
    flow = yaml.safe_load(WORKFLOW.read_text())
    triggers = flow[True] if True in flow else flow["on"]  # YAML 1.1 reads `on` as a boolean
    [schedule] = triggers["schedule"]
    minute = schedule["cron"].split()[0]
    assert minute.isdigit() and int(minute) != 0
    assert "workflow_dispatch" in triggers
    assert flow["permissions"] == {
        "contents": "read",
        "issues": "write",
        "pull-requests": "read",
    }
    assert flow["concurrency"]["group"] and flow["concurrency"]["cancel-in-progress"] is False
    steps = [s for job in flow["jobs"].values() for s in job["steps"]]
    [step] = [s for s in steps if "agent-harness reconcile" in s.get("run", "")]
    assert set(step["env"]) == {"GITHUB_TOKEN", "GITHUB_API_URL"}
    words = shlex.split(step["run"])
    assert words[:2] == ["agent-harness", "reconcile"]
    known = {opt for p in reconcile_command.params for opt in p.opts}
    used = [w for w in words[2:] if w.startswith("--")]
    assert used and all(option in known for option in used), (used, known)
    # Required options are all given.
    required = {p.opts[0] for p in reconcile_command.params if p.required}
    assert required <= set(used)


@pytest.mark.integration
def test_a_merge_reconcile_records_reaches_the_audit_without_an_ingest(
    env: Scene, capsys: pytest.CaptureFixture[str]
) -> None:
    from agent_harness.audit.database import open_audit
    from agent_harness.audit.delivery import delivery
    from agent_harness.queue.items import enqueue
    from agent_harness.store.database import open_store
    from tests.shared.stores import item

    db = env.tmp / "work.sqlite"
    with open_store(str(db)) as store:
        enqueue(store, f"{REPO}:PLAN", [item("T1")])
    env.merge(env.open_pr("T1"))
    args = ["reconcile", "--repo", REPO, "--github-url", env.rf.server.api_url, "--db", str(db)]
    assert main([*args, "--json"]) == 0
    capsys.readouterr()
    # Before: `audit delivery` showed the merge only after a separate `agent-harness ingest`.
    with open_audit(str(env.tmp / "audit.sqlite")) as audit:
        assert delivery(audit).merged == 1


@pytest.mark.integration
def test_a_pull_request_merged_when_green_is_recorded_by_the_same_pass(
    env: Scene, capsys: pytest.CaptureFixture[str]
) -> None:
    # It printed "T1: PR #N merged" beside "recorded 0 transition(s)", and `work` kept the item
    # at pr_open until a later pass.
    from agent_harness.queue.items import enqueue, get_item
    from agent_harness.queue.leases import claim_next, complete
    from agent_harness.store.database import open_store
    from agent_harness.store.events import PullOpened, Reviewed
    from tests.shared.stores import item

    db = env.tmp / "work.sqlite"
    number = env.open_pr("T1")
    pull = env.repo.get_pull(number)
    env.repo.create_check_run("ci", pull.head.sha, conclusion="success")
    with open_store(str(db)) as store:  # as a run leaves it: approved, its pull request open
        enqueue(store, f"{REPO}:PLAN", [item("T1")])
        lease = claim_next(store, f"{REPO}:PLAN", "w1", 60)
        assert lease is not None
        store.append_event(f"{REPO}:PLAN", "T1", Reviewed(approved=True, sha=pull.head.sha))
        store.append_event(f"{REPO}:PLAN", "T1", PullOpened(number=number, url=pull.html_url))
        complete(store, lease)
    args = ["reconcile", "--repo", REPO, "--github-url", env.rf.server.api_url, "--db", str(db)]
    code, done = run_json(capsys, *args, "--merge-when-green", "--json")
    assert code == 0, done
    assert [(m["item"], m["merged"]) for m in done["pull_rounds"]["merged"]] == [("T1", True)]
    assert [(t["item"], t["state"]) for t in done["transitions"]] == [("T1", "merged")]
    with open_store(str(db)) as store:
        assert get_item(store, f"{REPO}:PLAN", "T1").state == "merged"
