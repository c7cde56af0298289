"""The second round of attacks on the command line: secrets shown back, files clobbered,
names that differ only in case, and values too big or too odd to hold. Each ends in a clear
one-line error or a masked value, never a traceback or a leak."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_harness.cli import main
from agent_harness.secrets.shapes import mask_url

PASSWORD = "hunter2-canary-7c1d"


@pytest.mark.unit
@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://u:PW@db.example:5432/q", "postgresql://u:***@db.example:5432/q"),
        ("postgresql://u:PW@[::1/x", "postgresql://u:***@[::1/x"),  # too malformed to parse
        ("postgresql://u:p@PW@h/x", "postgresql://u:***@h/x"),  # an '@' in the password
        ("postgresql://h/db?sslmode=require&password=PW", "postgresql://h/db?sslmode=require&password=***"),
        ("http://h/p?x=1#top", "http://h/p?x=1#top"),
        ("postgresql://u@h/db", "postgresql://u@h/db"),
        ("/var/lib/harness.sqlite", "/var/lib/harness.sqlite"),
    ],
)  # fmt: skip
def test_a_url_is_shown_without_its_password(url: str, shown: str) -> None:
    assert mask_url(url) == shown


@pytest.mark.unit
@pytest.mark.parametrize("how", ["flag", "env", "file"])
def test_config_never_shows_the_database_password(
    how: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = f"postgresql://harness:{PASSWORD}@db.example/fleet"
    monkeypatch.chdir(tmp_path)
    args = ["config"]
    if how == "flag":
        args += ["--db", url]
    elif how == "env":
        monkeypatch.setenv("AGENT_HARNESS_STORE__DB", url)
    else:
        (tmp_path / "agent-harness.toml").write_text(f'[store]\ndb = "{url}"\n')
    assert main(args) == 0
    assert main([*args, "--json"]) == 0
    out = capsys.readouterr().out
    assert PASSWORD not in out
    assert "harness:***@db.example/fleet" in out


@pytest.mark.unit
@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("http://[::1", "is not a URL: Invalid port"),
        ("http://h/" + "a" * 70_000, "is not a URL: URL too long"),
        ("http://h/caf\udce9", "http://h/caf\\xe9 is not a URL: it holds bytes"),
        ("ftp://h", "ftp://h is not a server's address"),
        ("127.0.0.1:8765", "is not a server's address: give http://HOST:PORT"),
        (f"http://u:{PASSWORD}@[::1", "http://u:***@[::1 is not a URL"),
    ],
)
def test_smoke_refuses_a_url_it_cannot_use_in_one_line(
    url: str, said: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HARNESS_TOKEN", "a-good-token-123")
    assert main(["smoke", url]) == 2
    err = capsys.readouterr().err
    assert said in err and err.count("\n") == 1 and PASSWORD not in err


@pytest.mark.unit
@pytest.mark.parametrize("token", ["two\nlines", "caf\u00e9-token", "has space"])
def test_smoke_refuses_a_token_it_cannot_send_without_showing_it(
    token: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HARNESS_TOKEN", token)
    assert main(["smoke", "http://127.0.0.1:1"]) == 2
    err = capsys.readouterr().err
    assert "cannot be sent as a bearer token" in err and token not in err


@pytest.mark.integration
def test_smoke_reports_a_url_with_its_password_masked(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HARNESS_TOKEN", "a-good-token-123")
    url = f"http://u:{PASSWORD}@127.0.0.1:1"  # nothing listens on port 1
    assert main(["smoke", url]) == 2
    assert main(["smoke", url, "--json"]) == 2
    out = capsys.readouterr().out
    assert PASSWORD not in out
    assert "http://u:***@127.0.0.1:1: NOT healthy" in out
    assert json.loads(out[out.index("{") :])["url"] == "http://u:***@127.0.0.1:1"
