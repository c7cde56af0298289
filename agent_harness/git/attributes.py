"""Git attributes of paths, as `git check-attr -z` says them."""

from __future__ import annotations


def read_check_attr(out: str) -> dict[str, dict[str, str]]:
    """`git check-attr -z`'s answer (path, name, value, each ended by NUL) by path and name:
    `set`, `unset` or a value; an `unspecified` attribute left out."""
    fields = out.split("\0")
    found: dict[str, dict[str, str]] = {}
    for at in range(0, len(fields) - 2, 3):
        path, name, value = fields[at : at + 3]
        if value != "unspecified":
            found.setdefault(path, {})[name] = value
    return found
