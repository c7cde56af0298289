"""The demo's folder, refused where deleting it would reach what the demo never made, and
paths shown in the commands it prints quoted so they paste back and never reach the terminal
as escape sequences."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_harness.demo.run import STAMP, prepare_workdir
from agent_harness.errors import HarnessError
from agent_harness.plan.model import shell_word

pytestmark = pytest.mark.unit


def test_a_demo_dir_that_is_a_symbolic_link_is_refused_and_its_target_kept(
    tmp_path: Path,
) -> None:
    # Before: shutil.rmtree refused the link with an OSError (exit 70); deleting through it
    # would have deleted a folder the demo never made.
    real = tmp_path / "real"
    real.mkdir()
    (real / STAMP).write_text("made by agent-harness demo; safe to delete\n")
    (real / "keep.txt").write_text("mine")
    link = tmp_path / "link"
    link.symlink_to(real)
    with pytest.raises(HarnessError, match="is a symbolic link; choose another --dir"):
        prepare_workdir(link)
    assert (real / "keep.txt").read_text() == "mine"


@pytest.mark.parametrize(
    ("name", "word"),
    [
        ("plain/dir", "plain/dir"),
        ("two words", "'two words'"),
        ("bad\udcff\x1b[31mname", "$'bad\\xff\\x1b[31mname'"),
    ],
)
def test_a_path_in_a_command_to_paste_is_quoted_and_never_an_escape_sequence(
    name: str, word: str
) -> None:
    assert shell_word(name) == word


def test_an_empty_folder_is_taken_and_a_second_demo_of_the_same_folder_is_refused(
    tmp_path: Path,
) -> None:
    import os

    # An empty folder (made by `mkdir`, or left by a demo that failed at once) was refused
    # for ever as "not made by the demo".
    folder = tmp_path / "demo"
    folder.mkdir()
    held = prepare_workdir(folder)
    try:
        (folder / "harness.sqlite").write_text("the first demo's")
        # A second demo of the folder deleted the first's files while it ran.
        with pytest.raises(HarnessError, match=r"another demo is running in .*demo; wait"):
            prepare_workdir(folder)
        assert (folder / "harness.sqlite").read_text() == "the first demo's"
    finally:
        os.close(held)
    os.close(prepare_workdir(folder))  # once it is over, the folder starts clean again
    assert sorted(p.name for p in folder.iterdir()) == [STAMP]
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep")
    with pytest.raises(HarnessError, match="exists and was not made by the demo"):
        prepare_workdir(tmp_path / "mine")
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep"
