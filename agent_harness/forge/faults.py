"""Faults the forge can be told to inject, so clients can be tested against a bad day at GitHub.

A fault is a rule: what to do (kind), which requests it hits (method and path pattern, matched
against the concrete path or the route template) and how many times. Rules are consumed in the
order they were added; the first that matches a request is used up by it.
"""

from __future__ import annotations

import fnmatch
import threading
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from agent_harness.forge.errors import ApiError


class FaultKind(StrEnum):
    SECONDARY_RATE_LIMIT = "secondary_rate_limit"  # 403 + retry-after, GitHub's message
    SECONDARY_RATE_LIMIT_429 = "secondary_rate_limit_429"
    PRIMARY_RATE_LIMIT = "primary_rate_limit"  # 403, x-ratelimit-remaining: 0
    STATUS = "status"  # a bare 5xx such as 502 or 503
    LATENCY = "latency"  # answer normally after `delay_s`
    DROP = "drop"  # close the connection without a response
    # Do the work, then close without answering: the client cannot tell whether its write landed.
    DROP_AFTER = "drop_after"
    # 401 "Bad credentials", as GitHub answers a token revoked or expired since it last worked.
    BAD_CREDENTIALS = "bad_credentials"
    # An answer given whole (`status`, `headers`, a JSON `body` or a `raw` text): GitHub's own
    # recorded answers, such as a 307 for a renamed repository or an HTML page with a 200.
    REPLY = "reply"


@dataclass
class Fault:
    kind: FaultKind
    method: str = "*"
    path: str = "*"
    count: int | None = 1  # None = every matching request until cleared
    status: int = 503
    retry_after: int = 60
    delay_s: float = 0.0
    reset_in_s: int = 3600
    headers: dict[str, str] | None = None  # REPLY only
    body: Any = None  # REPLY: sent as JSON
    raw: str | None = None  # REPLY: sent as it is, as text/html, instead of `body`

    def matches(self, method: str, path: str, template: str | None) -> bool:
        if self.method != "*" and self.method.upper() != method.upper():
            return False
        if fnmatch.fnmatchcase(path, self.path):
            return True
        return template is not None and fnmatch.fnmatchcase(template, self.path)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind.value,
            "method": self.method,
            "path": self.path,
            "count": self.count,
            "status": self.status,
            "retry_after": self.retry_after,
            "delay_s": self.delay_s,
            "reset_in_s": self.reset_in_s,
            "headers": self.headers,
            "body": self.body,
            "raw": self.raw,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Fault:
        try:
            kind = FaultKind(data["kind"])
        except (KeyError, ValueError) as exc:
            kinds = ", ".join(k.value for k in FaultKind)
            raise ApiError(422, f"kind must be one of: {kinds}") from exc
        fields = (
            "method", "path", "count", "status", "retry_after", "delay_s", "reset_in_s",
            "headers", "body", "raw",
        )  # fmt: skip
        return cls(kind=kind, **{k: data[k] for k in fields if k in data})


class Faults:
    """The forge's fault rules; thread-safe because requests are served on many threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rules: list[Fault] = []

    def add(self, fault: Fault) -> Fault:
        with self._lock:
            self._rules.append(fault)
        return fault

    def inject(self, kind: FaultKind | str, method: str = "*", path: str = "*", **kw: Any) -> Fault:
        """Add a rule, e.g. `inject("status", "POST", "*/issues", count=2, status=502)`."""
        return self.add(Fault(kind=FaultKind(kind), method=method, path=path, **kw))

    def clear(self) -> None:
        with self._lock:
            self._rules.clear()

    def pending(self) -> list[Fault]:
        with self._lock:
            return list(self._rules)

    def take(self, method: str, path: str, template: str | None) -> Fault | None:
        """The fault this request meets, if any; a counted rule is used up."""
        with self._lock:
            for rule in self._rules:
                if rule.matches(method, path, template):
                    if rule.count is not None:
                        rule.count -= 1
                        if rule.count <= 0:
                            self._rules.remove(rule)
                    return rule
        return None
