"""What code the harness did not write may see of the environment."""

from __future__ import annotations

from agent_harness.environment import without_secrets


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
