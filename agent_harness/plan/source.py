"""The plan file as text: bounded reads from a file, a pipe or standard input, and decoding.

Every way a plan can be unreadable (missing, a directory, a device, too big, binary, in an
encoding we cannot tell) becomes one InputError line. A byte-order mark names the encoding, so
UTF-16 from a Windows editor reads like UTF-8; a NUL in the text still means a binary file.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import unicodedata
from pathlib import Path
from typing import BinaryIO

from agent_harness.errors import InputError

MAX_PLAN_BYTES = 20 * 1024 * 1024


"""Plans larger than this are refused before parsing: no hand-written plan is that big."""


def read_plan_text(path: Path) -> str:
    """Read a plan file (or stdin for '-'), turning every way it can be unreadable into one
    clear line. Reads are bounded whatever the source says of its size: a pipe, stdin and
    files that report a size of 0 (/proc, /dev/zero) are read up to the limit and no further."""
    if str(path) == "-":
        import sys

        data = _read_bounded(sys.stdin.buffer, "standard input")
    else:
        data = _read_bounded_file(path)
    return _decode(data, path)


# A byte-order mark names its encoding (what Windows editors write); the longer marks first,
# since UTF-32's little-endian mark begins with UTF-16's.
_BOMS = (
    (b"\xff\xfe\x00\x00", "utf-32-le", "UTF-32"),
    (b"\x00\x00\xfe\xff", "utf-32-be", "UTF-32"),
    (b"\xef\xbb\xbf", "utf-8", "UTF-8"),
    (b"\xff\xfe", "utf-16-le", "UTF-16"),
    (b"\xfe\xff", "utf-16-be", "UTF-16"),
)


def _utf16_without_mark(head: bytes) -> bool:
    """Whether bytes with NULs in them read as UTF-16 text: NULs in every other byte for the
    most part (the high byte of Latin text; not of other scripts, as `é` or `中` are), none
    in the others, and text without control characters once decoded either way."""
    if len(head) < 4:
        return False
    head = head[: len(head) - len(head) % 2]
    odd, even = head[1::2], head[0::2]
    for codec, high, low in (("utf-16-le", odd, even), ("utf-16-be", even, odd)):
        if high.count(0) * 2 < len(high) or low.count(0):
            continue
        # The head may end inside a surrogate pair: its last unit is left out.
        text = (head[:-2] if len(head) > 4 else head).decode(codec, "replace")
        if "\ufffd" not in text and not any(
            unicodedata.category(char) == "Cc" and char not in "\t\r\n" for char in text
        ):
            return True
    return False


def _decode(data: bytes, path: Path) -> str:
    """The text of a plan file, in the encoding its byte-order mark names (UTF-8 without one).
    A NUL in the text means a binary file, whatever mark it starts with."""
    binary = InputError(f"{path} looks like a binary file, not a markdown plan")
    for bom, codec, name in _BOMS:
        if data.startswith(bom):
            try:
                text = data[len(bom) :].decode(codec)
            except UnicodeDecodeError as exc:
                offset = exc.start + len(bom)
                raise InputError(
                    f"{path} is not {name} text (bad bytes at offset {offset})"
                ) from None
            if "\x00" in text[:8192]:
                raise binary
            return text
    if b"\x00" in data[:8192]:
        if _utf16_without_mark(data[:512]):
            raise InputError(
                f"{path} looks like UTF-16 text without a byte-order mark; "
                "save it as UTF-8 (or as UTF-16 with a byte-order mark)"
            )
        raise binary
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(
            f"{path} is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})"
        ) from None


def _read_bounded_file(path: Path) -> bytes:
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise InputError(f"plan file not found: {path}") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise InputError(f"{path} is a loop of symbolic links, not a plan file") from None
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
    if stat.S_ISDIR(mode):
        raise InputError(f"{path} is a directory, not a plan file")
    if not stat.S_ISREG(mode):
        # A named pipe would block for ever waiting for a writer; a device never ends.
        what = "a named pipe" if stat.S_ISFIFO(mode) else "not a regular file"
        raise InputError(f"{path} is {what}; give a plan file, or '-' to read standard input")
    try:
        size = os.stat(path).st_size
        if size > MAX_PLAN_BYTES:
            raise InputError(
                f"{path} is {size / 1024 / 1024:.1f} MB; plans over "
                f"{MAX_PLAN_BYTES // 1024 // 1024} MB are refused"
            )
        with open(path, "rb") as handle:  # bounded too: /proc files say their size is 0
            return _read_bounded(handle, str(path))
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None


def _read_bounded(stream: BinaryIO, name: str) -> bytes:
    data = stream.read(MAX_PLAN_BYTES + 1)
    if len(data) > MAX_PLAN_BYTES:
        limit = MAX_PLAN_BYTES // 1024 // 1024
        raise InputError(f"{name} is over {limit} MB; plans that big are refused")
    return bytes(data)


def write_plan_text(path: Path, text: str) -> None:
    """Replace the plan file at `path` with `text`, in the encoding it was read in (its
    byte-order mark kept) and with its permissions; atomically, so a crash leaves the old plan
    or the new one, never half of either. A symbolic link stays one: its target is replaced.
    (A hard link is not followed: the name given gets the new text, any other keeps the old.)"""
    path = Path(os.path.realpath(path))
    try:
        with open(path, "rb") as handle:
            head = handle.read(4)
        facts = os.stat(path)
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
    mode = stat.S_IMODE(facts.st_mode)
    if not mode & 0o222:  # whoever made it read-only meant it (root could write it anyway)
        raise InputError(f"{path} is read-only; make it writable to have it changed")
    bom, codec = next(((b, c) for b, c, _ in _BOMS if head.startswith(b)), (b"", "utf-8"))
    data = bom + text.encode(codec)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as handle:
            with contextlib.suppress(PermissionError):  # only root may give a file away
                os.fchown(handle.fileno(), facts.st_uid, facts.st_gid)
            os.fchmod(handle.fileno(), mode)
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
        _sync_directory(path.parent)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise InputError(f"cannot write {path}: {exc.strerror or exc}") from None


def _sync_directory(directory: Path) -> None:
    """Make a rename in `directory` survive a crash (where the system allows it)."""
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def line_ends(text: str) -> str:
    """`text` without a byte-order mark, its lines ending in `\n` only."""
    if text.startswith("\ufeff"):
        text = text[1:]
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text
