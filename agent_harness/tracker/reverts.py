"""Who undoes whom on the default branch: merged pull requests and commits as nodes, reverts
as edges. A change is live when it landed and no live change undoes it, so a revert of a revert
brings the change back."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent_harness.tracker.reconcile import PullFacts


class RevertGraph:
    """Who undoes whom: nodes are pull requests (`pr:N`) and commits (`c:SHA`)."""

    def __init__(self, pulls: dict[int, PullFacts], shas: set[str]) -> None:
        self.pulls = pulls
        self.shas = shas
        self.alias: dict[str, str] = {}
        for pull in pulls.values():
            if pull.state == "merged":
                for sha in (pull.merge_sha, pull.head_sha):
                    if sha:
                        self.alias.setdefault(sha, f"pr:{pull.number}")
        self.revokers: dict[str, list[str]] = {}
        self._live: dict[str, bool] = {}

    def node_of(self, sha: str) -> str | None:
        if sha in self.alias:
            return self.alias[sha]
        if sha in self.shas:
            return f"c:{sha}"
        if len(sha) < 40:  # an abbreviated sha in a hand-written message
            for full, node in self.alias.items():
                if full.startswith(sha):
                    return node
            for full in self.shas:
                if full.startswith(sha):
                    return f"c:{full}"
        return None

    def add(self, revoker: str, target: str) -> None:
        if revoker != target and revoker not in self.revokers.get(target, []):
            self.revokers.setdefault(target, []).append(revoker)

    def landed(self, node: str) -> bool:
        kind, _, ident = node.partition(":")
        if kind == "pr":
            pull = self.pulls.get(int(ident))
            return pull is not None and pull.state == "merged"
        return ident in self.shas

    def live(self, node: str, seen: frozenset[str] = frozenset()) -> bool:
        if node in self._live:
            return self._live[node]
        if node in seen:  # a cycle cannot happen in git; refuse to loop if data says otherwise
            return False
        undone = any(self.live(r, seen | {node}) for r in self.revokers.get(node, ()))
        result = self.landed(node) and not undone
        self._live[node] = result
        return result

    def live_revoker(self, node: str) -> str | None:
        return next((r for r in self.revokers.get(node, ()) if self.live(r)), None)


def describe_revoker(node: str) -> dict[str, Any]:
    kind, _, ident = node.partition(":")
    return {"revert_pr": int(ident)} if kind == "pr" else {"revert_commit": ident}
