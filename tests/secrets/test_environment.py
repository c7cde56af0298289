"""What code the harness did not write may see of the environment."""

from __future__ import annotations

import pytest

from agent_harness.secrets.environment import filter_env, without_secrets

pytestmark = pytest.mark.unit

GH = "ghp_" + "a1B2" * 9  # the shape of a classic GitHub token, 36 characters after the prefix


def test_secrets_are_left_out_and_the_rest_kept() -> None:
    env = {
        "PATH": "/bin",
        "HOME": "/home/me",
        "GH_TOKEN": "ghp_x",
        "GITHUB_TOKEN": "ghs_x",
        "OPENAI_API_KEY": "sk-x",
        "AGENT_HARNESS_DB": "postgresql://u:p@h/db",
        "AWS_SECRET_ACCESS_KEY": "x",
        "NPM_CONFIG_PASSWORD": "x",
        "CLAUDE_CODE_OAUTH_TOKEN": "x",
        "LANG": "C.UTF-8",
    }
    assert without_secrets(env) == {"PATH": "/bin", "HOME": "/home/me", "LANG": "C.UTF-8"}


def test_a_credential_under_a_harmless_name_is_withheld_by_its_shape() -> None:
    env = {
        "PATH": "/bin",
        "DATABASE_URL": "postgresql://app:PASSWORD@db.internal/app",
        "CACHE_URL": "redis://:s3cret@cache:6379/0",
        "PLAIN_URL": "postgresql://postgres@127.0.0.1:5432/test",  # no password: kept
        "DEPLOY_HELPER": GH,
        "ANTHROPIC_FALLBACK": "sk-ant-api03-" + "x" * 30,
        "PRIVATE": "-----BEGIN OPENSSH PRIVATE KEY-----\nabc",
    }
    filtered = filter_env(env)
    assert filtered.env == {"PATH": "/bin", "PLAIN_URL": env["PLAIN_URL"]}
    assert filtered.withheld == (
        "ANTHROPIC_FALLBACK",
        "CACHE_URL",
        "DATABASE_URL",
        "DEPLOY_HELPER",
        "PRIVATE",
    )


def test_a_copy_of_a_known_secret_is_withheld_whatever_it_looks_like() -> None:
    env = {"PATH": "/bin", "TRACKER_AUTH": "opaque-value-1234", "MIRROR": "opaque-value-1234"}
    # The value is not shaped like a key, but the harness holds it as a secret elsewhere.
    filtered = filter_env(env, known=["opaque-value-1234"])
    assert filtered.env == {"PATH": "/bin"}
    assert set(filtered.withheld) == {"TRACKER_AUTH", "MIRROR"}
    # Held under a secret name in the same environment counts as known, too.
    leaked = {"SERVICE_TOKEN": "another-opaque-99", "COPY": "another-opaque-99", "LANG": "C"}
    assert without_secrets(leaked) == {"LANG": "C"}


def test_a_person_can_pass_named_variables_on_purpose() -> None:
    env = {
        "PATH": "/bin",
        "DATABASE_URL": "postgresql://app:PASSWORD@db/app",
        "TEST_DB_PASSWORD": "pw-for-tests",
        "GH_TOKEN": GH,
    }
    kept = without_secrets(env, allow=["DATABASE_URL", "TEST_DB_*"])
    assert kept == {
        "PATH": "/bin",
        "DATABASE_URL": env["DATABASE_URL"],
        "TEST_DB_PASSWORD": "pw-for-tests",
    }


def test_short_values_of_secret_names_are_not_treated_as_known_values() -> None:
    # "1" under a TOKEN name must not withhold every variable whose value is "1".
    env = {"FEATURE_TOKEN_CHECK": "1", "WORKERS": "1", "AGENT_HARNESS_STATE_DIR": "/srv/state"}
    assert filter_env(env).env == {"WORKERS": "1"}
    assert filter_env({"X": "/srv/state"}, known=[]).env == {"X": "/srv/state"}


def test_git_settings_in_the_environment_pass_or_are_withheld_as_one_group() -> None:
    # GIT_CONFIG_KEY_0 was withheld for its name ("KEY") and GIT_CONFIG_COUNT kept: every git
    # command in a check then failed ("missing config key GIT_CONFIG_KEY_0").
    plain = {
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "core.autocrlf",
        "GIT_CONFIG_VALUE_0": "x",
    }
    assert filter_env(plain).env == plain
    for key, value in [
        ("http.https://github.com/.extraheader", "AUTHORIZATION: basic eC1hY2Nlc3M="),
        ("credential.helper", "store --file=/tmp/creds"),
        ("url.x.insteadOf", "https://user:pass1234@github.com/"),
    ]:
        given = {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": key, "GIT_CONFIG_VALUE_0": value}
        found = filter_env({**given, "PATH": "/bin"})
        assert found.env == {"PATH": "/bin"} and sorted(found.withheld) == sorted(given), key
