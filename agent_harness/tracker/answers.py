"""GitHub's answers as the tracker reads them: JSON or a tracker error, a redirect not followed
(nothing was done), and a 422's reasons in GitHub's own words."""

from __future__ import annotations

from typing import Any

from agent_harness.errors import UNREADABLE_JSON, read_json
from agent_harness.secrets.shapes import mask_url
from agent_harness.tracker.protocol import TrackerError

# The redirects; a 304 (not modified, a conditional read) is an answer.
REDIRECTS = frozenset({301, 302, 303, 307, 308})


def json_of(output: str, verb: str, path: str, status: int) -> Any:
    """An answer's JSON (None for no body); TrackerError for a body that is not JSON, such as
    a proxy's sign-in page, on a success; a failure's body is read as its message instead."""
    if not output:
        return None
    try:
        return read_json(output)
    except UNREADABLE_JSON:
        if status >= 300:
            return {"message": output.strip()[:200]}
        shown = " ".join(output.strip()[:60].split())
        raise TrackerError(f"{verb} {path}: the answer is not JSON ({shown!r}...)") from None


def redirected(
    status: int, headers: dict[str, Any], data: Any, verb: str, path: str
) -> TrackerError:
    where = {str(k).lower(): str(v) for k, v in headers.items()}.get("location", "elsewhere")
    message = data.get("message") if isinstance(data, dict) else None
    return TrackerError(
        f"{verb} {path}: GitHub answered {status} {message or 'Redirect'} to {mask_url(where)} "
        "and did nothing; was the repository renamed or moved? Use its new name with --repo",
        status,
    )


def validation_error(error: Any) -> str:
    """One entry of a 422's `errors`, GitHub's reason first when it gives one."""
    if not isinstance(error, dict):
        return str(error)[:200]
    said = error.get("message")
    if isinstance(said, str) and said:
        return said[:200]
    return f"{error.get('field', '?')} {error.get('code', 'invalid')}"
