"""A client for a session host on another machine, over the documented session API."""

from __future__ import annotations

import contextlib
import shlex
from typing import Any

from agent_harness.sessions.protocol import (
    SessionExists,
    SessionHostFailed,
    SessionNotFound,
    SessionNotRunning,
    SessionSpec,
    SessionStatus,
    safe_session_name,
)


class RemoteSessionHost:
    """A client for a session host on another machine, speaking the JSON API served by
    `agent_harness.testing.session_server` (documented there).

    Paths in a `SessionSpec` (cwd, log) are paths on the remote machine. `attach_command`
    returns the remote host's own attach command, prefixed with `ssh -t <ssh_target>` when an
    ssh target is given, so a person can run it from here.
    """

    kind = "remote"

    def __init__(
        self,
        base_url: str,
        token: str,
        transport: Any = None,
        *,
        ssh_target: str | None = None,
        timeout_s: float = 30.0,
    ) -> None:
        import httpx

        self.base_url = base_url.rstrip("/")
        self.ssh_target = ssh_target
        self._client = httpx.Client(
            base_url=self.base_url,
            transport=transport,
            headers={"Authorization": f"Bearer {token}"},
            timeout=timeout_s,
        )

    def close(self) -> None:
        self._client.close()

    def _call(self, method: str, path: str, name: str | None = None, **kwargs: Any) -> Any:
        import httpx

        try:
            response = self._client.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise SessionHostFailed("remote", f"{method} {path}: {exc}") from exc
        if response.status_code == 404 and name is not None:
            raise SessionNotFound(name)
        if response.status_code == 409 and name is not None:
            kind = _json_field(response, "error")
            if kind == "not_running":
                raise SessionNotRunning(name)
            raise SessionExists(name)
        if response.status_code >= 400:
            message = _json_field(response, "message") or response.text
            raise SessionHostFailed("remote", f"{response.status_code}: {message}")
        return response

    def start(self, spec: SessionSpec) -> None:
        body = {
            "name": spec.name,
            "command": spec.command,
            "cwd": str(spec.cwd),
            "env": spec.env,
            "log_path": str(spec.log_path),
            "stdin_devnull": spec.stdin_devnull,
        }
        self._call("POST", "/sessions", spec.name, json=body)

    def exists(self, name: str) -> bool:
        name = safe_session_name(name)
        try:
            self._call("GET", f"/sessions/{name}", name)
        except SessionNotFound:
            return False
        return True

    def status(self, name: str) -> SessionStatus:
        name = safe_session_name(name)
        try:
            data = self._call("GET", f"/sessions/{name}", name).json()
        except SessionNotFound:
            return SessionStatus(False, None)
        code = data.get("exit_code")
        return SessionStatus(bool(data.get("alive")), int(code) if code is not None else None)

    def screen(self, name: str, lines: int = 50) -> str:
        name = safe_session_name(name)
        data = self._call("GET", f"/sessions/{name}/screen", name, params={"lines": lines}).json()
        return str(data["screen"])

    def output(self, name: str) -> str:
        name = safe_session_name(name)
        response = self._call("GET", f"/sessions/{name}/output", name)
        return bytes(response.content).decode("utf-8", errors="replace")

    def send_keys(self, name: str, text: str, enter: bool = True) -> None:
        name = safe_session_name(name)
        self._call("POST", f"/sessions/{name}/keys", name, json={"text": text, "enter": enter})

    def kill(self, name: str) -> None:
        name = safe_session_name(name)
        with contextlib.suppress(SessionNotFound):
            self._call("DELETE", f"/sessions/{name}", name)

    def attach_command(self, name: str) -> list[str]:
        name = safe_session_name(name)
        command = [str(x) for x in self._call("GET", f"/sessions/{name}/attach", name).json()]
        if self.ssh_target:
            return ["ssh", "-t", self.ssh_target, shlex.join(command)]
        return command


def _json_field(response: Any, key: str) -> Any:
    try:
        data = response.json()
    except ValueError:
        return None
    return data.get(key) if isinstance(data, dict) else None
