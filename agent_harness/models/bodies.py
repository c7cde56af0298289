"""Reading a provider's HTTP answer defensively: its headers, its JSON, its error, its gist.

Providers answer in JSON, in server-sent events, or (behind a proxy) in an HTML page; the
readers here accept all three and never raise, so a classifier always has something to
quote back to the user, even from a body that is not what the vendor documents.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from agent_harness.errors import UNREADABLE_JSON, read_json
from agent_harness.models.failures import Body, Headers


def lower_headers(headers: Headers | Iterable[tuple[str, str]]) -> dict[str, str]:
    items = headers.items() if isinstance(headers, Mapping) else headers
    return {str(k).lower(): str(v) for k, v in items}


def body_text(body: Body) -> str:
    return body.decode("utf-8", errors="replace") if isinstance(body, bytes) else body


def json_documents(body: Body) -> list[Any]:
    """The JSON value of a body, or every JSON `data:` payload of an SSE stream."""
    text = body_text(body).strip()
    if not text:
        return []
    try:
        return [read_json(text)]
    except UNREADABLE_JSON:
        pass
    docs: list[Any] = []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("data:"):
            continue
        payload = line[5:].strip()
        if not payload or payload == "[DONE]":
            continue
        try:
            docs.append(read_json(payload))
        except UNREADABLE_JSON:
            continue
    return docs


def first_error(docs: list[Any]) -> dict[str, Any] | None:
    """The first `error` object found, accepting Google's list-wrapped bodies."""
    for doc in docs:
        for item in doc if isinstance(doc, list) else [doc]:
            if isinstance(item, dict):
                err = item.get("error")
                if isinstance(err, dict):
                    return err
                if isinstance(err, str):
                    return {"message": err}
    return None


_TAG = re.compile(r"<[^>]+>")


def snippet(body: Body, limit: int = 160) -> str:
    """A short, single-line, tag-free excerpt: enough to recognise a proxy's HTML page."""
    text = body_text(body)
    if "<" in text and ">" in text:
        title = re.search(r"<title>(.*?)</title>", text, re.IGNORECASE | re.DOTALL)
        text = title.group(1) if title else _TAG.sub(" ", text)
    text = " ".join(text.split())
    return text[:limit] + ("…" if len(text) > limit else "")


def error_message(err: dict[str, Any] | None, body: Body, status: int) -> str:
    """The provider's own words for a failure, on one line; an excerpt when it gave none."""
    if err and isinstance(err.get("message"), str) and err["message"].strip():
        return " ".join(str(err["message"]).split())
    text = snippet(body)
    return text or f"HTTP {status} with an empty body"
