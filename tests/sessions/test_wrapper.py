"""The session wrapper's file: compiled once for this interpreter, written again when stale."""

from __future__ import annotations

import importlib.util
import marshal
from pathlib import Path

import pytest

from agent_harness.sessions.wrapper import WRAPPER_SOURCE, _write_wrapper

pytestmark = pytest.mark.unit


def test_the_wrapper_is_compiled_once_and_a_stale_one_is_written_again(tmp_path: Path) -> None:
    path = _write_wrapper(tmp_path)
    data = path.read_bytes()
    assert data[:4] == importlib.util.MAGIC_NUMBER
    assert data[8:16] == importlib.util.source_hash(WRAPPER_SOURCE.encode("utf-8"))
    code = marshal.loads(data[16:])
    assert code.co_filename == ".agent-harness-session-wrapper.py"
    stamp = path.stat().st_mtime_ns
    assert _write_wrapper(tmp_path) == path and path.stat().st_mtime_ns == stamp  # kept
    # One another version of the harness (or another Python) wrote: replaced, not run.
    path.write_bytes(importlib.util.MAGIC_NUMBER + bytes(12) + b"old")
    assert _write_wrapper(tmp_path).read_bytes() == data
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary file left
