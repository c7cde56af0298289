"""The running harness keeps no credential where another process of the same user can read it.

These start the real entry point (`python -m agent_harness`) as its own process and look at it
from outside, as an agent would.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytestmark = pytest.mark.acceptance

GH = "ghp_" + "Q7w" * 12
SECRETS = {
    "GH_TOKEN": GH,
    "OPENAI_API_KEY": "sk-proj-" + "o" * 40,
    "ANTHROPIC_API_KEY": "sk-ant-api03-" + "a" * 40,
    "DATABASE_URL": "postgresql://app:CorrectHorseBattery@db.internal/app",
    "FORGE_TOKEN": "forge-secret-token-123456",
}
CANARY = ("AH_CANARY", "visible-to-anyone")


def _base_env(home: Path) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", os.defpath),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        CANARY[0]: CANARY[1],
    }


@pytest.fixture
def where() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="ah-seal-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _serve_forge(where: Path, env: dict[str, str]) -> tuple[Any, str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "agent_harness", "forge", "serve", "--data", "forge", "--port", "0"],
        cwd=where,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    first = proc.stdout.readline()
    if not first.startswith("forge serving "):
        proc.kill()
        raise AssertionError(f"the forge did not start: {first!r} {proc.communicate()[1]!r}")
    return proc, first.split()[2]


def test_the_running_cli_holds_no_credential_in_its_environment(where: Path) -> None:
    env = {**_base_env(where), **SECRETS}
    proc, url = _serve_forge(where, env)
    try:
        cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes()
        try:
            environ = Path(f"/proc/{proc.pid}/environ").read_bytes()
        except PermissionError:
            # Not root: the sealed process refuses even its own user's look (stronger still).
            assert os.geteuid() != 0
            environ = b""
        else:
            # As root the look sees this process's environment (the canary is there) ...
            assert f"{CANARY[0]}={CANARY[1]}".encode() in environ
        # ... and no credential is in it, nor in its command line.
        for name, value in SECRETS.items():
            assert value.encode() not in environ, name
            assert value.encode() not in cmdline, name
        # The sealed token still reaches the code that needs it: the forge accepts it.
        answer = httpx.get(
            f"{url}/user", headers={"Authorization": f"token {SECRETS['FORGE_TOKEN']}"}
        )
        assert answer.status_code == 200
        assert httpx.get(f"{url}/user", headers={"Authorization": "token wrong"}).status_code == 401
    finally:
        proc.kill()
        proc.wait()
    # The token was never printed either.
    out, err = proc.communicate()
    assert SECRETS["FORGE_TOKEN"] not in out + err


REPO = Path(__file__).resolve().parents[2]
HOLDER = (
    "from agent_harness.secrets.process import seal_process\n"
    "seal_process()\n"
    "print('ready', flush=True)\n"
    "import time; time.sleep(60)\n"
)
READER = (
    "import sys\n"
    "for part in ('environ', 'mem'):\n"
    "    try:\n"
    "        open('/proc/%s/%s' % (sys.argv[1], part), 'rb').read(1)\n"
    "        print(part, 'readable')\n"
    "    except OSError as exc:\n"
    "        print(part, 'refused', exc.errno)\n"
)


def _ordinary_user() -> tuple[int | None, str]:
    """Who plays 'the same user', and a Python that user may run. Root reads any process (it
    holds every capability), so as root both sides become the unprivileged user nobody."""
    if os.geteuid() != 0:
        return None, sys.executable
    for candidate in (os.path.realpath(sys.executable), "/usr/bin/python3"):
        try:
            done = subprocess.run(
                [candidate, "-c", "import sys; assert sys.version_info >= (3, 11)"],
                user=65534,
                capture_output=True,
                timeout=30,
            )
        except OSError:
            continue
        if done.returncode == 0:
            return 65534, candidate
    pytest.skip("running as root, and no Python 3.11+ that the user nobody may run")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and prctl are Linux's")
def test_a_process_of_the_same_user_cannot_read_the_harness_memory_or_environment(
    where: Path,
) -> None:
    user, python = _ordinary_user()
    where.chmod(0o777)
    env = {**_base_env(where), **SECRETS, "PYTHONPATH": str(REPO)}

    def look(pid: int) -> str:
        done = subprocess.run(
            [python, "-c", READER, str(pid)],
            env=_base_env(where),
            capture_output=True,
            text=True,
            user=user,
            timeout=30,
        )
        return done.stdout

    def start(code: str) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [python, "-c", code], env=env, user=user, stdout=subprocess.PIPE, text=True
        )
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        return proc

    # A plain process of that user is an open book to its neighbour: the look can succeed.
    plain = start("print('ready', flush=True); import time; time.sleep(60)")
    try:
        assert "environ readable" in look(plain.pid)
    finally:
        plain.kill()
        plain.wait()
    holder = start(HOLDER)
    try:
        seen = look(holder.pid)
        assert "environ refused" in seen and "mem refused" in seen, seen
    finally:
        holder.kill()
        holder.wait()


SHOWER = (
    "import json, sys\n"
    "from agent_harness.secrets.process import seal_process\n"
    "seal_process()\n"
    "cmdline = open('/proc/self/cmdline', 'rb').read().decode().split('\\0')\n"
    "print(json.dumps({'argv': sys.argv[1:], 'cmdline': cmdline}), flush=True)\n"
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc is Linux's")
def test_a_password_given_on_the_command_line_is_masked_there_and_still_used(
    where: Path,
) -> None:
    import json

    given = [
        "--db",
        "postgresql://harness:DbPw-s3cret-XYZ@127.0.0.1:5432/x",
        "--audit-db=postgresql://a:AuditPw-77@h/a",
        "--dsn",
        "host=h user=u password=KwPass-123 dbname=x",
        f"--token={GH}",
        "--read-only-token",
        "s3cr3t-forge-token-value",
        "--collaborator",
        "bob=bobs-secret-token-1234",
        "--dsn=host=h password='my secret' dbname=x",
        "--plan",
        "PLAN.md",
    ]
    script = where / "show.py"
    script.write_text(SHOWER)
    env = {**_base_env(where), "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, str(script), *given], env=env, capture_output=True, text=True, timeout=60
    )
    seen = json.loads(done.stdout)
    assert seen["argv"] == given  # the program reads what it was given
    shown = " ".join(seen["cmdline"])  # what `ps` and any agent read
    for secret in ("DbPw-s3cret-XYZ", "AuditPw-77", "KwPass-123", GH, "s3cr3t-forge-token"):
        assert secret not in shown
    assert "bobs-secret-token" not in shown and "my secret" not in shown
    assert "--collaborator bob=***" in shown  # the login stays readable
    assert "postgresql://harness:***@127.0.0.1:5432/x" in shown
    assert "--token=***" in shown and "PLAN.md" in shown
