"""The reviewer as a model call: the role's route decides the vendor and the model."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING

from agent_harness.review.verdict import ReviewReply

if TYPE_CHECKING:
    from agent_harness.models.client import ModelClient
    from agent_harness.models.routes import Route

# OpenRouter slugs name the model's maker; a few makers spell themselves differently there.
OPENROUTER_MAKERS: Mapping[str, str] = MappingProxyType(
    {"meta-llama": "meta", "x-ai": "xai", "mistralai": "mistral"}
)


def route_vendor(route: Route) -> str:
    """The vendor whose model a route reaches. OpenRouter is a marketplace, not a maker: its
    model ids are `maker/model` (e.g. `anthropic/claude-sonnet-4`), so for an `openrouter`
    route the maker prefix is the vendor. Its `openrouter/auto` router may pick any maker; it
    stays `openrouter`, which matches no implementer, so pin a model for a real guarantee."""
    vendor = route.vendor.strip().lower()
    if vendor == "openrouter" and "/" in route.model:
        maker = route.model.split("/", 1)[0].strip().lower().lstrip("~")
        return OPENROUTER_MAKERS.get(maker, maker) or vendor
    return vendor


class ModelReviewer:
    """A `Reviewer` over the role-addressed `ModelClient`. Its vendor is read from the role's
    current route (see `route_vendor`); its cost is the price list's for the call (None for a
    model no price list knows)."""

    def __init__(
        self,
        client: ModelClient,
        worker: str,
        role: str = "reviewer",
        *,
        max_tokens: int = 2048,
        timeout_s: float = 300.0,
    ) -> None:
        self._client = client
        self._worker = worker
        self._role = role
        self._max_tokens = max_tokens
        self._timeout_s = timeout_s
        self._route()  # an unknown role is a configuration error now, not mid-run

    @property
    def client(self) -> ModelClient:
        return self._client

    def secret_values(self) -> tuple[str, ...]:
        """The keys the reviewer's model calls carry; see `ModelClient.secret_values`."""
        return self._client.secret_values()

    def _route(self) -> Route:
        from agent_harness.models.routes import UnknownRole

        route = self._client.routes.get(self._role)
        if route is None:
            raise UnknownRole(self._role, list(self._client.routes))
        return route

    @property
    def vendor(self) -> str:
        return route_vendor(self._route())

    def ask(self, prompt: str, system: str) -> ReviewReply:
        done = self._client.complete(
            self._role,
            [{"role": "user", "content": prompt}],
            worker=self._worker,
            system=system,
            max_tokens=self._max_tokens,
            timeout=self._timeout_s,
        )
        return ReviewReply(done.text, done.tokens_in, done.tokens_out, done.cost_usd, done.model)
