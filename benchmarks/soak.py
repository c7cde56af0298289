"""A standing soak: the real pipeline, several projects in one fleet, faults and kills at random.

Each cycle seeds a repository on the embedded forge, writes a few plans (one project each) whose
items are done by scripted agents that succeed, crash, change nothing, hang (leaving a child that
hangs too) or wait for input, and runs `agent-harness run --plan A --plan B ... --workers N`
against it as a subprocess, with short agent timeout and idle settings. Before every pass the
forge is told to answer some requests badly (5xx, a dropped connection, a write applied but its
answer dropped, a secondary rate limit with retry-after); some passes are SIGKILLed at a random
moment after their first request, and `run` is started again until a pass ends cleanly with
every item terminal. In every cycle, too: the first pass is two `run` processes of one plan on
one database (two state dirs and clones); one pass has its token start answering 401 partway;
odd cycles host agents in tmux and SIGKILL the tmux server at random moments. Canary secrets are
planted in the environment `run` is started with. Once per soak, scripted model providers with
bursts, windows and caps answer the harness's ModelClient over virtual days
(soak_providers.py).

At the end the invariants are counted and printed, one figure a line, and the exit code says
whether they all hold. `--minutes` only decides how many cycles to start; the one figure read
from time is the stall figure, from the event log's timestamps.

    .venv/bin/python benchmarks/soak.py --short            # CI: one cycle, a few kills
    .venv/bin/python benchmarks/soak.py --minutes 5        # cycles until 5 minutes have passed
    .venv/bin/python benchmarks/soak.py --short --seed 7   # the same choices again

Shared pieces (kills, reporting, secret-shaped tokens, marker counting) come from
reliability.py beside it.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import random
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from reliability import (
    EXAMPLES,
    Figure,
    after_requests,
    base_env,
    final_report,
    forge_noise,
    git,
    harness,
    kill_when,
    last_event,
    marked_issues,
    private_tmux,
    pull_item,
    show,
    tally,
    token_like,
    twins,
)
from soak_providers import ProviderSoak, soak_providers

from agent_harness.demo.rules import review_rules
from agent_harness.demo.run import seed_repository
from agent_harness.forge import FaultKind, Forge, ForgeServer
from agent_harness.queue.items import ItemState, list_items
from agent_harness.sessions.tmux import STOP_DEADLINE_S
from agent_harness.store.database import open_store
from agent_harness.testing.agents import write_scripted_agent
from agent_harness.testing.forge import RunningForge, make_client
from agent_harness.testing.model_server import ModelServer, ScriptedResponder

OWNER = "soak"
# States an item may rest in when a pass has ended cleanly (the run stops at pr_open: merging
# is a person's move, and the soak makes none, so the default branch must never move).
TERMINAL = {ItemState.PR_OPEN, ItemState.MERGED, ItemState.CLOSED, ItemState.FAILED,
            ItemState.SKIPPED, ItemState.DONE}  # fmt: skip
# What a scripted agent does for an item, by the item's kind: "hang" never exits (and leaves a
# child that never exits either), "ask" prints a question and blocks reading its answer.
KINDS = ("succeed", "crash", "nothing", "hang", "ask")
WEIGHTS = (6, 2, 2, 1, 1)
STUCK = ("hang", "ask")  # every cycle has one of each
# Seconds an agent session may take before the run ends it: scripted agents that work are done
# in well under a second, so a stuck one costs a worker this long per attempt.
AGENT_TIMEOUT_S = 4
AGENT_IDLE_S = 1
NOTHING: dict[str, Any] = {"steps": [{"print": "looked, found nothing to change"}], "exit": 0}
MAX_PASSES = 12
# A free worker takes a claimable item within its idle poll (0.2 s) and one claim; 5 s is
# that with room for a loaded 2-core machine, and well under any backoff a failure causes.
STALL_LIMIT_S = 5.0
TMUX_KILL_P = 0.6  # the share of a tmux cycle's passes whose tmux server is SIGKILLed
REVOKED_STOP_S = 90  # a run whose token was revoked must have stopped by then
TWIN_ITEMS = 3  # items of the plan two `run` processes start on together

# The agent each item is given: find the item's id in the prompt, dump the environment it was
# given where the soak can look for canaries, then run the scripted behaviour of its kind.
DISPATCH = """\
import json, os, pathlib, re, sys
here = pathlib.Path(__file__).parent
prompt = pathlib.Path(sys.argv[1]).read_text()
item = re.search(r"# Work item (\\S+):", prompt).group(1)
(here / "env").mkdir(exist_ok=True)
(here / "env" / f"{item}-{os.getpid()}.json").write_text(json.dumps(dict(os.environ)))
argv = json.loads((here / "kinds.json").read_text())[item]
if argv == "hang":
    import subprocess, time
    subprocess.Popen([sys.executable, str(here / "stuck.py"), item])  # outlives a careless kill
    print("thinking...", flush=True)
    while True:
        time.sleep(60)
if argv == "ask":
    print("Overwrite notes? [y/N] ", end="", flush=True)
    answer = sys.stdin.readline()
    print(f"got {answer!r}, giving up", flush=True)
    sys.exit(3)
if argv is None:
    pathlib.Path(f"notes/{item.lower()}.txt").parent.mkdir(exist_ok=True)
    pathlib.Path(f"notes/{item.lower()}.txt").write_text(item + "\\n")
    sys.exit(0)
