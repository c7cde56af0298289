"""Credentials in text from outside (an agent's output, a check's output, a provider's error)
are masked before that text is shown or kept: in the run's reasons, the event log and
`classify`'s answer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_harness.cli import main
from agent_harness.secrets.redact import redact, redact_values
from agent_harness.store.database import Store
from agent_harness.store.events import AgentFinished, WorktreeReady

KEY = "sk-proj-canaryAAAAbbbbCCCCdddd0123456789"
URL = "postgresql://u:canary-PW-9@127.0.0.1:1/x"
TOKEN = "ghp_" + "c" * 36
OUTPUT = f"Error: 401 Incorrect API key provided: {KEY}\nconnecting to {URL}\ntoken={TOKEN}\n"


@pytest.mark.unit
def test_keys_url_passwords_and_known_values_are_masked_and_the_rest_kept() -> None:
    said = redact(
        OUTPUT + "my-own-harness-secret-42 stays? no", {"my-own-harness-secret-42": "GH_TOKEN"}
    )
    assert "canary" not in said and TOKEN not in said and "my-own-harness-secret-42" not in said
    assert "[redacted: an OpenAI key]" in said and "[redacted: a GitHub token]" in said
    assert "postgresql://u:***@127.0.0.1:1/x" in said and "[redacted GH_TOKEN]" in said
    assert said.startswith("Error: 401 Incorrect API key provided: ")


@pytest.mark.unit
def test_a_payload_keeps_its_shape_and_stays_json_when_masked() -> None:
    # A URL-password match never runs across the end of one JSON string into the next.
    payload = {"a": "http://x:", "b": ["y@z", {"c": URL}], "n": 3, "ok": True}
    masked = redact_values(payload)
    assert masked == {
        "a": "http://x:",
        "b": ["y@z", {"c": "postgresql://u:***@127.0.0.1:1/x"}],
        "n": 3,
        "ok": True,
    }
    assert redact(json.dumps(payload)) == json.dumps(masked)


@pytest.mark.unit
def test_classify_never_echoes_the_key_an_agent_printed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "agent.log"
    log.write_text(OUTPUT)
    main(["classify", "--agent", "codex", str(log)])
    main(["classify", "--agent", "codex", str(log), "--json"])
    out = capsys.readouterr()
    assert "canary" not in out.out + out.err and TOKEN not in out.out + out.err


@pytest.mark.integration
def test_the_log_masks_what_was_said_and_keeps_the_data_the_harness_reads_back(
    store: Store,
) -> None:
    # A branch slug or a folder can have a key's shape (`sk-learn-…`); a plan's markdown may
    # name a test database's URL. Masked, a resumed run would look for a branch that is not
    # there. Only the fields that carry outside text are masked.
    branch = "agent-harness/T1-sk-learn-upgrade-to-version-two"
    place = "/home/u/src/sk-ml-experiments-pipeline-x/.agent-harness/worktrees/T1"
    store.append_event("me/app:P", "T1", WorktreeReady(path=place, branch=branch, base="a" * 40))
    store.append_event("me/app:P", "T1", AgentFinished(ok=False, state="crashed", reason=OUTPUT,
                                                        tail=OUTPUT))  # fmt: skip
    ready, finished = (e.payload.as_dict() for e in store.all_events(project="me/app:P"))
    assert (ready["branch"], ready["path"]) == (branch, place)
    assert "canary" not in finished["reason"] + finished["tail"]
    assert "[redacted: an OpenAI key]" in finished["reason"]


@pytest.mark.unit
@pytest.mark.parametrize(
    ("said", "kept"),
    [
        ("postgresql://u:p@ss@host/db", "postgresql://u:***@host/db"),  # an '@' in the password
        ("postgresql://db/app?password=hunter22", "postgresql://db/app?password=***"),
        ("password=hunter22 host=db", "password=*** host=db"),  # libpq's keywords
        (f"https://{'0a' * 20}@github.com/o/r.git", "https://***@github.com/o/r.git"),
        ("ssh://git@github.com/o/r", "ssh://git@github.com/o/r"),  # a user name stays
        ("http://u:pw@h:8765/x?a=1&token=abc&b=2", "http://u:***@h:8765/x?a=1&token=***&b=2"),
        # a '/' typed into a password, not percent-encoded: still the password, up to its '@'
        ("postgresql://u:pa/ss@host/db", "postgresql://u:***@host/db"),
        ("redis://:x/y/z@cache:6379", "redis://:***@cache:6379"),
        # digits before the '/' that no port can be (over 65535, or a leading zero)
        ("postgresql://u:123456/pw@host/db", "postgresql://u:***@host/db"),
        ("postgresql://u:0420/pw@host/db", "postgresql://u:***@host/db"),
        # a port and a path with an '@' in it: no password there
        ("https://example.com:8443/users/@me", "https://example.com:8443/users/@me"),
        ("https://example.com:/a@b", "https://example.com:/a@b"),
    ],
)
def test_every_common_way_a_url_or_keyword_carries_a_password_is_masked(
    said: str, kept: str
) -> None:
    assert redact(said, known={}) == kept


@pytest.mark.unit
@pytest.mark.parametrize(
    ("said", "shown"),
    [
        ("key sk-or-v1-" + "0a" * 32 + " refused", "key [redacted: an OpenRouter key] refused"),
        ("Authentication Fails, sk-" + "3f" * 16 + " is invalid", "[redacted: a DeepSeek key]"),
        ("Invalid API Key gsk_" + "Ab1" * 17 + "x", "Invalid API Key [redacted: a Groq key]"),
        # a key in a format no vendor documents, which the message says it was given
        (
            "Invalid proxy server token passed. Received API Key = sk-1234abcd5678efgh, Key",
            "Received API Key = [redacted: a key it was given], Key",
        ),
        (
            "Malformed API Key passed in. Ensure Key has `Bearer ` prefix. Passed in: tok3n-xyz-99",
            "Malformed API Key passed in. Ensure Key has `Bearer ` prefix. Passed in: [redacted",
        ),
        ("Authorization: Bearer abcdef123456789", "Authorization: Bearer [redacted"),
    ],
)
def test_keys_of_other_providers_and_keys_a_message_says_it_got_are_masked(
    said: str, shown: str
) -> None:
    masked = redact(said, known={})
    assert shown in masked
    assert not any(part in masked for part in ("0a0a0a", "3f3f3f", "Ab1Ab1", "5678efgh", "xyz-99"))


@pytest.mark.unit
@pytest.mark.parametrize(
    ("said", "kept"),
    [
        (
            "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk\nAAAA\n"
            "-----END OPENSSH PRIVATE KEY-----\nok",
            "ok",
        ),
        ("-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKC (cut here)", ""),
        ("machine github.com login me password s3cr3tValue99", "login me"),
        ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "aws_secret"),
        ("npm_" + "a1" * 18, ""),
        ("glpat-" + "x1" * 10, ""),
    ],
)
def test_a_key_a_check_printed_is_masked_whole(said: str, kept: str) -> None:
    # A private key's body is the secret, not its BEGIN line; a netrc's or an AWS file's value
    # has no vendor shape but a label that says what it is.
    masked = redact(said, {})
    assert "[redacted" in masked and kept in masked
    for secret in (
        "b3BlbnNzaC1rZXk",
        "MIIEpAIBAAKC",
        "s3cr3tValue99",
        "wJalrXUtnFEMI",
        "a1a1",
        "x1x1",
    ):
        assert secret not in masked


@pytest.mark.unit
def test_a_token_printed_in_colour_is_masked_once_the_colour_is_off() -> None:
    from agent_harness.secrets.redact import strip_terminal_codes

    coloured = "\x1b[31mghp_" + "A" * 36 + "\x1b[0m"
    assert redact(strip_terminal_codes(coloured), {}) == "[redacted: a GitHub token]"
