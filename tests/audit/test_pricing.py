"""Pricing through genai-prices: the input count includes cache tokens; unknown is never 0."""

from __future__ import annotations

import random
from datetime import UTC, datetime

import pytest
from genai_prices import Usage as LibUsage
from genai_prices import calc_price

from agent_harness.audit.pricing import Usage, billed_by, price, price_data_version

pytestmark = pytest.mark.unit

AT = 1_780_000_000.0  # 2026-05-28


def _rates(model: str, provider: str) -> tuple[float, float, float, float]:
    """The library's own rates for input, cache read, cache write and output, each read back
    as the price of a thousand tokens of that kind alone (well under any long-context tier)."""
    one = 1_000

    def cost(**tokens: int) -> float:
        found = calc_price(LibUsage(**tokens), model_ref=model, provider_id=provider)
        return float(found.total_price)

    return (
        cost(input_tokens=one),
        cost(input_tokens=one, cache_read_tokens=one),
        cost(input_tokens=one, cache_write_tokens=one),
        cost(output_tokens=one),
    )


def test_cache_tokens_are_part_of_the_input_count_and_priced_at_their_own_rates() -> None:
    fresh, read, write, out = _rates("claude-sonnet-4-5", "anthropic")
    assert read < fresh < write  # a cache read is cheaper, a cache write dearer
    usage = Usage(tokens_in=10_000, tokens_out=400, cache_read=8_000, cache_write=1_500)
    got = price("anthropic", "claude-sonnet-4-5", usage, AT)
    expected = (500 * fresh + 8_000 * read + 1_500 * write + 400 * out) / 1_000
    assert got.cost_usd == pytest.approx(expected, rel=1e-9)
    # The two ways to get it wrong: every prompt token at the full rate, or cache tokens
    # counted again on top of an input count that already holds them.
    all_fresh = (10_000 * fresh + 400 * out) / 1_000
    twice = (10_000 * fresh + 8_000 * read + 1_500 * write + 400 * out) / 1_000
    assert got.cost_usd < all_fresh < twice
    assert got.version == price_data_version()
    assert got.version is not None and got.version.startswith("genai-prices ")


@pytest.mark.parametrize(
    ("vendor", "model", "reason"),
    [
        ("openai", "gpt-demo-reviewer", "Unable to find model"),
        ("nowhere-ai", "gpt-4o", "Unable to find provider"),
        ("openai", None, "the model was not reported"),
        (None, "gpt-4o", "the provider was not reported"),
    ],
)
def test_an_unknown_price_is_null_with_its_reason_never_zero(
    vendor: str | None, model: str | None, reason: str
) -> None:
    got = price(vendor, model, Usage(tokens_in=100, tokens_out=10), AT)
    assert got.cost_usd is None
    assert got.reason is not None and reason in got.reason


def test_no_usage_is_no_price() -> None:
    got = price("openai", "gpt-4o", Usage(tokens_in=None, tokens_out=None), AT)
    assert (got.cost_usd, got.reason) == (None, "no token usage was reported")


@pytest.mark.parametrize(
    ("usage", "missing"),
    [
        (Usage(tokens_in=None, tokens_out=7), "input"),
        (Usage(tokens_in=1000, tokens_out=None), "output"),
    ],
)
def test_half_the_usage_is_no_price_not_half_a_price(usage: Usage, missing: str) -> None:
    # It was priced from the half it had: a review of 1,000 tokens in read as $0.000056.
    for _ in range(2):  # the second look takes the quick path, which must say the same
        got = price("openai", "gpt-4.1", usage, AT)
        assert (got.cost_usd, got.reason) == (None, f"the {missing} tokens were not reported")


def test_more_cache_than_input_is_refused_rather_than_guessed() -> None:
    got = price("anthropic", "claude-sonnet-4-5", Usage(100, 10, cache_read=500), AT)
    assert got.cost_usd is None and got.reason is not None and "exceed" in got.reason


def test_gemini_is_priced_as_google() -> None:
    assert price("gemini", "gemini-2.5-flash", Usage(1000, 100), AT).cost_usd is not None