os.execv(argv[0], argv)
"""
# The child a hanging agent leaves behind: it never ends by itself either.
STUCK_CHILD = "import time\nwhile True:\n    time.sleep(60)\n"


@dataclass
class Soak:
    """What the soak did and what it counted, over all cycles."""

    cycles: int = 0
    items: collections.Counter[str] = field(default_factory=collections.Counter)  # by kind
    states: collections.Counter[str] = field(default_factory=collections.Counter)
    outcomes: collections.Counter[str] = field(default_factory=collections.Counter)  # kind->state
    faults: collections.Counter[str] = field(default_factory=collections.Counter)  # met
    slowest: tuple[float, str] = (0.0, "")  # a pass's seconds, for the reader only
    rules: list[tuple[Any, int]] = field(default_factory=list)  # (rule, count it was given)
    requests: collections.Counter[str] = field(default_factory=collections.Counter)
    passes: int = 0
    kills: int = 0
    killed_after: collections.Counter[str] = field(default_factory=collections.Counter)
    duplicate_issues: int = 0
    unmarked_issues: int = 0
    duplicate_prs: int = 0
    main_writes: int = 0
    unsettled: list[str] = field(default_factory=list)
    inconsistent: list[str] = field(default_factory=list)
    crashes: list[str] = field(default_factory=list)  # attempts ended by an unclassified error
    orphans: list[str] = field(default_factory=list)
    leaks: list[str] = field(default_factory=list)
    noise: list[str] = field(default_factory=list)
    # agents that hung or waited for input
    stuck_timeouts: int = 0  # sessions the run ended at its agent timeout
    asked: int = 0  # agents waiting at a question that the run said were waiting for input
    stuck_wrong: list[str] = field(default_factory=list)
    sessions_left: list[str] = field(default_factory=list)
    # the token revoked partway through a pass, then fixed
    revocations: int = 0
    revoke_missed: int = 0  # the pass ended before the moment came: tried again later
    unauthorized: list[int] = field(default_factory=list)  # 401 answers per revocation
    revoke_wrong: list[str] = field(default_factory=list)
    revoke_messages: collections.Counter[str] = field(default_factory=collections.Counter)
    tmux_kills: collections.Counter[str] = field(default_factory=collections.Counter)
    hosts: collections.Counter[str] = field(default_factory=collections.Counter)  # cycles
    # two `run` processes on one database at once (other state dir and clone, same plans)
    twin_passes: int = 0
    twin_exits: collections.Counter[str] = field(default_factory=collections.Counter)
    twin_items: list[list[int]] = field(default_factory=list)  # items each host claimed
    double_claims: list[str] = field(default_factory=list)
    # stalls: work claimable and a worker free, from a pass's first claim to its end
    windows: list[tuple[float, float, str]] = field(default_factory=list)  # this cycle's passes
    stalls: list[tuple[float, str]] = field(default_factory=list)


@dataclass
class Rig:
    root: Path
    rf: RunningForge
    model_url: str
    secrets: dict[str, str]  # name -> planted value
    rng: random.Random
    args: argparse.Namespace
    statuses: collections.Counter[int] = field(default_factory=collections.Counter)
    succeeding: set[str] = field(default_factory=set)  # items whose agent succeeds, this cycle
    host: str = "headless"  # the session host of this cycle's runs
    tmux_kills_before: int = 0  # SIGKILLs of the tmux server before this cycle


def start_rig(root: Path, rng: random.Random, args: argparse.Namespace) -> tuple[Rig, Forge, Any]:
    planted = {
        "GH_TOKEN": token_like("ghp_", 36),
        "OPENAI_API_KEY": token_like("sk-proj-", 40),
        "ANTHROPIC_API_KEY": token_like("sk-ant-api03-", 40),
        "SOAK_DB_PASSWORD": token_like("canary-", 24),
        "RELEASE_NOTES": token_like("ghp_", 36),  # a token under a harmless name
    }
    forge = Forge(root / "forge", token=planted["GH_TOKEN"])
    server = ForgeServer(forge, host="127.0.0.1", port=0)
    server.__enter__()
    rf = RunningForge(forge, server, make_client(server.api_url, planted["GH_TOKEN"]))
    rig = Rig(root, rf, "", planted, rng, args)
    (root / "tmp").mkdir(exist_ok=True)  # the runs' TMPDIR (`run_env`)
    lock = threading.Lock()

    def count_status(_method: str, _template: str | None, status: int, _body: Any) -> None:
        with lock:
            rig.statuses[status] += 1

    forge.observers.append(count_status)
    return rig, forge, server


# -- one cycle -------------------------------------------------------------------------------


def write_plans(rig: Rig, cwd: Path, cycle: int, soak: Soak) -> tuple[list[str], dict[str, Any]]:
    """Plans P1..Pn for this cycle and T, the plan two processes run at once; and each item's
    agent argv (None: write a note)."""
    agents = rig.root / "agents"
    kinds: dict[str, Any] = {}
    names = []
    total = rig.args.projects * rig.args.items
    # --short: exactly one agent of each stuck kind (each costs a worker two timeouts).
    kinds_drawn = len(KINDS) - (len(STUCK) if rig.args.short else 0)
    drawn = rig.rng.choices(KINDS[:kinds_drawn], weights=WEIGHTS[:kinds_drawn], k=total)
    for kind, at in zip(STUCK, rig.rng.sample(range(total), len(STUCK)), strict=True):
        drawn[at] = kind
    drawn += rig.rng.choices(KINDS[:3], weights=WEIGHTS[:3], k=TWIN_ITEMS)
    for p in [*range(1, rig.args.projects + 1), 0]:
        lines = []
        for n in range(1, (rig.args.items if p else TWIN_ITEMS) + 1):
            item = f"C{cycle}P{p}N{n}" if p else f"C{cycle}T{n}"
            kind = drawn[(p - 1) * rig.args.items + n - 1 if p else total + n - 1]
            soak.items[kind] += 1
            lines.append(f"### {item}: Note {item} ({kind})\n\nWrite notes/{item.lower()}.txt.\n")
            kinds[item] = {
                "succeed": None,
                "crash": write_scripted_agent(agents, "crash"),
                "nothing": write_scripted_agent(agents, NOTHING),
                "hang": "hang",
                "ask": "ask",
            }[kind]
        name = f"P{p}.md" if p else "T.md"
        (cwd / name).write_text("\n".join(lines))
        names.append(name)
    return names, kinds


def set_faults(rig: Rig) -> list[tuple[Any, int]]:
    """A few fault rules for the next pass, chosen at random, each with the count it was given
    (the forge counts a rule down as requests meet it)."""
    forge = rig.rf.forge
    rules = []
    for _ in range(rig.rng.randint(1, rig.args.faults)):
        kind = rig.rng.choice(
            ["status", "drop", "drop_after", "secondary_rate_limit", "secondary_rate_limit_429"]
        )
        if kind == "drop_after":  # a write that lands while its answer is lost
            method, path = "POST", rig.rng.choice(["*/issues", "*/pulls"])
        else:
            method, path = rig.rng.choice(
                [("*", "*"), ("GET", "*/issues"), ("POST", "*/issues"), ("GET", "/search/*"),
                 ("POST", "*/pulls"), ("GET", "*/pulls"), ("GET", "/repos/*/*")]
            )  # fmt: skip
        count = rig.rng.randint(1, 2 if rig.args.faults > 2 else 1)
        options: dict[str, Any] = {}
        if kind == "status":
            options["status"] = rig.rng.choice([500, 502, 503])
        if kind.startswith("secondary"):
            options["retry_after"] = 1
        rules.append((forge.faults.inject(FaultKind(kind), method, path, count=count, **options),
                      count))  # fmt: skip
    return rules


def run_env(rig: Rig) -> dict[str, str]:
    return base_env(
        GITHUB_API_URL=rig.rf.server.api_url,
        OPENAI_BASE_URL=f"{rig.model_url}/v1",
        AGENT_HARNESS_SESSIONS__HOST=rig.host,
        TMUX_TMPDIR=str(rig.root / "tmux"),  # a tmux server of the soak's own
        TMPDIR=str(rig.root / "tmp"),  # where the agents' own folders go, and are counted
        # Loopback answers in milliseconds: a create whose answer was dropped is looked for
        # after this timeout (3 looks) instead of GitHub's 30 s.
        AGENT_HARNESS_TRACKER__REQUEST_TIMEOUT_S="2",
        # An agent silent this long is looked at: one at a question is said to wait for input.
        AGENT_HARNESS_BUDGETS__AGENT_IDLE_S=str(AGENT_IDLE_S),
        **rig.secrets,
    )


def one_pass(rig: Rig, argv: list[str], cwd: Path, out: Path, kill: bool, soak: Soak) -> bool:
    """One `run`; SIGKILLed at a random moment after its first request when `kill`. True when
    it was killed."""
    soak.rules += set_faults(rig)
    moment = after_requests(rig.rf, "", rig.rf.forge.mark(), 1, rig.rng.uniform(0, 2.5))
    # A tmux cycle's passes kill its server until one kill has landed, then now and then.
    landed = sum(soak.tmux_kills.values()) > rig.tmux_kills_before
    again = not rig.args.short and rig.rng.random() < TMUX_KILL_P  # --short: one kill
    tmux = rig.host == "tmux" and (not landed or again)
    server_moment = after_requests(rig.rf, "", rig.rf.forge.mark(), 1, rig.rng.uniform(0.3, 3))
    with (
        open(out, "w") as sink,
        open(out.with_suffix(".err"), "w") as errors,
        tmux_killer(rig, server_moment, soak) if tmux else contextlib.nullcontext(),
    ):
        proc = subprocess.Popen(argv, cwd=cwd, env=run_env(rig), stdout=sink, stderr=errors)
        killed = kill_when(proc, moment) if kill else proc.wait(timeout=600) == -signal.SIGKILL
    return killed


def tmux_command(rig: Rig, *args: str) -> subprocess.CompletedProcess[str]:
    env = base_env(TMUX_TMPDIR=str(rig.root / "tmux"))
    return subprocess.run(["tmux", "-L", "agent-harness", *args], env=env, capture_output=True,
                          text=True, check=False)  # fmt: skip


@contextlib.contextmanager
def tmux_killer(rig: Rig, moment: Callable[[], bool], soak: Soak) -> Iterator[None]:
    """SIGKILL the tmux server the agents' sessions live in, once, at `moment` (or as soon
    after it as there is a server), while the pass goes on."""
    (rig.root / "tmux").mkdir(exist_ok=True)
    done = threading.Event()

    def kill() -> None:
        while not done.wait(0.01):
            if not moment():
                continue
            pid = tmux_command(rig, "display-message", "-p", "#{pid}").stdout.strip()
            if pid.isdigit():
                sessions = len(tmux_command(rig, "list-sessions").stdout.splitlines())
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)
                    soak.tmux_kills[f"with {sessions} sessions"] += 1
                return

    thread = threading.Thread(target=kill, name="tmux killer")
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


def twin_pass(
    rig: Rig, argvs: tuple[list[str], list[str]], cwds: tuple[Path, Path], out: Path, soak: Soak
) -> None:
    """Two `run` processes of the same plans started together on one SQLite database, each
    from its own state dir and clone (two hosts): they race the plan's sync to issues and
    share the queue."""
    soak.rules += set_faults(rig)
    db = str(cwds[0] / ".agent-harness" / "harness.sqlite")
    procs = []
    with contextlib.ExitStack() as files:
        for n, (argv, cwd) in enumerate(zip(argvs, cwds, strict=True)):
            sink = files.enter_context(open(out.with_suffix(f".{n}.jsonl"), "w"))
            errors = files.enter_context(open(out.with_suffix(f".{n}.err"), "w"))
            env = run_env(rig) | {"AGENT_HARNESS_STORE__DB": db}
            procs.append(subprocess.Popen(argv, cwd=cwd, env=env, stdout=sink, stderr=errors))
        codes = [proc.wait(timeout=600) for proc in procs]
    soak.twin_passes += 1
    soak.twin_exits[" and ".join(f"exit {c}" for c in codes)] += 1


def revoked_pass(rig: Rig, argv: list[str], cwd: Path, out: Path, soak: Soak) -> bool:
    """One `run` whose token starts answering 401 at a random moment after its first request
    (the forge's bad_credentials fault on every request), until the pass has ended and the
    token is "fixed" (the rule cleared). True when the revocation landed while `run` was going.
    The run must stop by itself, soon, saying why in one line, and fail no item for it."""
    soak.rules += set_faults(rig)
    forge = rig.rf.forge
    moment = after_requests(rig.rf, "", forge.mark(), 1, rig.rng.uniform(0.2, 2.5))
    seen = last_event_id(cwd)
    err = out.with_suffix(".err")
    with open(out, "w") as sink, open(err, "w") as errors:
        proc = subprocess.Popen(argv, cwd=cwd, env=run_env(rig), stdout=sink, stderr=errors)
        while proc.poll() is None and not moment():
            time.sleep(0.002)
        if proc.poll() is not None:
            soak.revoke_missed += 1
            return False
        before = rig.statuses[401]
        forge.faults.inject(FaultKind.BAD_CREDENTIALS, count=None)
        try:
            code = proc.wait(timeout=REVOKED_STOP_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
            soak.revoke_wrong.append(f"{cwd.parent.name}: `run` still going {REVOKED_STOP_S} s "
                                     "after its token was revoked; killed")  # fmt: skip
    forge.faults.clear()  # the token is fixed; the other rules were this pass's alone
    if rig.statuses[401] == before:  # it was ending, with no request left to make
        soak.revoke_missed += 1
        return False
    soak.revocations += 1
    soak.unauthorized.append(rig.statuses[401] - before)
    lines = [x for x in err.read_text().splitlines() if x.strip()]
    said = [x for x in lines if "credential" in x.lower()]
    if code == 0 or len(said) != 1 or any("Traceback" in x for x in lines):
        soak.revoke_wrong.append(f"{cwd.parent.name}: exit {code}, stderr {lines[-4:]}")
    soak.revoke_messages[f"exit {code}: {said[0][:110] if said else '(nothing said)'}"] += 1
    soak.revoke_wrong += wrongly_failed(cwd, seen, rig.succeeding)
    return True


def last_event_id(cwd: Path) -> int:
    db = cwd / ".agent-harness" / "harness.sqlite"
    if not db.exists():
        return 0
    store = open_store(str(db))
    try:
        events = store.all_events()
    finally:
        store.close()
    return events[-1].id if events else 0


def wrongly_failed(cwd: Path, after: int, succeeding: set[str]) -> list[str]:
    """Attempts failed after event `after` for the revoked token, or of items whose agent
    succeeds (nothing else fails them)."""
    store = open_store(str(cwd / ".agent-harness" / "harness.sqlite"))
    try:
        events = [e for e in store.all_events() if e.id > after]
    finally:
        store.close()
    wrong = []
    for event in events:
        if event.kind not in ("attempt_failed", "failed"):
            continue
        reason = str(event.payload.as_dict().get("reason") or "")
        if "credential" in reason.lower() or event.item in succeeding:
            wrong.append(f"{event.item} {event.kind} after the revocation: {reason[:120]}")
    return wrong


def one_cycle(rig: Rig, cycle: int, soak: Soak) -> None:
    # Odd cycles keep their agents in tmux sessions (when tmux is installed), even ones headless.
    rig.host = "tmux" if cycle % 2 and shutil.which("tmux") else "headless"
    soak.hosts[rig.host] += 1
    rig.tmux_kills_before = sum(soak.tmux_kills.values())
    name = f"fleet{cycle}"
    repo_name = f"{OWNER}/{name}"
    rig.rf.forge.create_repo(OWNER, name, auto_init=False)
    base = rig.root / f"c{cycle}"
    work = base / "clone" / "work"
    work.parent.mkdir(parents=True)
    seed_repository(EXAMPLES / "project", rig.rf.forge.clone_url(OWNER, name), work)
    bare = rig.rf.forge.repo_path(OWNER, name)
    seed = git("--git-dir", str(bare), "rev-parse", "refs/heads/main")
    cwd = base / "run"
    cwd.mkdir()
    plans, kinds = write_plans(rig, cwd, cycle, soak)
    # A second host: its own clone and state dir, the same plans, the first one's database.
    work2, cwd2 = base / "clone" / "work2", base / "run2"
    git("clone", "-q", rig.rf.forge.clone_url(OWNER, name), str(work2))
    cwd2.mkdir()
    (cwd2 / "T.md").write_text((cwd / "T.md").read_text())
    rig.succeeding = {item for item, argv in kinds.items() if argv is None}
    agents = rig.root / "agents"
    (agents / "kinds.json").write_text(json.dumps(kinds))
    (agents / "dispatch.py").write_text(DISPATCH)
    (agents / "stuck.py").write_text(STUCK_CHILD)
    agent = shlex.join([sys.executable, str(agents / "dispatch.py")])

    def run_argv(clone: Path, names: list[str]) -> list[str]:
        return harness(
            "run", "--repo", repo_name, "--work", str(clone),
            *[x for plan in names for x in ("--plan", plan)],
            "--agent", agent + " {prompt_file}", "--reviewer", "openai:gpt-test",
            "--check", CHECK,
            "--workers", str(rig.args.workers), "--max-workers", str(rig.args.workers),
            "--max-attempts", "2", "--agent-timeout", str(AGENT_TIMEOUT_S), "--json",
        )  # fmt: skip

    argv = run_argv(work, plans[:-1])
    # The twins run T alone, from the start: its sync is the race, and P1..Pn are left whole
    # for the passes below.
    twins_argv = (run_argv(work, ["T.md"]), run_argv(work2, ["T.md"]))
    kills_owed = rig.args.kills
    revoke_owed = 1
    finished = None
    soak.windows = []
    for number in range(1, MAX_PASSES + 1):
        out = base / f"pass{number}.jsonl"
        if number == 1:  # the first pass, where both sync the plan to issues at once
            began = time.time()
            twin_pass(rig, twins_argv, (cwd, cwd2), out, soak)
            soak.windows.append((began, time.time(), "twin"))
            soak.passes += 1
            continue
        # Kills and the revoked token go in the first half of the passes, so a cycle always has
        # passes left to finish in even when a pass ends before its kill's moment came.
        early = number <= MAX_PASSES // 2
        kill = kills_owed > 0 and early and rig.rng.random() < 0.75
        revoke = not kill and revoke_owed > 0 and early
        soak.passes += 1
        began, wall = time.monotonic(), time.time()
        if revoke:
            revoke_owed -= revoked_pass(rig, argv, cwd, out, soak)
            killed = False
        else:
            killed = one_pass(rig, argv, cwd, out, kill, soak)
        soak.slowest = max(soak.slowest, (time.monotonic() - began, f"cycle {cycle} pass {number}"))
        soak.windows.append((wall, time.time(), "revoked" if revoke else f"pass {number}"))
        if revoke:
            continue  # a revoked pass stops early; one that ended first proves nothing either
        if killed:
            kills_owed -= 1
            soak.kills += 1
            soak.killed_after[last_event(cwd)] += 1
            continue
        report = final_report(out)
        if report is not None and ((kills_owed <= 0 and revoke_owed <= 0) or not early):
            finished = report
            break
    if finished is None:
        soak.unsettled.append(f"cycle {cycle}: no clean final pass within {MAX_PASSES} passes")
    count_cycle(rig, soak, repo_name, bare, seed, work, cwd, plans)
    soak.orphans += orphan_worktrees(work2, cwd2)
    soak.sessions_left += sessions_left(cwd2)


# -- counting --------------------------------------------------------------------------------


def count_cycle(
    rig: Rig, soak: Soak, repo_name: str, bare: Path, seed: str, work: Path, cwd: Path,
    plans: list[str],
) -> None:  # fmt: skip
    per_item, unmarked = marked_issues(rig.rf, repo_name)
    soak.duplicate_issues += twins(per_item)
    soak.unmarked_issues += unmarked
    pulls = list(rig.rf.github.get_repo(repo_name).get_pulls(state="all"))
    soak.duplicate_prs += twins(collections.Counter(map(pull_item, pulls)))
    soak.main_writes += int(git("--git-dir", str(bare), "rev-list", "--count", f"{seed}..main"))
    with_pr = {pull_item(p) for p in pulls}
    store = open_store(str(cwd / ".agent-harness" / "harness.sqlite"))
    try:
        events = store.all_events()
        soak.double_claims += double_claims(events)
        hosts: dict[str, set[str]] = collections.defaultdict(set)
        for event in events:
            if event.kind == "claimed" and event.project.endswith(":T"):
                hosts[str(event.payload.as_dict().get("worker")).split("/")[0]].add(str(event.item))
        soak.twin_items.append(sorted((len(x) for x in hosts.values()), reverse=True))
        soak.stalls += stalls(events, soak.windows, rig.args.workers, cwd.parent.name)
        for plan in plans:
            project = f"{repo_name}:{Path(plan).stem}"
            for record in list_items(store, project):
                soak.states[record.state.value] += 1
                kind = record.title.rsplit("(", 1)[-1].rstrip(")")
                soak.outcomes[f"{kind} -> {record.state.value}"] += 1
                count_item(store, soak, project, record, with_pr)
    finally:
        store.close()
    soak.orphans += orphan_worktrees(work, cwd)
    soak.sessions_left += sessions_left(cwd)
    if rig.host == "tmux":
        listed = tmux_command(rig, "list-sessions", "-F", "#{session_name}").stdout.split()
        soak.sessions_left += [f"tmux session {name} still there" for name in listed]


def count_item(store: Any, soak: Soak, project: str, record: Any, with_pr: set[str]) -> None:
    live = record.lease_expires is not None and record.lease_expires >= time.time()
    if record.state not in TERMINAL and not live:
        soak.unsettled.append(f"{project} {record.id} {record.state.value} with no live lease")
    events = store.all_events(project=project, item=record.id)
    moves = [m for m in (e.payload.as_dict().get("to") for e in events) if m]
    for event in events:
        why = str(event.payload.as_dict().get("reason") or "")
        if event.kind == "attempt_failed" and UNCLASSIFIED.match(why):
            soak.crashes.append(f"{project} {record.id}: {why[:120]}")
    if not moves or moves[-1] != record.state.value:
        soak.inconsistent.append(
            f"{project} {record.id}: state {record.state.value}, events end at "
            f"{moves[-1] if moves else 'nothing'}"
        )
    if record.title.endswith(tuple(f"({k})" for k in STUCK)):
        count_stuck(soak, project, record, events)
    if (record.state == ItemState.PR_OPEN) != (record.id in with_pr):
        soak.inconsistent.append(
            f"{project} {record.id}: state {record.state.value}, pull request on the forge: "
            + ("yes" if record.id in with_pr else "no")
        )


def count_stuck(soak: Soak, project: str, record: Any, events: list[Any]) -> None:
    """An agent that hung or waited for input: every attempt ended at the agent timeout (or
    with the `run` watching it killed), and the item failed for it once its attempts were
    spent. (A run killed under it, or its tmux server killed, may end one attempt early: its
    session ended without an exit status, `crashed`; or it went with the tmux server while no
    run watched, and the next run recorded it `lost`.)"""
    ends = [e.payload.as_dict() for e in events if e.kind == "agent_finished"]
    soak.stuck_timeouts += sum(1 for end in ends if end.get("state") == "timeout")
    # A session whose tmux server was SIGKILLed ends without an exit status: crashed.
    early = ("timeout", "crashed", "lost")
    other = [end.get("state") for end in ends if end.get("state") not in early]
    failed = [e.payload.as_dict() for e in events if e.kind == "failed"]
    why = str(failed[-1].get("reason")) if failed else ""
    timed_out = any(end.get("state") == "timeout" for end in ends)
    said = [e for e in events if e.kind == "agent_state"
            and e.payload.as_dict().get("state") == "waiting_for_input"]  # fmt: skip
    soak.asked += bool(said) and record.title.endswith("(ask)")
    if record.state != ItemState.FAILED or not timed_out or other:
        soak.stuck_wrong.append(
            f"{project} {record.id} ({record.title.rsplit('(', 1)[-1]}: {record.state.value}, "
            f"agent runs ended {[end.get('state') for end in ends]}, {why[:90]!r}"
        )


def sessions_left(cwd: Path) -> list[str]:
    """Session records the headless host still holds once every item is terminal: a session
    nobody ended."""
    state = cwd / ".agent-harness"
    left = [f"session {p.stem} still recorded" for p in (state / "sessions").glob("*.json")]
    # Each agent run's own TMPDIR goes with its session: one left behind is disk a week fills.
    machine = cwd.parent.parent / "tmp"  # the TMPDIR the soak gives its runs (`run_env`)
    folders = [*machine.glob("agent-harness-*/*"), *state.glob("**/tmp/*")]
    return left + [f"agent temporary folder {p} left" for p in folders]


HELD = {"claimed", "checks", "review"}
# An attempt that ended in a handler's crash, or in a session error (a session gone under the
# watch), ended by an error nobody classified: under these faults every end has a class.
UNCLASSIFIED = re.compile(r"handler crashed|Session\w*: ")
# Every item's check: long enough for a SIGKILL of `run` to land in it now and then.
CHECK = "sleep 0.2"


def double_claims(events: list[Any]) -> list[str]:
    """Claims of an item another worker held, its lease neither expired nor taken back."""
    held: dict[str, str] = {}  # item -> worker holding it
    found = []
    for event in events:
        payload = event.payload.as_dict()
        if event.kind == "claimed":
            if event.item in held:
                found.append(f"{event.project} {event.item} claimed by {payload.get('worker')} "
                             f"while {held[event.item]} held it")  # fmt: skip
            held[event.item] = str(payload.get("worker"))
        elif event.kind in ("lease_expired", "lease_reclaimed") or (
            payload.get("to") and payload.get("to") not in HELD
        ):
            held.pop(event.item, None)
    return found


def stalls(
    events: list[Any], windows: list[tuple[float, float, str]], workers: int, cycle: str
) -> list[tuple[float, str]]:
    """The spells, within each pass of `run` from its first claim on, in which an item sat
    claimable (pending, with no backoff left) while fewer than `workers` items were held: a
    free worker that did not take it. A worker in its own backoff holds nothing, but then
    the other worker is free to claim; a spell is one worker's trouble stalling another.
    Replayed from the event log. The revoked pass stops claiming on purpose: not counted."""
    found = []
    for start, end, label in windows:
        if label == "revoked":
            continue
        free_at = workers * (2 if label == "twin" else 1)  # two processes: twice the workers
        inside = [e for e in events if start <= e.ts <= end]
        claims = [e.ts for e in inside if e.kind == "claimed"]
        if not claims:
            continue
        state: dict[str, tuple[str, float]] = {}  # item -> (state, not before)
        for event in events:
            if event.ts >= claims[0]:
                break
            note(state, event)
        spell, longest = None, (0.0, "")
        for event in [e for e in inside if e.ts >= claims[0]]:
            now = event.ts
            free = sum(1 for s, _ in state.values() if s in HELD) < free_at
            ready = any(s == "pending" and nb <= now for s, nb in state.values())
            if free and ready and spell is None:
                spell = now
            elif not (free and ready) and spell is not None:
                longest = max(longest, (now - spell, f"{cycle} {label}"))
                spell = None
            note(state, event)
        found.append(longest)
    return found


def note(state: dict[str, tuple[str, float]], event: Any) -> None:
    to = event.payload.as_dict().get("to")
    if to:
        state[event.item] = (str(to), float(event.payload.as_dict().get("until") or 0.0))


def orphan_worktrees(work: Path, cwd: Path) -> list[str]:
    """Worktrees git lists whose directory is gone, and directories under the state dir's
    worktrees that git does not list."""
    listing = git("worktree", "list", "--porcelain", cwd=work)
    registered, orphans = set(), []
    for block in listing.split("\n\n"):
        lines = block.splitlines()
        path = next((x.split(" ", 1)[1] for x in lines if x.startswith("worktree ")), None)
        if path is None:
            continue
        registered.add(Path(path).resolve())
        if any(x.startswith("prunable") for x in lines):
            orphans.append(f"worktree {path} is registered but gone")
    folder = cwd / ".agent-harness" / "worktrees"
    if folder.is_dir():
        for child in folder.iterdir():
            if child.is_dir() and child.resolve() not in registered:
                orphans.append(f"directory {child} is no registered worktree")
    return orphans


def orphan_processes(root: Path) -> list[str]:
    """Processes still running whose command line names the soak's directory, once those
    still ending have had their stop deadline (the copy of a pane whose tmux server was killed
    stops the pane's group and waits up to STOP_DEADLINE_S for it, then SIGKILLs it)."""
    deadline = time.monotonic() + STOP_DEADLINE_S + 2.0
    while True:
        found = processes_naming(root)
        if not found or time.monotonic() >= deadline:
            return found
        time.sleep(0.1)


def processes_naming(root: Path) -> list[str]:
    """Processes whose command line names `root`, or that run inside it (a check or an agent's
    child in a worktree: `sleep 30` names no path)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            cwd = os.readlink(proc / "cwd")
        except OSError:
            continue
        if str(root) in cmdline or cwd == str(root) or cwd.startswith(f"{root}/"):
            found.append(f"pid {proc.name} in {cwd}: {cmdline[:120]}")
    return found


def canary_leaks(rig: Rig) -> tuple[list[str], int, int]:
    """Planted values found in any file under the soak's directory (state dirs, event logs,
    logs, run output, worktrees, clones, the forge's repositories and database) or in any
    environment an agent was given; and the files and agent environments read."""
    needles = {name: value.encode() for name, value in rig.secrets.items()}
    leaks, files = [], 0
    for path in rig.root.rglob("*"):
        if not path.is_file() or path.is_symlink():
            continue
        files += 1
        data = path.read_bytes()
        leaks += [f"{name} in {path.relative_to(rig.root)}" for name, v in needles.items()
                  if v in data]  # fmt: skip
    envs = list((rig.root / "agents" / "env").glob("*.json"))
    for env in envs:
        given = json.loads(env.read_text())
        leaks += [f"{name} named in the environment of agent {env.stem}" for name in needles
                  if name in given]  # fmt: skip
    for bare in (rig.root / "forge").rglob("*.git"):
        history = git("--git-dir", str(bare), "log", "--all", "-p", "--format=%H%n%B")
        leaks += [f"{name} in the history of {bare.name}" for name, v in needles.items()
                  if v.decode() in history]  # fmt: skip
    return leaks, files, len(envs)


# -- main ------------------------------------------------------------------------------------


def provider_figure(result: ProviderSoak) -> Figure:
    answers = result.answers
    return Figure(
        "soak", f"2 scripted model providers over {result.days:.1f} virtual days "
        f"({result.calls} calls of the harness's ModelClient, parking in SQLite)",
        f"answered {answers['answered']}, bursts {answers['burst']}, spent windows "
        f"{answers['window']}, spent caps {answers['cap']} (raised the next midnight "
        f"{result.caps_raised}); requests while told to wait {len(result.early)}",
        not result.early and answers["cap"] - result.caps_raised in (0, 1, 2),
        [f"each spent cap requested exactly once: {answers['cap']} cap answers, "
         f"{result.caps_raised} raised, {len(result.early)} requests between",
         f"the client's calls ended: {tally(result.outcomes)}", *result.early[:10]],
    )  # fmt: skip


def figures(soak: Soak, files: int, envs: int) -> list[Figure]:
    items = sum(soak.items.values())
    stuck = sum(soak.items[k] for k in STUCK)
    worst = max(soak.stalls, default=(0.0, ""))
    return [
        Figure("soak", f"{soak.cycles} cycles, {items} items ({tally(soak.items)})",
               f"final states: {tally(soak.states)}", True, [f"by kind: {tally(soak.outcomes)}"]),
        Figure("soak", f"{soak.passes} passes of `run`, {soak.kills} SIGKILLed; "
               f"{sum(soak.tmux_kills.values())} SIGKILLs of the tmux server",
               f"kills landed after: {tally(soak.killed_after)}; tmux server killed "
               f"{tally(soak.tmux_kills)}", True,
               [f"session hosts, by cycle: {tally(soak.hosts)}",
                f"slowest pass: {soak.slowest[1]}, {soak.slowest[0]:.0f} s", *soak.noise]),
        Figure("soak", f"{sum(n for _, n in soak.rules)} forge faults set over "
               f"{sum(soak.requests.values())} requests to the forge",
               f"met: {tally(soak.faults)} ({sum(soak.faults.values())} in all)", True),
        Figure("soak", "duplicate issues", f"{soak.duplicate_issues} (issues with no marker "
               f"{soak.unmarked_issues})", soak.duplicate_issues == soak.unmarked_issues == 0),
        Figure("soak", "duplicate pull requests", str(soak.duplicate_prs), soak.duplicate_prs == 0),
        Figure("soak", "items neither terminal nor held by a live lease",
               str(len(soak.unsettled)), not soak.unsettled, soak.unsettled),
        Figure("soak", "commits on a default branch", str(soak.main_writes),
               soak.main_writes == 0),
        Figure("soak", f"{stuck} agents that hung or waited for input (agent timeout "
               f"{AGENT_TIMEOUT_S} s, idle {AGENT_IDLE_S} s)", f"sessions ended at the timeout "
               f"{soak.stuck_timeouts}, items not failed for it {len(soak.stuck_wrong)}; "
               f"said waiting for input: {soak.asked} of {soak.items['ask']}",
               not soak.stuck_wrong and soak.asked == soak.items["ask"], soak.stuck_wrong),
        Figure("soak", f"token revoked partway through {soak.revocations} passes (401 on every "
               "request until fixed; the next pass runs with it fixed)",
               f"401s answered per revocation {soak.unauthorized}, wrong stops or failed items "
               f"{len(soak.revoke_wrong)}", soak.revocations > 0 and not soak.revoke_wrong,
               [f"how `run` stopped: {tally(soak.revoke_messages)}",
                f"passes that ended before the moment came: {soak.revoke_missed}",
                *soak.revoke_wrong]),
        Figure("soak", f"{soak.twin_passes} passes of two `run` processes on one SQLite "
               "database at once (two state dirs and clones, the same plans; exit 4 is "
               "'some item failed')",
               f"exits: {tally(soak.twin_exits)}; double claims {len(soak.double_claims)}",
               not soak.double_claims and all(set(x.split()) <= {"exit", "and", "0", "4"}
                                              for x in soak.twin_exits),
               [f"items of T claimed by each process, per cycle: {soak.twin_items}",
                *soak.double_claims[:10]]),
        Figure("soak", f"no worker's failure stalls another: the longest spell, per pass, "
               f"with an item claimable and a worker free (limit {STALL_LIMIT_S} s)",
               f"longest {worst[0]:.1f} s ({worst[1] or 'none'})", worst[0] <= STALL_LIMIT_S,
               [f"spells over 1 s: {sum(1 for x, _ in soak.stalls if x > 1)} of "
                f"{len(soak.stalls)} passes"]),
        Figure("soak", "orphan worktrees, sessions, agent temporary folders and processes",
               str(len(soak.orphans) + len(soak.sessions_left)),
               not soak.orphans and not soak.sessions_left, soak.orphans + soak.sessions_left),
        Figure("soak", "items whose events or pull request disagree with their state",
               str(len(soak.inconsistent)), not soak.inconsistent, soak.inconsistent),
        Figure("soak", "attempts ended by an error nobody classified (a handler's crash, a "
               "session gone under its watch)", str(len(soak.crashes)), not soak.crashes,
               soak.crashes[:10]),
        Figure("soak", f"canaries looked for in {files} files, {envs} agent environments and "
               "the forge's git history", f"found {len(soak.leaks)}", not soak.leaks,
               soak.leaks),
    ]  # fmt: skip


def soak_run(args: argparse.Namespace, rng: random.Random) -> list[Figure]:
    soak = Soak()
    stop = time.monotonic() + args.minutes * 60
    with tempfile.TemporaryDirectory(prefix="ah-soak-") as name:
        root = Path(args.keep or name)
        root.mkdir(parents=True, exist_ok=True)
        rig, forge, server = start_rig(root, rng, args)
        try:
            with (
                ModelServer([ScriptedResponder(review_rules)]) as model,
                forge_noise(soak.noise),
                private_tmux(root / "tmux"),
            ):
                rig.model_url = model.url
                while soak.cycles < args.cycles or time.monotonic() < stop:
                    soak.cycles += 1
                    one_cycle(rig, soak.cycles, soak)
            soak.requests = collections.Counter(forge.request_counts())
            for rule, count in soak.rules:  # the forge counts a rule down to 0 as it is met
                soak.faults[rule.kind.value] += count - int(rule.count or 0)
            soak.noise += [f"forge error: {exc!r}" for exc in forge.server_errors]
        finally:
            rig.rf.github.close()
            server.__exit__(None, None, None)
            forge.close()
        providers = soak_providers(root, rig.args.days, rig.rng.randrange(1 << 31))
        soak.orphans += orphan_processes(root)
        soak.leaks, files, envs = canary_leaks(rig)
    return [show(f) for f in [*figures(soak, files, envs), provider_figure(providers),
                              injected(soak, providers)]]  # fmt: skip


def injected(soak: Soak, providers: ProviderSoak) -> Figure:
    """Every fault the soak injected, by kind, in one line."""
    kinds: collections.Counter[str] = collections.Counter()
    kinds.update({f"forge {kind}": n for kind, n in soak.faults.items() if n})
    kinds["forge bad_credentials (token revoked)"] = soak.revocations
    kinds["SIGKILL of run"] = soak.kills
    kinds["SIGKILL of the tmux server"] = sum(soak.tmux_kills.values())
    kinds["agent hung"] = soak.items["hang"]
    kinds["agent waiting for input"] = soak.items["ask"]
    kinds["agent crashed"] = soak.items["crash"]
    kinds["two runs on one database"] = soak.twin_passes
    kinds.update({f"provider {kind}": providers.answers[kind] for kind in ("burst", "window",
                                                                           "cap")})  # fmt: skip
    return Figure("soak", "faults injected, by kind", tally(+kinds), True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--short", action="store_true", help="one small cycle (CI)")
    parser.add_argument("--minutes", type=float, default=0.0, help="start cycles until then")
    parser.add_argument("--seed", type=int, help="seed of every random choice")
    parser.add_argument("--workers", type=int, default=2, help="agents at once (default 2)")
    parser.add_argument("--projects", type=int, help="plans per cycle (default 3)")
    parser.add_argument("--items", type=int, help="items per plan (default 4)")
    parser.add_argument(
        "--faults", type=int, help="most fault rules set per pass (short 2, else 5)"
    )
    parser.add_argument("--keep", type=Path, help="work in this directory and leave it there")
    parser.add_argument("--kills", type=int, help="SIGKILLs of `run` per cycle (default 3)")
    parser.add_argument(
        "--days", type=int, help="virtual days of the scripted providers (short 2, else 14)"
    )
    args = parser.parse_args(argv)
    args.projects = args.projects or 3
    args.items = args.items or (3 if args.short else 4)
    args.kills = args.kills if args.kills is not None else (2 if args.short else 3)
    args.faults = max(1, args.faults or (2 if args.short else 5))
    args.days = args.days or (2 if args.short else 14)
    args.cycles = 1
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 31)
    rng = random.Random(seed)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"soak: seed {seed}{' (short)' if args.short else ''}, {args.workers} workers; "
          f"{os.cpu_count()} cores, load average {load}", flush=True)  # fmt: skip
    start = time.monotonic()
    results = soak_run(args, rng)
    print(f"  ({time.monotonic() - start:.0f} s)", flush=True)
    broken = [f for f in results if not f.holds]
    print(f"{len(results) - len(broken)} of {len(results)} figures hold", flush=True)
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
