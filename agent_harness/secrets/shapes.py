"""What a secret looks like: by the name it is stored under, and by the shape of its value.

Names catch `GH_TOKEN` or `OPENAI_API_KEY`; shapes catch a credential under a harmless name
(`DATABASE_URL=postgresql://u:PASSWORD@h/db`) or written into a file (`ghp_…`, `sk-ant-…`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import parse_qsl, quote

# A name part that says "credential". KEY and AUTH only as whole parts, so GIT_AUTHOR_NAME or
# KEYBOARD_LAYOUT are not taken for secrets, while MY_REVIEWER_KEY and GITHUB_AUTH are.
SECRET_NAME = re.compile(
    r"(TOKEN|SECRET|PASSWORD|PASSWD|API_KEY|APIKEY|PRIVATE_KEY|CREDENTIAL|CREDS|COOKIE"
    r"|(?:^|_)KEY(?:_|$)|(?:^|_)AUTH(?:_|$))",
    re.IGNORECASE,
)
ALWAYS_SECRET = frozenset({"GH_TOKEN", "GITHUB_TOKEN", "GH_ENTERPRISE_TOKEN"})
# A value this short is no secret worth the name, and matching it exactly would flag every
# diff that happens to contain it ("1", "true", "test").
MIN_KNOWN_LENGTH = 8


@dataclass(frozen=True)
class KeyShape:
    """A credential format a vendor documents, recognisable without knowing its value."""

    name: str
    pattern: re.Pattern[str]


# Specific prefixes and lengths only: a shape that fires on ordinary text teaches people to
# ignore it. The order matters where prefixes overlap (an Anthropic key also starts `sk-`).
KEY_SHAPES: tuple[KeyShape, ...] = (
    KeyShape("a GitHub token", re.compile(r"\bgh[pousr]_[A-Za-z0-9]{36,}")),
    KeyShape("a GitHub token", re.compile(r"\bgithub_pat_[A-Za-z0-9_]{22,}")),
    KeyShape("an Anthropic key", re.compile(r"\bsk-ant-[A-Za-z0-9_-]{20,}")),
    # Random base62: a key of 20 characters or more with no digit or no capital is a kebab-case
    # word (a branch `T1-sk-learn-upgrade-…`, a name `sk-rate-limiter-settings`), not a key.
    KeyShape(
        "an OpenAI key",
        re.compile(
            r"\bsk-(?!ant-)(?=[A-Za-z0-9_-]*[0-9])(?=[A-Za-z0-9_-]*[A-Z])[A-Za-z0-9_-]{20,}"
        ),
    ),
    KeyShape("an AWS access key id", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    KeyShape("a Google API key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}")),
    KeyShape("a Slack token", re.compile(r"\bxox[abposr]-[0-9A-Za-z-]{10,}")),
    KeyShape("a private key", re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----")),
)
# scheme://user:password@host — a password in a URL, however harmless the variable's name.
_URL_WITH_PASSWORD = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]{0,30}://[^/\s:@]*:[^/\s@]+@")
# Proxies are read from the environment by the HTTP libraries themselves; they are withheld
# from agents and checks like any credential, but stay where those libraries look for them.
PROXY_NAMES = frozenset(
    name
    for base in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "FTP_PROXY")
    for name in (base, base.lower())
)


def is_secret_name(name: str) -> bool:
    """A variable whose name says it holds a credential (or is the harness's own setting)."""
    return (
        name in ALWAYS_SECRET or name.startswith("AGENT_HARNESS_") or bool(SECRET_NAME.search(name))
    )


def _holds_credential(name: str) -> bool:
    # Narrower than is_secret_name: AGENT_HARNESS_STATE_DIR is withheld from agents, but its
    # value (a path) is no credential, and matching it in a diff would only raise false alarms.
    return name in ALWAYS_SECRET or bool(SECRET_NAME.search(name))


def key_shape(value: str) -> str | None:
    """What kind of credential `value` contains, by its documented format; None if none."""
    for shape in KEY_SHAPES:
        if shape.pattern.search(value):
            return shape.name
    return None


def value_looks_secret(value: str) -> str | None:
    """Why `value` is a credential whatever it is called (a URL password, a key format)."""
    if _URL_WITH_PASSWORD.search(value):
        return "a URL with a password"
    return key_shape(value)


def known_values(env: Mapping[str, str], extra: Iterable[str] = ()) -> dict[str, str]:
    """Secret value -> the name it was found under, for every secret long enough to match
    exactly: the secret-named and secret-shaped variables of `env`, plus `extra` values."""
    found: dict[str, str] = {}
    for name, value in env.items():
        secret = value.strip()
        if len(secret) >= MIN_KNOWN_LENGTH and (
            _holds_credential(name) or value_looks_secret(value)
        ):
            found.setdefault(secret, name)
    for value in extra:
        secret = value.strip()
        if len(secret) >= MIN_KNOWN_LENGTH:
            found.setdefault(secret, "a token the harness holds")
    return found


def mask_url(url: str) -> str:
    """`url` fit to show: the password of its userinfo and the value of every query parameter
    named like a credential (libpq's `?password=`, a `?token=`) replaced by `***`.

    Works on the text, not on a parse, so a URL too malformed to parse (`postgresql://[::1/x`)
    is masked all the same; anything it does not recognise as a URL comes back unchanged."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    ends = [i for i in (rest.find(c) for c in "/?#") if i >= 0]
    end = min(ends, default=len(rest))
    authority, tail = rest[:end], rest[end:]
    userinfo, at, host = authority.rpartition("@")
    if at and ":" in userinfo:
        authority = f"{userinfo.split(':', 1)[0]}:***@{host}"
    path, qmark, query = tail.partition("?")
    if qmark:
        query, hash_, fragment = query.partition("#")
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(is_secret_name(name) for name, _ in pairs):
            query = "&".join(
                f"{quote(name)}={'***' if is_secret_name(name) else quote(value)}"
                for name, value in pairs
            )
        tail = f"{path}?{query}{hash_}{fragment}"
    return f"{scheme}://{authority}{tail}"
