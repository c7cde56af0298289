"""The forge and a scripted model server in a process of their own, for benchmarks.

GitHub and a model provider never share the harness's interpreter. Served from the
benchmark's own process, their request handling holds the same interpreter lock as the
harness's worker threads, so with several workers a benchmark would charge the harness for
the servers' Python. Here they run in a child process started with `spawn` (no copy of the
parent's threads or locks), and the parent asks it through a pipe for what the benchmarks
read off an in-process forge: a repository made, its clone URL, a request mark and the counts
since one, and the CPU time the child and its waited-for children (the forge's git) have
used, so a benchmark can still count every CPU second of the work.
"""

from __future__ import annotations

import multiprocessing
import resource
from pathlib import Path
from types import SimpleNamespace
from typing import Any

APPROVE = '{"approved": true, "reasons": ["fine"], "permanent": false}'


def _cpu_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _serve(conn: Any, data_dir: str) -> None:  # runs in the child
    from agent_harness.testing.forge import running_forge
    from agent_harness.testing.model_server import (
        ModelServer,
        ScriptedCompletion,
        ScriptedResponder,
    )

    approve = ScriptedResponder(lambda _body: ScriptedCompletion(text=APPROVE))
    with running_forge(Path(data_dir)) as running, ModelServer([approve]) as model:
        conn.send((running.server.api_url, model.url))
        while True:
            command, args = conn.recv()
            if command == "stop":
                break
            try:
                if command == "cpu":
                    answer = _cpu_seconds()
                else:
                    answer = getattr(running.forge, command)(*args)
            except Exception as exc:  # the parent raises it again
                answer = exc
            conn.send(answer)
    conn.send("stopped")


class Services:
    """`with Services(dir) as s:` the forge (`s.forge.create_repo(...)`, `s.server.api_url`,
    as on `running_forge`) and `s.model_url`, a model server whose every answer approves."""

    def __init__(self, data_dir: Path) -> None:
        context = multiprocessing.get_context("spawn")
        self._conn, child = context.Pipe()
        self._process = context.Process(target=_serve, args=(child, str(data_dir)), daemon=True)
        self._process.start()
        api_url, self.model_url = self._conn.recv()
        self.server = SimpleNamespace(api_url=api_url)
        self.forge = self  # `services.forge.mark()` reads as it does on a running forge

    def _ask(self, command: str, *args: Any) -> Any:
        self._conn.send((command, args))
        answer = self._conn.recv()
        if isinstance(answer, Exception):
            raise answer
        return answer

    def create_repo(self, owner: str, name: str, auto_init: bool = True) -> None:
        self._ask("create_repo", owner, name, auto_init)

    def clone_url(self, owner: str, name: str) -> str:
        return str(self._ask("clone_url", owner, name))

    def mark(self) -> int:
        return int(self._ask("mark"))

    def request_counts(self, since_mark: int | None = None) -> dict[str, int]:
        return dict(self._ask("request_counts", since_mark))

    def cpu_seconds(self) -> float:
        """CPU seconds the servers' process and the git it ran have used so far."""
        return float(self._ask("cpu"))

    def __enter__(self) -> Services:
        return self

    def __exit__(self, *_exc: object) -> None:
        if self._process.is_alive():
            self._conn.send(("stop", ()))
            self._conn.recv()
        self._process.join(10)
