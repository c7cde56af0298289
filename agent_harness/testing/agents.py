"""Scripted agents: small real programs that behave like coding agents, for tests.

A behaviour is a list of steps (print, write a file, dump the environment, ask a question and
wait for the answer, report a vendor's rate limit in its real output format, hang, exit). It is
written as JSON beside one generic interpreter script, and run with this Python, so the agent
goes through exactly the session machinery a real agent does.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

# Shorthands for the behaviours tests need most; a dict gives any other sequence of steps.
BEHAVIOURS: dict[str, dict[str, Any]] = {
    "done": {
        "steps": [{"print": "working on it"}, {"write_file": {"path": "DONE.txt"}}],
        "exit": 0,
    },
    "crash": {"steps": [{"print": "error: the build tool blew up"}], "exit": 3},
    "ask": {
        "steps": [
            {"print": "I changed 3 files."},
            {"ask": "Apply these changes? [y/N]"},
        ],
        "exit": 0,
    },
    "claude_rate_limit": {
        "steps": [{"print": "starting"}, {"claude_rate_limit": {"reset_in_s": 3600}}],
        "exit": 1,
    },
    "codex_usage_limit": {
        "steps": [{"codex_usage_limit": {"reset_in_s": 7200}}],
        "exit": 1,
    },
    "dump_env": {"steps": [{"env_dump": "env.json"}], "exit": 0},
    "hang": {"steps": [{"print": "thinking..."}, {"hang": None}], "exit": 0},
}

SCRIPT = r"""
import json, os, sys, time

def resolve(path):
    return path if os.path.isabs(path) else os.path.join(os.getcwd(), path)

def write(path, text):
    path = resolve(path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)