@pytest.mark.parametrize(
    ("vendor", "model"),
    [("anthropic", "claude-sonnet-4-5"), ("openai", "gpt-4o"), ("gemini", "gemini-2.5-flash")],
)
def test_every_price_is_the_librarys_own_to_the_last_digit(vendor: str, model: str) -> None:
    """Prices come from a per-token sum once it matched the library; this holds it to that,
    across the long-context tier too (over 200,000 prompt tokens)."""
    rng = random.Random(5)
    provider = "google" if vendor == "gemini" else vendor
    for _ in range(120):
        tokens_in = rng.choice([rng.randint(1, 5_000), rng.randint(150_000, 400_000)])
        read = rng.randint(0, tokens_in // 2)
        write = rng.randint(0, (tokens_in - read) // 2) if vendor == "anthropic" else 0
        out = rng.randint(0, 4_000)
        got = price(vendor, model, Usage(tokens_in, out, read, write), AT)
        found = calc_price(
            LibUsage(
                input_tokens=tokens_in,
                cache_read_tokens=read,
                cache_write_tokens=write,
                output_tokens=out,
            ),
            model_ref=model,
            provider_id=provider,
            genai_request_timestamp=datetime.fromtimestamp(AT, UTC),
        )
        assert got.cost_usd == float(found.total_price)


def test_a_price_by_time_of_day_is_the_librarys_at_every_hour() -> None:
    """DeepSeek is cheaper off-peak (16:30 to 00:30 UTC): a day's first call at the peak rate
    must not price the evening's calls."""
    day = AT - AT % 86_400
    for hour in (12, 20, 2, 12, 20):
        at = day + hour * 3600
        got = price("deepseek", "deepseek-chat", Usage(10_000, 500), at)
        found = calc_price(
            LibUsage(input_tokens=10_000, output_tokens=500),
            model_ref="deepseek-chat",
            provider_id="deepseek",
            genai_request_timestamp=datetime.fromtimestamp(at, UTC),
        )
        assert got.cost_usd == float(found.total_price), hour


@pytest.mark.parametrize(
    ("vendor", "endpoint", "model", "billed"),
    [
        # OpenAI's wire, Groq's bill
        ("openai", "https://api.groq.com/openai/v1", "llama-3.3-70b-versatile", "groq"),
        ("anthropic", "https://openrouter.ai/api/v1", "openai/gpt-4o", "openrouter"),
        ("openai", "https://my-team.openai.azure.com/openai", "gpt-4o", "azure"),
        ("openai", "https://api.openai.com/v1", "gpt-4o", "openai"),
        ("openai", "http://127.0.0.1:8000/v1", "gpt-4o", "openai"),  # a server of one's own
        ("generic", "http://llm.internal/v1", "gpt-4o", "generic"),
        ("openai", None, "gpt-4o", "openai"),
    ],
)
def test_a_call_is_billed_by_the_provider_whose_address_it_went_to(
    vendor: str, endpoint: str | None, model: str, billed: str
) -> None:
    assert billed_by(vendor, endpoint, model) == billed


def test_a_provider_whose_list_lacks_the_model_leaves_the_vendors_name_for_it() -> None:
    # Bedrock names Claude otherwise ("anthropic.claude-..."): the route's name stays priced
    # as Anthropic's, rather than unknown.
    bedrock = "https://bedrock-runtime.us-east-1.amazonaws.com"
    assert billed_by("anthropic", bedrock, "claude-sonnet-4-5") == "anthropic"
    usage = Usage(tokens_in=1_000, tokens_out=100)
    billed = billed_by("anthropic", bedrock, "claude-sonnet-4-5")
    assert price(billed, "claude-sonnet-4-5", usage, AT).cost_usd is not None


def test_a_model_only_groq_sells_is_priced_through_a_route_named_openai() -> None:
    usage = Usage(tokens_in=1_000, tokens_out=1_000)
    named = price("openai", "llama-3.3-70b-versatile", usage, AT)
    assert named.cost_usd is None  # was: the price of a call to OpenAI, which has no such model
    at_groq = price(
        billed_by("openai", "https://api.groq.com/openai/v1", "llama-3.3-70b-versatile"),
        "llama-3.3-70b-versatile",
        usage,
        AT,
    )
    expected = calc_price(
        LibUsage(input_tokens=1_000, output_tokens=1_000),
        model_ref="llama-3.3-70b-versatile",
        provider_id="groq",
        genai_request_timestamp=datetime.fromtimestamp(AT, UTC),
    )
    assert at_groq.cost_usd == pytest.approx(float(expected.total_price), abs=1e-12)
