"""The size `worktrees` reports is room taken on disk, not the files' lengths."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_harness.git.cleanup import disk_size

pytestmark = pytest.mark.unit


def test_a_sparse_file_counts_the_room_it_takes_not_its_length(tmp_path: Path) -> None:
    sparse = tmp_path / "sparse.bin"
    with sparse.open("wb") as handle:
        handle.truncate(1 << 40)  # a terabyte long, nothing written
    (tmp_path / "real.txt").write_bytes(b"x" * 10_000)
    (tmp_path / "link").symlink_to(sparse)
    assert 10_000 <= disk_size(tmp_path) < 1 << 20
