#!/usr/bin/env python3
"""A scripted, deterministic coding agent for the `tally` example project.

agent-harness runs it like any CLI agent: in a terminal session, inside the item's worktree,
with the prompt in a file (`--prompt-file PATH`). It reads the item id from the prompt and
writes the code for that item. It makes three mistakes on purpose, so the demo shows the
harness's loops: T2's first attempt fails its check (a trailing newline counted as a line),
T4's first attempt uses Counter.most_common, whose tie order a reviewer refuses, and T6's
README passes the harness's checks but fails the project's CI (examples/ci/tally_ci.py)
once, so its pull request goes back to the agent for a round. When the prompt carries
feedback from a previous attempt, it writes the corrected version.

Standard library only. Usage: tally_agent.py --prompt-file PROMPT.md [--think SECONDS]
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

WORDS = '''"""Counting words."""


def word_count(text: str) -> int:
    """Number of runs of non-whitespace characters in `text`."""
    _refuse_binary(text)
    return len(text.split())


def _refuse_binary(text: str) -> None:
    """Binary input is refused (filled in by T7)."""
'''

WORDS_TEST = """import unittest

from tally.words import word_count


class WordCountTest(unittest.TestCase):
    def test_counts_runs_of_non_whitespace(self) -> None:
        self.assertEqual(word_count("one two  three\\nfour"), 4)

    def test_empty_text_has_no_words(self) -> None:
        self.assertEqual(word_count(""), 0)
        self.assertEqual(word_count("   \\n"), 0)


if __name__ == "__main__":
    unittest.main()
"""

LINES_WRONG = '''"""Counting lines."""

from tally.words import _refuse_binary


def line_count(text: str) -> int:
    """Number of lines in `text`."""
    _refuse_binary(text)
    if not text:
        return 0
    return text.count("\\n") + 1
'''

LINES_RIGHT = '''"""Counting lines."""

from tally.words import _refuse_binary


def line_count(text: str) -> int:
    """Number of lines in `text`; a trailing newline does not start a new line."""
    _refuse_binary(text)
    return len(text.splitlines())
'''

LINES_TEST = """import unittest

from tally.lines import line_count


class LineCountTest(unittest.TestCase):
    def test_empty_and_single_line(self) -> None:
        self.assertEqual(line_count(""), 0)
        self.assertEqual(line_count("a"), 1)

    def test_trailing_newline_is_not_a_line(self) -> None:
        self.assertEqual(line_count("a\\nb\\n"), 2)


if __name__ == "__main__":
    unittest.main()
"""

TOP_FIRST_SEEN = '''"""The most frequent words."""

from collections import Counter

from tally.words import _refuse_binary


def top_words(text: str, n: int) -> list[tuple[str, int]]:
    """The `n` most frequent lower-cased words with their counts."""
    _refuse_binary(text)
    return Counter(text.lower().split()).most_common(n)
'''

TOP_ALPHABETICAL = '''"""The most frequent words."""

from collections import Counter

from tally.words import _refuse_binary


def top_words(text: str, n: int) -> list[tuple[str, int]]:
    """The `n` most frequent lower-cased words with counts; ties in alphabetical order."""
    _refuse_binary(text)
    counts = Counter(text.lower().split())
    return sorted(counts.items(), key=lambda pair: (-pair[1], pair[0]))[:n]
'''

TOP_TEST = """import unittest

from tally.top import top_words


class TopWordsTest(unittest.TestCase):
    def test_most_frequent_first(self) -> None:
        self.assertEqual(top_words("b a b c b a", 2), [("b", 3), ("a", 2)])

    def test_lower_cases_words(self) -> None:
        self.assertEqual(top_words("A a", 1), [("a", 2)])
"""

TOP_TIE_TEST = """
    def test_ties_in_alphabetical_order(self) -> None:
        self.assertEqual(top_words("pear apple pear apple fig", 2), [("apple", 2), ("pear", 2)])
"""

CLI = '''"""The `tally` command: print word, line and top-word counts of a file or stdin."""

import sys

from tally.lines import line_count
from tally.top import top_words
from tally.words import word_count


def main(argv: list[str] | None = None) -> int:
    """Print counts for the file named in argv (or stdin); return an exit code."""
    args = sys.argv[1:] if argv is None else argv
    text = open(args[0], encoding="utf-8").read() if args else sys.stdin.read()
    print(f"words: {word_count(text)}")
    print(f"lines: {line_count(text)}")
    for word, count in top_words(text, 3):
        print(f"{count:>5} {word}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
'''

CLI_TEST = """import contextlib
import io
import tempfile
import unittest

