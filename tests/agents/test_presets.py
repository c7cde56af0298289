"""Agent presets: exact command lines, custom templates, environment allow-lists, prompts."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_harness.agents.presets import PRESETS, preset_for, scrub_env
from agent_harness.agents.runner import looks_like_prompt, strip_terminal_codes
from agent_harness.errors import UsageError

pytestmark = pytest.mark.unit


@pytest.fixture
def prompt_file(tmp_path: Path) -> Path:
    path = tmp_path / "prompt.md"
    path.write_text("Fix T3.\nKeep the API.", encoding="utf-8")
    return path


def test_claude_gets_the_prompt_text_as_one_argument(prompt_file: Path, tmp_path: Path) -> None:
    argv = PRESETS["claude"].command(prompt_file, tmp_path, None)
    assert argv == [
        "claude",
        "-p",
        "Fix T3.\nKeep the API.",
        "--output-format",
        "stream-json",
        "--verbose",
        "--permission-mode",
        "acceptEdits",
    ]
    with_model = PRESETS["claude"].command(prompt_file, tmp_path, "sonnet")
    assert with_model[-2:] == ["--model", "sonnet"]


def test_codex_puts_options_before_the_prompt_and_reads_no_stdin(
    prompt_file: Path, tmp_path: Path
) -> None:
    preset = PRESETS["codex"]
    assert preset.command(prompt_file, tmp_path, "gpt-5-codex") == [
        "codex",
        "exec",
        "--json",
        "--sandbox",
        "workspace-write",
        "--model",
        "gpt-5-codex",
        "Fix T3.\nKeep the API.",
    ]
    assert preset.stdin_devnull


def test_gemini_aider_and_opencode_command_lines(prompt_file: Path, tmp_path: Path) -> None:
    assert PRESETS["gemini"].command(prompt_file, tmp_path, None) == [
        "gemini",
        "--yolo",
        "--skip-trust",
        "--output-format",
        "stream-json",
        "-p",
        "Fix T3.\nKeep the API.",
    ]
    assert PRESETS["aider"].command(prompt_file, tmp_path, None) == [
        "aider",
        "--yes-always",
        "--no-auto-commits",
        "--no-pretty",
        "--no-check-update",
        "--no-show-release-notes",
        "--analytics-disable",
        "--no-gitignore",
        "--message-file",
        str(prompt_file),
    ]
    assert PRESETS["opencode"].command(prompt_file, tmp_path, "anthropic/claude-sonnet-4-5") == [
        "opencode",
        "run",
        "--model",
        "anthropic/claude-sonnet-4-5",
        "--format",
        "json",
        "--print-logs",
        "--log-level",
        "ERROR",
        "Fix T3.\nKeep the API.",
    ]


def test_every_preset_has_a_vendor_key_and_an_install_hint() -> None:
    for name, preset in PRESETS.items():
        assert preset.name == name
        assert preset.api_key_env, name
        assert preset.install_hint, name
        assert preset.template[0] == preset.binary


def test_a_custom_template_fills_its_placeholders(prompt_file: Path, tmp_path: Path) -> None:
    preset = preset_for("mytool --prompt-file {prompt_file} --cwd {worktree} -m {model}")
    assert preset.name == "custom"
    assert preset.binary == "mytool"
    assert preset.api_key_env == ()
    assert preset.command(prompt_file, tmp_path / "wt", "m1") == [
        "mytool",
        "--prompt-file",
        str(prompt_file),
        "--cwd",
        str(tmp_path / "wt"),
        "-m",
        "m1",
    ]
    with pytest.raises(UsageError, match="needs a model"):
        preset.command(prompt_file, tmp_path, None)


def test_a_custom_template_must_say_where_the_prompt_goes() -> None:
    with pytest.raises(UsageError, match=r"\{prompt_file\}"):
        preset_for("mytool --cwd {worktree}")
    with pytest.raises(UsageError, match="unknown agent") as one_word:
        preset_for("claud")
    # A one-word tool of one's own is told how to write it as a template.
    assert "'claud --prompt-file {prompt_file}'" in one_word.value.message
    with pytest.raises(UsageError, match="cannot read"):
        preset_for("mytool 'unclosed {prompt}")


def test_a_custom_template_naming_no_placeholder_is_refused_but_a_shells_own_braces_pass() -> None:
    # `{nosuch}` reached the agent as those very characters.
    with pytest.raises(UsageError, match=r"names \{nosuch\}, which is no placeholder; known: "):
        preset_for("mytool --prompt-file {prompt_file} --out {nosuch}")
    # A template that runs a shell itself may use the shell's own `${NAME}`.
    preset = preset_for('sh -c "mytool --home ${HOME} < {prompt_file}"')
    assert preset.template == ("sh", "-c", "mytool --home ${HOME} < {prompt_file}")


def test_a_prompt_too_long_for_one_argument_is_refused(tmp_path: Path) -> None:
    big = tmp_path / "big.md"
    big.write_text("x" * 200_000, encoding="utf-8")
    with pytest.raises(UsageError, match="too long"):
        PRESETS["claude"].command(big, tmp_path, None)
    # A file-based preset has no such limit.
    assert PRESETS["aider"].command(big, tmp_path, None)[-1] == str(big)


SOURCE = {
    "PATH": "/usr/bin",
    "HOME": "/home/u",
    "LANG": "en_GB.UTF-8",
    "LC_TIME": "C",
    "TERM": "xterm",
    "ANTHROPIC_API_KEY": "a",
    "ANTHROPIC_BASE_URL": "http://127.0.0.1:1",
    "OPENAI_API_KEY": "o",
    "GEMINI_API_KEY": "g",
    "GH_TOKEN": "t",
    "GITHUB_TOKEN": "t",
    "AGENT_HARNESS_TOKEN": "t",
    "DATABASE_URL": "postgres://secret",
}


def test_each_preset_sees_only_its_own_vendors_key() -> None:
    claude = scrub_env(SOURCE, PRESETS["claude"])
    assert set(claude) == {
        "PATH",
        "HOME",
        "LANG",
        "LC_TIME",
        "TERM",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
    }
    assert "OPENAI_API_KEY" in scrub_env(SOURCE, PRESETS["codex"])
    assert "ANTHROPIC_API_KEY" not in scrub_env(SOURCE, PRESETS["codex"])
    assert "GEMINI_API_KEY" in scrub_env(SOURCE, PRESETS["gemini"])
    assert "OPENAI_API_KEY" not in scrub_env(SOURCE, PRESETS["gemini"])


def test_extra_allow_passes_more_but_never_a_tracker_token() -> None:
    env = scrub_env(SOURCE, PRESETS["claude"], extra_allow=["DATABASE_*"])
    assert env["DATABASE_URL"] == "postgres://secret"
    for refused in ("GH_TOKEN", "GITHUB_TOKEN", "AGENT_HARNESS_TOKEN", "*"):
        with pytest.raises(UsageError, match="refusing"):
            scrub_env(SOURCE, PRESETS["claude"], extra_allow=[refused])
    custom = preset_for("tool {prompt_file}")
    assert "GH_TOKEN" not in scrub_env(SOURCE, custom, extra_allow=["G*"])


@pytest.mark.parametrize(
    "screen",
    [
        "Apply these changes? [y/N] ",
        "Do you want to continue (y/n)",
        "Enter a commit message:",
        "> ",
        "\x1b[1mProceed?\x1b[0m\n\n",
        "Overwrite file? (yes/no)",
    ],
)
def test_questions_on_screen_are_recognised(screen: str) -> None:
    assert looks_like_prompt(screen)


@pytest.mark.parametrize("screen", ["", "Running tests...", "Wrote 3 files.", "  \n  "])
def test_progress_is_not_a_question(screen: str) -> None:
    assert not looks_like_prompt(screen)


def test_terminal_codes_are_stripped() -> None:
    assert strip_terminal_codes("\x1b[31mred\x1b[0m\r\nnext\r") == "red\nnext\n"
