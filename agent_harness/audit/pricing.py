"""Pricing one model call's usage with genai-prices (pydantic's price data), never by hand.

The library counts `input_tokens` as the whole prompt: uncached, cache-read and cache-write
tokens together, with the two cache counts passed as well so their own rates apply. The
harness's `tokens_in` is that same total (see `models.wire`), so it is passed unchanged; the
uncached part alone would price cache reads at nothing. An unknown provider or model (the
library raises LookupError) has no price: the cost is None with the reason, never 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

# The harness's vendor names where genai-prices calls the provider otherwise.
_PROVIDER_OF = {"gemini": "google", "claude": "anthropic", "claude-code": "anthropic"}


@dataclass(frozen=True)
class Usage:
    """Tokens of one call: `tokens_in` is the whole prompt, cache reads and writes included."""

    tokens_in: int | None
    tokens_out: int | None
    cache_read: int | None = None
    cache_write: int | None = None


@dataclass(frozen=True)
class Price:
    """What a call cost in USD, or None with `reason`; `version` names the price data used."""

    cost_usd: float | None
    reason: str | None
    version: str | None


def price_data_version() -> str:
    """Which price data priced a row: the library's version, and its snapshot's date when the
    prices were updated at run time rather than bundled."""
    import genai_prices
    from genai_prices import data_snapshot

    snapshot = data_snapshot.get_snapshot()
    version = f"genai-prices {genai_prices.__version__}"
    if snapshot.from_auto_update:
        version += f" (updated {snapshot.timestamp.isoformat(timespec='seconds')})"
    return version


def price(vendor: str | None, model: str | None, usage: Usage, at: float) -> Price:
    """The cost of one call made at epoch second `at`, or None and why it is unknown."""
    if not model:
        return Price(None, "the model was not reported", None)
    if not vendor:
        return Price(None, "the provider was not reported", None)
    if usage.tokens_in is None and usage.tokens_out is None:
        return Price(None, "no token usage was reported", None)
    from genai_prices import Usage as LibUsage
    from genai_prices import calc_price

    total_in = usage.tokens_in or 0
    cache_read = usage.cache_read or 0
    cache_write = usage.cache_write or 0
    if cache_read + cache_write > total_in:
        return Price(
            None,
            f"cache tokens ({cache_read + cache_write}) exceed the input tokens ({total_in})",
            None,
        )
    provider = _PROVIDER_OF.get(vendor.lower(), vendor.lower())
    try:
        calc = calc_price(
            LibUsage(
                input_tokens=total_in,
                cache_read_tokens=cache_read,
                cache_write_tokens=cache_write,
                output_tokens=usage.tokens_out or 0,
            ),
            model_ref=model,
            provider_id=provider,
            genai_request_timestamp=datetime.fromtimestamp(at, UTC),
        )
    except LookupError as exc:
        return Price(None, f"no price known: {exc}", price_data_version())
    return Price(float(calc.total_price), None, price_data_version())