def say(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()

def test_worker_of(pid):
    # The pytest-xdist worker a process descends from (its nearest ancestor's
    # PYTEST_XDIST_WORKER), or None: tests running side by side share some tokens, and one
    # test's scan must not count another's processes as its own.
    seen = 0
    while pid and str(pid) != "1" and seen < 64:
        seen += 1
        try:
            with open("/proc/%s/environ" % pid, "rb") as fh:
                for entry in fh.read().split(b"\0"):
                    if entry.startswith(b"PYTEST_XDIST_WORKER="):
                        return entry.split(b"=", 1)[1].decode("ascii", "replace")
            with open("/proc/%s/status" % pid, "rb") as fh:
                pid = next((line.split()[1].decode() for line in fh
                            if line.startswith(b"PPid:")), None)
        except OSError:
            return None
    return None

def secret_scan(arg):
    # Look for secret values everywhere this agent can read: every process's environment and
    # command line, and the files under the given directories. Reports where each was found.
    with open(arg["needles"], encoding="utf-8") as fh:
        spec = json.load(fh)
    needles = [value.encode() for value in spec["secrets"]]
    canary = spec["canary"].encode()
    hits, canary_pids, refused_pids, read = [], [], [], 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        for part in ("environ", "cmdline"):
            try:
                with open("/proc/%s/%s" % (pid, part), "rb") as fh:
                    data = fh.read()
            except PermissionError:
                if part == "environ":
                    refused_pids.append(int(pid))
                continue
            except OSError:
                continue
            read += 1
            if part == "environ" and canary in data:
                canary_pids.append(int(pid))
            found = [i for i, needle in enumerate(needles) if needle in data]
            if found:
                try:
                    with open("/proc/%s/cmdline" % pid, "rb") as fh:
                        cmd = fh.read().replace(b"\0", b" ").decode("utf-8", "replace")[:200]
                except OSError:
                    cmd = "?"
                worker = test_worker_of(pid)
                hits += [{"where": "/proc/%s/%s" % (pid, part), "secret": i, "cmd": cmd,
                          "worker": worker} for i in found]
    for top in arg.get("dirs", []):
        for folder, _, names in os.walk(top):
            for name in names:
                path = os.path.join(folder, name)
                if not os.path.isfile(path) or os.path.islink(path):
                    continue  # a named pipe (a headless session's input) would block the read
                try:
                    with open(path, "rb") as fh:
                        data = fh.read(8 << 20)
                except OSError:
                    continue
                hits += [{"where": path, "secret": i}
                         for i, needle in enumerate(needles) if needle in data]
    return {"hits": hits, "canary_pids": canary_pids, "refused_pids": refused_pids, "read": read,
            "pid": os.getpid()}

def main(plan_path):
    with open(plan_path, encoding="utf-8") as fh:
        plan = json.load(fh)
    for step in plan.get("steps", []):
        (kind, arg), = step.items()
        if kind == "print":
            for line in [arg] if isinstance(arg, str) else arg:
                say(line)
        elif kind == "write_file":
            write(arg["path"], arg.get("content", "done\n"))
        elif kind == "env_dump":
            write(arg, json.dumps(dict(os.environ), sort_keys=True))
        elif kind == "parent_env_dump":
            with open("/proc/%d/environ" % os.getppid(), "rb") as fh:
                raw = fh.read().split(b"\0")
            pairs = [item.decode("utf-8", "replace").partition("=") for item in raw if item]
            write(arg, json.dumps({key: value for key, _, value in pairs}, sort_keys=True))
        elif kind == "secret_scan":
            write(arg["out"], json.dumps(secret_scan(arg)))
        elif kind == "argv_dump":
            write(arg, json.dumps(sys.argv[2:]))
        elif kind == "ask":
            sys.stdout.write(arg + " ")
            sys.stdout.flush()
            answer = sys.stdin.readline().strip()
            say("answer: " + answer)
            write("answer.txt", answer)
        elif kind == "sleep":
            time.sleep(float(arg))
        elif kind == "hang":
            deadline = None if arg is None else time.monotonic() + float(arg)
            while deadline is None or time.monotonic() < deadline:
                time.sleep(0.1)
        elif kind == "claude_rate_limit":
            reset = int(time.time() + float(arg.get("reset_in_s", 3600)))
            say(json.dumps({"type": "rate_limit_event", "rate_limit_info": {
                "status": "rejected", "resetsAt": reset,
                "rateLimitType": arg.get("window", "five_hour")}}))
            say(json.dumps({"type": "result", "subtype": "error", "is_error": True,
                            "result": "Claude AI usage limit reached"}))
        elif kind == "codex_usage_limit":
            seconds = int(arg.get("reset_in_s", 3600))
            say(json.dumps({"type": "error", "error": {
                "type": "usage_limit_reached", "message": "You've hit your usage limit.",
                "resets_in_seconds": seconds}}))
        else:
            sys.stderr.write("scripted agent: unknown step %r\n" % kind)
            sys.exit(70)
    sys.exit(int(plan.get("exit", 0)))

main(sys.argv[1])
"""


def write_scripted_agent(directory: Path, behaviour: dict[str, Any] | str) -> list[str]:
    """Write a scripted agent into `directory` and return the argv that runs it.

    `behaviour` is a name from `BEHAVIOURS` or a dict `{"steps": [...], "exit": code}` whose
    steps are one-key dicts: `print` (a line or lines), `write_file` ({path, content}),
    `env_dump` (path: the environment as JSON), `parent_env_dump` (the same for the process
    that started the agent, read from /proc), `argv_dump` (path: the arguments after the
    plan file as JSON, e.g. the prompt a preset passed), `secret_scan` ({needles, out, dirs}:
    look for the values listed in the JSON file `needles` (`{"secrets": [...], "canary": ...}`)
    in every readable /proc/<pid>/environ and cmdline and every file under `dirs`; write the
    hits, and the pids whose environment holds the canary, to `out`), `ask` (a question; the
    answer line is printed and written to answer.txt), `sleep` (seconds), `hang` (seconds, or
    None for ever), `claude_rate_limit` / `codex_usage_limit` ({reset_in_s}). Relative paths
    are taken from the agent's working directory.
    """
    if isinstance(behaviour, str):
        if behaviour not in BEHAVIOURS:
            raise ValueError(
                f"unknown scripted behaviour {behaviour!r}; known: {sorted(BEHAVIOURS)}"
            )
        plan = BEHAVIOURS[behaviour]
        label = behaviour
    else:
        plan = behaviour
        label = "custom"
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    script = directory / "scripted_agent.py"
    if not script.exists() or script.read_text(encoding="utf-8") != SCRIPT:
        script.write_text(SCRIPT, encoding="utf-8")
    index = sum(1 for _ in directory.glob("plan-*.json"))
    plan_path = directory / f"plan-{index}-{label}.json"
    plan_path.write_text(json.dumps(plan), encoding="utf-8")
    return [sys.executable, str(script), str(plan_path)]
