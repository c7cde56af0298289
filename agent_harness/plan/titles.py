"""An item's title as its plan wrote it: read from markdown-it's inline tokens, not rendered.

An issue's title is shown as plain text on the tracker, so a title keeps what rendering would
drop or change (`__init__.py`, `Vec<String>`, a link's address), and loses only what would make
it read otherwise than it is (zero-width spaces, direction overrides).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from agent_harness.plan.grammar import CHECKBOX, CHECKBOX_ITEM, DONE_MARKS, HEADING_ITEM

if TYPE_CHECKING:
    from markdown_it.token import Token


def plain_text(token: Token) -> str:
    """The visible text of an inline token: markup dropped, line breaks kept."""
    return _inline_text(token, as_written=False)


def title_text(token: Token) -> str:
    """The text of an inline token as its author wrote it, for a title: an issue's title is
    shown as written, not rendered, so only code spans lose their backticks (as GitHub shows
    them) and `*` emphasis its stars. What rendering would drop or change is kept: HTML-like
    text (`Vec<String>`, `a<b and c>d`), underscores read as emphasis (`__init__.py`) and a
    link's address (`[the RFC](https://…)`)."""
    return _inline_text(token, as_written=True)


def _inline_text(token: Token, *, as_written: bool) -> str:
    """An inline token's text, its markup dropped (`plain_text`) or, `as_written`, kept where
    rendering would lose what the author wrote (`title_text`)."""
    children = token.children
    if not children:
        return token.content
    parts: list[str] = []
    links: list[str | None] = []  # the address of each link still open, None for an autolink
    for child in children:
        kind = child.type
        if kind == "text" or kind == "code_inline":
            parts.append(child.content)
        elif kind == "softbreak" or kind == "hardbreak":
            parts.append("\n")
        elif kind == "image":
            parts.append(plain_text(child))
        elif not as_written:
            continue
        elif kind == "html_inline":
            # A comment is a note to the plan's readers, never the title's (`<!-- owner: dee
            # -->` was carried into the issue's title); other HTML-like text is kept.
            if not child.content.startswith("<!--"):
                parts.append(child.content)
            elif parts:
                parts[-1] = parts[-1].rstrip(" ")  # one space is left where it stood
        elif kind in ("strong_open", "strong_close", "em_open", "em_close"):
            parts.append(child.markup if "_" in child.markup else "")
        elif kind == "link_open":
            auto = child.markup == "autolink"
            links.append(None if auto else str(child.attrs.get("href", "")))
            parts.append("" if auto else "[")
        elif kind == "link_close":
            href = links.pop() if links else None
            parts.append("" if href is None else f"]({href})")
    return "".join(parts)


def box_title(inline: Token, plain: re.Match[str]) -> str:
    """A checkbox item's title as written (see `title_text`), when its text as written reads
    as the same id (`plain` matched its plain text); else the plain one (an id in a link)."""
    written = CHECKBOX.match(title_text(inline))
    first = written.group(2).partition("\n")[0].strip() if written else ""
    match = CHECKBOX_ITEM.match(first)
    return match.group(2) if match and match.group(1) == plain.group(1) else plain.group(2)


def struck(text: str) -> bool:
    """Whether a checkbox's text is struck through: whole (`~~T2 Old way~~`), or its title
    right after the id (`T1 ~~Support IE11~~ (dropped)`), as a heading's may be."""
    if text.startswith("~~"):
        return True
    match = CHECKBOX_ITEM.match(text)
    return match is not None and match.group(2).startswith("~~")


def heading_title(written: str, plain: re.Match[str], done: bool) -> str:
    """An item heading's title as written (see `title_text`); `plain` matched its plain text,
    whose title is taken when the written one does not match the same way (an id in a link)."""
    if done:
        written = written.lstrip("".join(DONE_MARKS)).strip()
    match = HEADING_ITEM.match(written)
    same = match is not None and (match.group(1) or match.group(3)) == (
        plain.group(1) or plain.group(3)
    )
    found = match if same and match is not None else plain
    return (found.group(2) if found.group(1) else found.group(4)) or ""


# Characters a title never needs that make it read otherwise than it is: zero-width spaces
# and the byte-order mark, and the bidirectional embeddings, overrides and isolates. (Not the
# joiners, which emoji and some scripts need, nor the marks of right-to-left text.)
HIDDEN = frozenset("\u200b\ufeff\u2060" + "".join(map(chr, range(0x202A, 0x202F)))
                    + "".join(map(chr, range(0x2066, 0x206A))))  # fmt: skip


def without_hidden(title: str) -> tuple[str, str]:
    """`title` without the characters in HIDDEN, and what to say of those it held ("" for none):
    an issue titled with U+202E reads backwards from there."""
    hidden = sorted({char for char in title if char in HIDDEN})
    if not hidden:
        return title, ""
    names = ", ".join(f"U+{ord(char):04X}" for char in hidden)
    kept = "".join(char for char in title if char not in HIDDEN)
    return (
        kept,
        f"held invisible or direction-changing characters ({names}); they are left out of it",
    )
