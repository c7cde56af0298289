"""What a secret looks like: by the name it is stored under, and by the shape of its value.

Names catch `GH_TOKEN` or `OPENAI_API_KEY`; shapes catch a credential under a harmless name
(`DATABASE_URL=postgresql://u:PASSWORD@h/db`) or written into a file (`ghp_…`, `sk-ant-…`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

# A name part that says "credential". KEY and AUTH only as whole parts, so GIT_AUTHOR_NAME or
# KEYBOARD_LAYOUT are not taken for secrets, while MY_REVIEWER_KEY and GITHUB_AUTH are.
SECRET_NAME = re.compile(
    r"(TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|PASSCODE|API_KEY|APIKEY|PRIVATE_KEY|CREDENTIAL"
    r"|CREDS|COOKIE|_PASS(?:_|$)|_PWD(?:_|$)"
    r"|(?:^|_)KEY(?:_|$)|(?:^|_)AUTH(?:_|$))",
    re.IGNORECASE,
)
# Where a GitHub token is looked for, in order, as `gh` looks (then `gh auth token`).
TRACKER_TOKEN_ENV = ("GH_TOKEN", "GITHUB_TOKEN")
ALWAYS_SECRET = frozenset({*TRACKER_TOKEN_ENV, "GH_ENTERPRISE_TOKEN"})
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
    KeyShape("an OpenRouter key", re.compile(r"\bsk-or-v1-[0-9a-f]{64}\b")),
    # DeepSeek's keys are lower-case hex, which the OpenAI shape below (a capital) never takes.
    KeyShape("a DeepSeek key", re.compile(r"\bsk-[0-9a-f]{32}\b")),
    KeyShape("a Groq key", re.compile(r"\bgsk_[A-Za-z0-9]{52}\b")),
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
    KeyShape("an npm token", re.compile(r"\bnpm_[A-Za-z0-9]{36}\b")),
    KeyShape("a GitLab token", re.compile(r"\bglpat-[A-Za-z0-9_-]{20,}")),
    # The whole block (its body is the secret), or to the end when the text was cut inside it.
    KeyShape(
        "a private key",
        re.compile(
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----"
            r"(?:[\s\S]*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----|[\s\S]*\Z)"
        ),
    ),
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


# scheme://userinfo@ — the scheme bounded (unbounded, a megabyte of letters took minutes: the
# search restarted at every one), the userinfo running to the authority's last '@' (a password
# may hold one), and never across a quote or a backslash, so a match cannot run from one JSON
# string into the next.
_URL_USERINFO = re.compile(r"\b([A-Za-z][A-Za-z0-9+.-]{0,30}://)([^\s/?#\"'\\]*)@")
# The same with a '/' typed into the password, which should have been percent-encoded
# (`postgresql://u:pa/ss@h/db`): the user name holds no ':', '/' or '@', the password runs to the
# next '@' and holds a '/' (and no ':' after it). Text before its first '/' that reads as a
# port (digits, up to 65535) is not a password (`https://h:8443/users/@me`) and is left alone.
# Each part is bounded and never given back (`{0,256}+`): a megabyte of `a://:/` would
# otherwise be read to its end from every one of its schemes.
_URL_SLASHED_PASSWORD = re.compile(
    r"\b([A-Za-z][A-Za-z0-9+.-]{0,30}://)([^\s/?#:@\"'\\]{0,256}+):"
    r"([^\s/?#@\"'\\]{0,256}+)(/[^\s?#@:\"'\\]{0,256}+)@"
)
# name=value: a URL's query (`?password=…`), libpq's `password=… host=…`, a `db_token=…` in a
# message. A value masked already (`[redacted …]`, `***`) is left as it is.
_NAMED_VALUE = re.compile(
    r"(?<![A-Za-z0-9_.-])([A-Za-z][A-Za-z0-9_.-]{0,63})=([^&\s\"'\\\[*][^&\s\"'\\]*)"
)
# Userinfo with no ':' is a user name (`git@`) unless it is long enough to be a token
# (`https://<token>@github.com`).
_TOKEN_ALONE = 16


def _mask_userinfo(match: re.Match[str]) -> str:
    scheme, userinfo = match.group(1), match.group(2)
    user, colon, _password = userinfo.partition(":")
    if colon:
        return f"{scheme}{user}:***@"
    return f"{scheme}***@" if len(userinfo) >= _TOKEN_ALONE else match.group(0)


def _mask_slashed(match: re.Match[str]) -> str:
    scheme, user, before_slash = match.group(1), match.group(2), match.group(3)
    if not before_slash or _is_port(before_slash):  # host:port/path, or host:/path
        return match.group(0)
    return f"{scheme}{user}:***@"


def _is_port(text: str) -> bool:
    """A TCP port as a URL writes it: digits, no leading zero, at most 65535."""
    return text.isascii() and text.isdigit() and text[0] != "0" and int(text) <= 65535


def _mask_named(match: re.Match[str]) -> str:
    name = match.group(1)
    # Named like a credential (not every AGENT_HARNESS_* setting: `AGENT_HARNESS_DEBUG=1` is
    # no secret), or libpq's and ODBC's short form.
    secret = _holds_credential(name) or name.lower() == "pwd"
    return f"{name}=***" if secret else match.group(0)


# libpq's keyword form: a password quoted (`password='a b'`, `\'` inside) or spaced around
# its `=` (`password = x`), which the `name=value` rule below does not read.
_KEYWORD_PASSWORD = re.compile(r"(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'?|(?<=\s)\S+)", re.I)


def mask_url(text: str) -> str:
    """`text` (a URL, or text holding some) fit to show: the password of a URL's userinfo (or
    a token standing alone before its '@') and the value of every `name=value` named like a
    credential (libpq's `?password=`, a `?token=`) replaced by `***`.

    Works on the text, not on a parse, so a URL too malformed to parse (`postgresql://[::1/x`)
    is masked all the same; text with nothing to mask comes back unchanged."""
    text = _URL_SLASHED_PASSWORD.sub(_mask_slashed, text)
    text = _KEYWORD_PASSWORD.sub(r"\1***", text)
    return _NAMED_VALUE.sub(_mask_named, _URL_USERINFO.sub(_mask_userinfo, text))
