"""Errors of the embedded forge.

`ApiError` is an HTTP answer in waiting: handlers raise it and the server renders it as GitHub
would (status, `message`, `errors`, `documentation_url`). The others are what a user of the
forge meets when it cannot start.
"""

from __future__ import annotations

from typing import Any

from agent_harness.errors import HarnessError

DOCS = "https://docs.github.com/rest"


class ForgeError(HarnessError):
    """The embedded forge failed."""


class ForgeDataError(ForgeError):
    """The forge data directory cannot be used."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"forge data directory {path} cannot be used: {reason}")


class ForgeAddressError(ForgeError):
    """The forge cannot listen on the requested address."""

    def __init__(self, host: str, port: int, reason: str) -> None:
        self.host = host
        self.port = port
        super().__init__(f"forge cannot listen on {host}:{port}: {reason}")


class ApiError(ForgeError):
    """A request the forge answers with an error status, shaped like GitHub's."""

    def __init__(
        self,
        status: int,
        message: str,
        errors: list[Any] | None = None,
        documentation_url: str = DOCS,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.status = status
        self.api_message = message
        self.errors = errors
        self.documentation_url = documentation_url
        self.headers = headers or {}
        super().__init__(f"{status} {message}")

    def body(self) -> dict[str, Any]:
        out: dict[str, Any] = {"message": self.api_message}
        if self.errors is not None:
            out["errors"] = self.errors
        out["documentation_url"] = self.documentation_url
        return out


def not_found() -> ApiError:
    return ApiError(404, "Not Found")


def validation_failed(resource: str, field: str, code: str, **extra: Any) -> ApiError:
    error: dict[str, Any] = {"resource": resource, "field": field, "code": code, **extra}
    return ApiError(422, "Validation Failed", [error])
