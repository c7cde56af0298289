"""The state folder kept out of the user's `git status`, whatever their exclude file holds."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent_harness.git.ignore import keep_out_of_git
from tests.shared.git import git

pytestmark = pytest.mark.integration


def test_any_bytes_in_the_exclude_file_and_any_name_of_folder_are_kept(tmp_path: Path) -> None:
    # An exclude file that is not UTF-8 (git allows any bytes) made the first command run in
    # the clone end in a traceback; a folder named `st[1]*` was listed as a glob that did not
    # match it, and stayed in `git status`.
    clone = tmp_path / "clone"
    git(tmp_path, "init", "-q", str(clone))
    exclude = clone / ".git" / "info" / "exclude"
    exclude.write_bytes(b"# caf\xe9\n")
    for name in ("st[1]*", "plain", os.fsdecode(b"odd\xff")):
        folder = clone / name
        folder.mkdir()
        (folder / "harness.sqlite").write_text("x")
        keep_out_of_git(folder)
        keep_out_of_git(folder)  # a second time adds no second line
    assert git(clone, "status", "--porcelain", "--untracked-files=all") == ""
    assert exclude.read_bytes().startswith(b"# caf\xe9\n")
    assert exclude.read_bytes().count(b"/plain/") == 1
