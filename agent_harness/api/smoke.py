"""The smoke test after a deploy: is the server healthy, and is it able to run anything?

Read-only and safe to run against production at any time: it sends GETs, and for each
registered project a plan parse and a dry-run sync (which read the clone and the tracker and
write nothing). "Healthy" means the server answers, refuses a missing token, accepts the right
one and reads its database. "Able to run" means it supervises worker pools and every registered
project's clone, plan and tracker can be reached.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import httpx

from agent_harness.errors import UsageError
from agent_harness.plan.model import shown_path
from agent_harness.secrets.shapes import mask_url


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    needed_for: str  # "healthy" or "able to run"


@dataclass
class SmokeReport:
    url: str
    checks: list[Check] = field(default_factory=list)

    @property
    def healthy(self) -> bool:
        return all(c.ok for c in self.checks if c.needed_for == "healthy")

    @property
    def able_to_run(self) -> bool:
        return self.healthy and all(c.ok for c in self.checks)

    def as_json(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "healthy": self.healthy,
            "able_to_run": self.able_to_run,
            "checks": [c.__dict__ for c in self.checks],
        }


def _detail(response: httpx.Response) -> str:
    try:
        return str(response.json().get("detail", response.status_code))
    except ValueError:
        return f"HTTP {response.status_code}"


def checked_url(url: str) -> str:
    """`url` if it can name a server to test (http or https, with a host); a UsageError,
    which shows it with any password masked, if not."""
    shown = shown_path(mask_url(url))
    if len(shown) > 200:
        shown = shown[:200] + "..."
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise UsageError(f"{shown} is not a URL: {exc}") from None
    except UnicodeError:
        raise UsageError(f"{shown} is not a URL: it holds bytes that are not text") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise UsageError(f"{shown} is not a server's address: give http://HOST:PORT")
    if parsed.query or parsed.fragment:  # the paths it tries were joined after `?x=1`
        raise UsageError(
            f"{shown} has a query or fragment: give the server's address, http://HOST:PORT "
            "(and any path it is served under)"
        )
    if parsed.port is not None and not 0 < parsed.port < 65536:  # else "connection refused"
        raise UsageError(f"{shown} names port {parsed.port}: a port is 1 to 65535")
    return url


def checked_token(token: str) -> str:
    """`token` if it can be sent as a bearer token; a UsageError that never shows it if not."""
    if not token:
        raise UsageError("HARNESS_TOKEN is not set: the smoke test needs the server's token")
    if not (token.isascii() and token.isprintable()) or any(c.isspace() for c in token):
        raise UsageError(
            "HARNESS_TOKEN holds spaces, line breaks or characters outside ASCII, "
            "so it cannot be sent as a bearer token"
        )
    return token


def smoke(url: str, token: str, *, client: httpx.Client | None = None) -> SmokeReport:
    """Run every check against the server at `url` (through `client` when given, e.g. an
    in-process one); never raises for what it finds, only for a URL or token it cannot use.
    The report shows the URL with any password masked."""
    checked_token(token)
    base = checked_url(url).rstrip("/")
    report = SmokeReport(mask_url(base))
    if client is not None:
        _checks(client, token, report)
        return report
    with httpx.Client(base_url=base, timeout=30.0) as session:
        _checks(session, token, report)
    return report


def _checks(client: httpx.Client, token: str, report: SmokeReport) -> None:
    add = report.checks.append
    auth = {"Authorization": f"Bearer {token}"}
    try:
        health = client.get("/healthz")
    except httpx.HTTPError as exc:
        told = str(exc).replace(str(client.base_url), report.url) or type(exc).__name__
        add(Check("answers", False, f"no answer: {told}", "healthy"))
        return
    add(Check("answers", health.status_code == 200, f"/healthz {health.status_code}", "healthy"))
    refused = client.get("/api/summary")
    add(Check("refuses no token", refused.status_code == 401, f"{refused.status_code}", "healthy"))
    summary = client.get("/api/summary", headers=auth)
    if summary.status_code != 200:
        add(Check("token and database", False, _detail(summary), "healthy"))
        return
    facts = summary.json()
    add(Check("token and database", True, f"{facts['projects']} projects", "healthy"))
    supervised = facts["mode"] == "supervised"
    add(Check("worker pools", supervised, f"mode {facts['mode']}", "able to run"))
    listed = client.get("/api/projects", headers=auth).json()["projects"]
    registered = [p["id"] for p in listed if p["registered"]]
    add(Check("projects", bool(registered), f"{len(registered)} registered", "able to run"))
    for project in registered:
        _project_checks(client, auth, project, add)


def _project_checks(client: httpx.Client, auth: dict[str, str], project: str, add: Any) -> None:
    parsed = client.post("/api/plan/parse", json={"project": project}, headers=auth)
    ok = parsed.status_code == 200
    told = f"{len(parsed.json()['items'])} items" if ok else _detail(parsed)
    add(Check(f"{project}: clone and plan", ok, told, "able to run"))
    synced = client.post("/api/plan/sync", json={"project": project, "dry_run": True}, headers=auth)
    ok = synced.status_code == 200
    if ok and synced.json()["writes"]:  # a dry run that wrote is a bug worth failing on
        ok, told = False, f"the dry run wrote {synced.json()['writes']} times"
    else:
        told = f"{synced.json()['requests']} requests, 0 writes" if ok else _detail(synced)
    add(Check(f"{project}: tracker (dry-run sync)", ok, told, "able to run"))
