"""Lines that look like items and are not: why each is not, so no typo drops work silently.

Each reader takes a heading's (or a checkbox's first line's) text and answers the reason it
is no item, or None when it does not look like one in that way.
"""

from __future__ import annotations

import unicodedata
from typing import TYPE_CHECKING

from agent_harness.plan.grammar import (
    ALMOST_ID,
    DOTTED_ID,
    HEADING_ITEM,
    ID_RE,
    LOOSE_ID,
    dotted_id_reason,
)

if TYPE_CHECKING:
    from markdown_it.token import Token

QUOTED = "inside a quote (`>`), so not an item"


def past_block(tokens: list[Token], index: int) -> int:
    """The index after the block that opens at `index` (a table in a quote: not items)."""
    level, closing = tokens[index].level, tokens[index].type.replace("_open", "_close")
    for at in range(index + 1, len(tokens)):
        if tokens[at].type == closing and tokens[at].level == level:
            return at + 1
    return len(tokens)


def _heading_id(text: str) -> str | None:
    """The id `text` would be a heading item of, if it ends in a digit as ids do."""
    match = HEADING_ITEM.match(text)
    item_id = (match.group(1) or match.group(3)) if match else None
    return item_id if item_id and item_id[-1].isdigit() else None


def dotted(text: str) -> str | None:
    """An id with a dot in it (`T1.1:`): read as it stands it would be item T1, its title
    starting "1:"."""
    match = DOTTED_ID.match(text)
    return None if match is None else dotted_id_reason(match.group(1))


def not_quite_an_id(text: str) -> str | None:
    """An id with lower-case letters (`Ab1:`, `Auth-1:`): ids are upper case."""
    almost = ALMOST_ID.match(text)
    if almost is None or ID_RE.match(almost.group(1)) or not almost.group(1)[-1].isdigit():
        return None
    word = almost.group(1)
    return (
        f"'{word}' is not an item id (ids are upper case, like {word.upper()}); not read as an item"
    )


def hidden_in_an_id(text: str) -> str | None:
    """A heading that would be an item but for invisible characters (a zero-width space, a
    right-to-left override): never taken out silently, as the heading a person sees is then
    not the one the file holds."""
    hidden = sorted({char for char in text if unicodedata.category(char) == "Cf"})
    if not hidden or _heading_id("".join(c for c in text if c not in hidden)) is None:
        return None
    names = ", ".join(f"U+{ord(char):04X}" for char in hidden)
    return f"heading holds invisible characters ({names}); not read as an item"


def struck(text: str) -> str | None:
    """A heading item struck through (`### ~~T11: Dropped~~`)."""
    if not text.startswith("~~") or _heading_id(text.removeprefix("~~")) is None:
        return None
    return "heading is struck through (~~); not read as an item"


def loose(text: str) -> str | None:
    """A heading that starts with an id but has no separator after it (`## Q3 goals`)."""
    match = LOOSE_ID.match(text)
    if match is None or not match.group(1)[-1].isdigit():
        return None
    if not any(char.isalpha() for char in match.group(1)):
        return None
    return (
        f"heading starts with '{match.group(1)}' but has no ':', '.' or '—' after it; "
        "not read as an item"
    )


def heading_lookalike(text: str) -> str | None:
    """Why a heading that is no item looks like one, if it does."""
    for reader in (not_quite_an_id, hidden_in_an_id, struck, loose):
        reason = reader(text)
        if reason is not None:
            return reason
    return None
