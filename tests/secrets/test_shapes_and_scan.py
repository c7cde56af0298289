"""Recognising secrets by name and shape, and finding them in the lines a diff adds."""

from __future__ import annotations

import pytest

from agent_harness.secrets.process import should_seal
from agent_harness.secrets.scan import scan_diff
from agent_harness.secrets.shapes import key_shape, known_values, value_looks_secret

pytestmark = pytest.mark.unit

GH = "ghp_" + "a1B2" * 9


@pytest.mark.parametrize(
    ("text", "shape"),
    [
        (f"token = '{GH}'", "a GitHub token"),
        ("github_pat_11ABCDEFG0123456789_abcdefghijklmnop", "a GitHub token"),
        ("key: sk-ant-api03-" + "Z" * 40, "an Anthropic key"),
        ("OPENAI=sk-proj-" + "q1Q" * 14, "an OpenAI key"),
        ("branch agent-harness/T1-sk-learn-upgrade-to-version-two", None),  # kebab-case words
        ("sk-rate-limiter-settings-for-workers", None),
        ("aws_access_key_id = AKIAIOSFODNN7EXAMPLE", "an AWS access key id"),
        ("AIza" + "b" * 35, "a Google API key"),
        ("xoxb-123456789012-abcdefghij", "a Slack token"),
        ("-----BEGIN RSA PRIVATE KEY-----", "a private key"),
        ("sk-test", None),  # too short to be a real key
        ("the skeleton key is under the mat", None),
        ("ghp_short", None),
    ],
)
def test_key_shapes(text: str, shape: str | None) -> None:
    assert key_shape(text) == shape


def test_a_url_password_is_a_secret_shape_but_a_user_alone_is_not() -> None:
    assert value_looks_secret("mysql://root:hunter2@db/app") == "a URL with a password"
    assert value_looks_secret("https://user@example.com/x") is None
    assert value_looks_secret("http://127.0.0.1:8080/api") is None


def test_known_values_come_from_credential_names_and_shapes_only() -> None:
    env = {
        "GH_TOKEN": GH,
        "DATABASE_URL": "postgresql://u:longpassword@h/db",
        "AGENT_HARNESS_STATE_DIR": "/srv/agent-harness",  # withheld from agents, no credential
        "SHORT_TOKEN": "abc",
        "HOME": "/root",
    }
    assert known_values(env, extra=["from-a-config-file"]) == {
        GH: "GH_TOKEN",
        "postgresql://u:longpassword@h/db": "DATABASE_URL",
        "from-a-config-file": "a token the harness holds",
    }


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("TEST_REVIEWER_KEY", True),  # a route's key variable may be named anything like this
        ("KEY_FILE", True),
        ("GITHUB_AUTH", True),
        ("SESSION_COOKIE", True),
        ("AWS_CREDS", True),
        ("ACME_PASSPHRASE", True),  # reached the checks and stayed in the logs as it was
        ("VAULT_PASSCODE", True),
        ("SMTP_PASS", True),
        ("DB_PWD", True),
        ("PASSENGER_COUNT", False),
        ("PWD", False),  # the shell's working directory, not a password
        ("GIT_AUTHOR_NAME", False),  # checks that commit need it
        ("KEYBOARD_LAYOUT", False),
        ("MONKEY_PATCH", False),
        ("PATH", False),
    ],
)
def test_credential_names(name: str, secret: bool) -> None:
    from agent_harness.secrets.shapes import is_secret_name

    assert is_secret_name(name) is secret


def test_what_the_entry_point_seals_away() -> None:
    assert should_seal("GH_TOKEN", "x")
    assert should_seal("ANTHROPIC_API_KEY", "x")
    assert should_seal("DATABASE_URL", "postgresql://u:pw@h/db")
    assert should_seal("AGENT_HARNESS_DB", "postgresql://u:pw@h/db")
    assert not should_seal("AGENT_HARNESS_DB", "postgresql://postgres@127.0.0.1/test")
    assert not should_seal("HTTPS_PROXY", "http://u:pw@proxy:3128")  # read by HTTP libraries
    assert not should_seal("PATH", "/usr/bin")


DIFF = f"""diff --git a/src/app.py b/src/app.py
index 1111111..2222222 100644
--- a/src/app.py
+++ b/src/app.py
@@ -10,0 +11,3 @@ def main():
+    client = Client()
+    client.login("{GH}")
+    return client
diff --git a/tests/fixtures/keys.txt b/tests/fixtures/keys.txt
new file mode 100644
--- /dev/null
+++ b/tests/fixtures/keys.txt
@@ -0,0 +1,2 @@
+sk-proj-{"f9F" * 14}
+held-secret-value-42
diff --git "a/docs/caf\\303\\251 notes.md" "b/docs/caf\\303\\251 notes.md"
--- "a/docs/caf\\303\\251 notes.md"
+++ "b/docs/caf\\303\\251 notes.md"
@@ -1,2 +1,3 @@
 unchanged line
-removed {GH}
+AKIAIOSFODNN7EXAMPLE
"""


def test_the_scan_names_file_line_and_kind_never_the_value() -> None:
    known = {"held-secret-value-42": "ANTHROPIC_API_KEY"}
    findings = scan_diff(DIFF, known)
    assert [(f.path, f.line, f.what, f.exact) for f in findings] == [
        ("src/app.py", 12, "a GitHub token", False),
        ("tests/fixtures/keys.txt", 1, "an OpenAI key", False),
        ("tests/fixtures/keys.txt", 2, "the value of ANTHROPIC_API_KEY", True),
        ("docs/café notes.md", 2, "an AWS access key id", False),
    ]
    for finding in findings:
        assert "held-secret-value-42" not in finding.describe() and GH not in finding.describe()


def test_shapes_can_be_ignored_in_fixtures_but_known_values_never() -> None:
    known = {"held-secret-value-42": "ANTHROPIC_API_KEY"}
    findings = scan_diff(DIFF, known, shapes_ignored_in=["tests/fixtures/**"])
    assert [(f.path, f.line) for f in findings] == [
        ("src/app.py", 12),
        ("tests/fixtures/keys.txt", 2),
        ("docs/café notes.md", 2),
    ]


def test_removed_and_context_lines_are_not_findings() -> None:
    diff = f"--- a/x\n+++ b/x\n@@ -1,2 +1,1 @@\n-{GH}\n context {GH}\n"
    assert scan_diff(diff, {}) == []


def test_an_added_line_that_reads_like_a_file_header_is_still_scanned() -> None:
    # An added line `++ x` is `+++ x` in the diff; inside a hunk it is content, not a header.
    diff = (
        "diff --git a/notes.md b/notes.md\n"
        "--- a/notes.md\n"
        "+++ b/notes.md\n"
        "@@ -1,3 +1,4 @@\n"
        " title\n"
        "-- old\n"
        "+++ sk-known-value-123\n"
        "+++ b/fake/path\n"
        " end\n"
    )
    found = scan_diff(diff, {"sk-known-value-123": "THE_KEY"})
    assert [(f.path, f.line, f.what) for f in found] == [("notes.md", 2, "the value of THE_KEY")]