from tally.cli import main


class CliTest(unittest.TestCase):
    def test_prints_all_counts(self) -> None:
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as handle:
            handle.write("a b a\\nc\\n")
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            self.assertEqual(main([handle.name]), 0)
        self.assertIn("words: 4", out.getvalue())
        self.assertIn("lines: 2", out.getvalue())
        self.assertIn("    2 a", out.getvalue())
"""

README_USAGE = """
## Usage

    python -m tally.cli notes.txt      # or pipe text in: cat notes.txt | python -m tally.cli

prints the number of words and lines and the three most frequent words.
"""

README_EXAMPLE = """
For example, `echo "one two two" | python -m tally.cli` prints the counts of that line.
"""

BINARY_GUARD = '''def _refuse_binary(text: str) -> None:
    """Binary input is refused: a NUL character means this is not text."""
    if "\\x00" in text:
        raise ValueError("tally reads text, and this input contains a NUL character")
'''

BINARY_TEST = """import unittest

from tally.lines import line_count
from tally.top import top_words
from tally.words import word_count


class BinaryInputTest(unittest.TestCase):
    def test_every_counter_refuses_nul(self) -> None:
        for call in (word_count, line_count, lambda text: top_words(text, 1)):
            with self.assertRaisesRegex(ValueError, "NUL"):
                call("a\\x00b")
"""


def write(path: str, text: str) -> None:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    print(f"wrote {path}")


def answer_line_comments(prompt: str) -> None:
    """A reviewer's line comments from a PR round ("- path:line: text") are answered where
    they were made: a comment saying what was asked goes above that line."""
    asked = re.findall(r"^- ([\w./-]+\.py):(\d+): (.+)$", prompt, re.MULTILINE)
    for path, line, text in sorted(asked, key=lambda a: -int(a[1])):
        target = Path(path)
        if not target.is_file():
            continue
        lines = target.read_text(encoding="utf-8").splitlines(keepends=True)
        at = min(int(line), len(lines) + 1) - 1
        indent = re.match(r"\s*", lines[at]).group(0) if at < len(lines) else ""
        lines.insert(at, f"{indent}# Review: {text}\n")
        target.write_text("".join(lines), encoding="utf-8")
        print(f"answered the comment on {path}:{line}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompt-file", required=True, type=Path)
    parser.add_argument(
        "--think", type=float, default=0.0, help="seconds to wait first, like a real agent"
    )
    args = parser.parse_args()
    prompt = args.prompt_file.read_text(encoding="utf-8")
    match = re.search(r"^# Work item ([A-Z][A-Z0-9-]*\d)\b", prompt, re.MULTILINE)
    if not match:
        print("tally_agent: no '# Work item ID' heading in the prompt", file=sys.stderr)
        return 2
    item = match.group(1)
    retry = "## Feedback from the previous attempt" in prompt
    print(f"tally_agent: working on {item}{' (again, with feedback)' if retry else ''}")
    if args.think > 0:
        print(f"tally_agent: thinking for {args.think:g} s", flush=True)
        time.sleep(args.think)
    if item == "T1":
        write("tally/words.py", WORDS)
        write("tests/test_words.py", WORDS_TEST)
    elif item == "T2":
        write("tally/lines.py", LINES_RIGHT if retry else LINES_WRONG)
        write("tests/test_lines.py", LINES_TEST)
    elif item == "T4":
        write("tally/top.py", TOP_ALPHABETICAL if retry else TOP_FIRST_SEEN)
        write("tests/test_top.py", TOP_TEST + (TOP_TIE_TEST if retry else ""))
    elif item == "T5":
        write("tally/cli.py", CLI)
        write("tests/test_cli.py", CLI_TEST)
    elif item == "T6":
        readme = Path("README.md").read_text(encoding="utf-8")
        if "## Usage" not in readme:
            write("README.md", readme.rstrip("\n") + "\n" + README_USAGE)
        if "PR #" in prompt and "For example" not in readme:  # CI asked for an example run
            readme = Path("README.md").read_text(encoding="utf-8")
            write("README.md", readme.rstrip("\n") + "\n" + README_EXAMPLE)
    elif item == "T7":
        words = Path("tally/words.py").read_text(encoding="utf-8")
        start = words.index("def _refuse_binary")
        write("tally/words.py", words[:start] + BINARY_GUARD)
        write("tests/test_binary.py", BINARY_TEST)
    else:
        print(f"tally_agent: I do not know how to do {item}", file=sys.stderr)
        return 3
    answer_line_comments(prompt)
    print("tally_agent: done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
