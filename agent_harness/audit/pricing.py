"""Pricing one model call's usage with genai-prices (pydantic's price data), never by hand.

The library counts `input_tokens` as the whole prompt: uncached, cache-read and cache-write
tokens together, with the two cache counts passed as well so their own rates apply. The
harness's `tokens_in` is that same total (see `models.wire`), so it is passed unchanged; the
uncached part alone would price cache reads at nothing. An unknown provider or model (the
library raises LookupError) has no price: the cost is None with the reason, never 0.
"""

from __future__ import annotations

import functools
import re
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, NamedTuple

# The harness's vendor names where genai-prices calls the provider otherwise.
_PROVIDER_OF = {"gemini": "google", "claude": "anthropic", "claude-code": "anthropic"}


class Usage(NamedTuple):
    """Tokens of one call: `tokens_in` is the whole prompt, cache reads and writes included.
    (An immutable tuple in this order: ingest builds one per call, and unpacks it.)"""

    tokens_in: int | None
    tokens_out: int | None
    cache_read: int | None = None
    cache_write: int | None = None


class Extra(NamedTuple):
    """What a call reports beyond its four token counts, priced at rates of its own: the part
    of `cache_write` written to a one-hour cache (twice the input rate, where a five-minute
    write is 1.25 times), and server-side web searches (priced per thousand)."""

    cache_write_1h: int = 0
    web_searches: int = 0


NO_EXTRA = Extra()


class Price(NamedTuple):
    """What a call cost in USD, or None with `reason`; `version` names the price data used."""

    cost_usd: float | None
    reason: str | None
    version: str | None


# `Price(...)` and `Usage(...)` from a tuple, without a Python frame (ingest makes one of each
# per model call).
_new_price = functools.partial(tuple.__new__, Price)
new_usage = functools.partial(tuple.__new__, Usage)


def price_data_version() -> str:
    """Which price data priced a row: the library's version, and its snapshot's date when the
    prices were updated at run time rather than bundled."""
    return _PRICES.version()


def _snapshot() -> Any:
    """The price data in use (the bundled snapshot, or one `UpdatePrices` installed)."""
    global _get_snapshot
    if _get_snapshot is None:
        from genai_prices import data_snapshot

        _get_snapshot = data_snapshot.get_snapshot
    return _get_snapshot()


_get_snapshot: Any = None


@functools.lru_cache(maxsize=16)
def _version_of(updated: bool, stamp: datetime) -> str:
    import genai_prices

    version = f"genai-prices {genai_prices.__version__}"
    if updated:
        version += f" (updated {stamp.isoformat(timespec='seconds')})"
    return version


def billed_by(vendor: str | None, endpoint: str | None, model: str | None) -> str | None:
    """Who a call is priced as: the provider whose API `endpoint` is, by genai-prices' own
    patterns of their addresses (a route of vendor `openai` pointed at Groq or OpenRouter is
    billed by them, at their prices), when its price list knows `model`; else the route's
    `vendor` (a self-hosted server or a proxy of one's own matches none, and a provider that
    names its models otherwise, as Bedrock does, leaves the vendor's name for it)."""
    if not endpoint:
        return vendor
    return _PRICES.provider_at(endpoint, model) or vendor


def price(
    vendor: str | None, model: str | None, usage: Usage, at: float, extra: Extra | None = None
) -> Price:
    """The cost of one call made at epoch second `at`, or None and why it is unknown."""
    if extra is not None and any(extra):
        return _PRICES.price_with(vendor, model, usage, at, extra)
    return _PRICES.price(vendor, model, usage, at)


def call_cost(
    vendor: str | None, endpoint: str | None, model: str | None, usage: Usage, at: float
) -> float | None:
    """What one call of `model` through `endpoint` costs by the price list, billed as
    `billed_by` says; None when that is not known, the price list failing included (a call
    answered, or a budget's check before one, must not be lost to it)."""
    try:
        return price(billed_by(vendor, endpoint, model), model, usage, at).cost_usd
    except Exception:
        return None


# The most tokens one record may count: more than any call reaches, and within the database's
# integers (a count of 10**30 would not fit one).
MAX_TOKENS = 10**12
COUNTS_UNFIT = f"its token counts are not whole numbers from 0 to {MAX_TOKENS:,}"


def counts_fit(usage: Usage) -> bool:
    """Whether every count of `usage` is absent or a whole number a call could report: a
    negative count would price a call below zero, a huge one overflow the database."""
    return all(
        n is None or (type(n) is int and 0 <= n <= MAX_TOKENS)  # a bool is no count
        for n in usage
    )


def extra_fits(extra: Extra) -> bool:
    """Whether `extra`'s counts are whole numbers a call could report, as `counts_fit`."""
    return all(type(n) is int and 0 <= n <= MAX_TOKENS for n in extra)


def _unpriceable(vendor: str | None, model: str | None, usage: Usage) -> str | None:
    """Why a call cannot be priced whatever the price data says, or None."""
    if not model:
        return "the model was not reported"
    if not vendor:
        return "the provider was not reported"
    tokens_in, tokens_out, read, write = usage
    if tokens_in is None and tokens_out is None:
        return "no token usage was reported"
    if tokens_in is None or tokens_out is None:  # half a price is no price
        missing = "input" if tokens_in is None else "output"
        return f"the {missing} tokens were not reported"
    cache = (read or 0) + (write or 0)
    if cache > (tokens_in or 0):
        return f"cache tokens ({cache}) exceed the input tokens ({tokens_in or 0})"
    return None


def _exact(provider: str, model: str, usage: Usage, at: float, extra: Extra = NO_EXTRA) -> Decimal:
    """The library's own calculation (raises LookupError for an unknown provider or model)."""
    from genai_prices import Usage as LibUsage
    from genai_prices import calc_price

    found = calc_price(
        LibUsage(
            input_tokens=usage.tokens_in or 0,
            cache_read_tokens=usage.cache_read or 0,
            cache_write_tokens=usage.cache_write or 0,
            output_tokens=usage.tokens_out or 0,
            cache_write_1h_tokens=extra.cache_write_1h or None,
            web_searches=extra.web_searches or None,
        ),
        model_ref=model,
        provider_id=provider,
        genai_request_timestamp=datetime.fromtimestamp(at, UTC),
    )
    return Decimal(found.total_price)


# The price fields of the four token counts a call reports; a model priced by anything else
# as well (per request, per search) may charge what these counts cannot show.
_TOKEN_FIELDS = ("input_mtok", "cache_read_mtok", "cache_write_mtok", "output_mtok")

PICO = 10**12

# Provider, model, UTC day number, price-data version.
_Key = tuple[str, str, int, str]

# A fast result is compared with the library's again every so many calls, as well as first.
_RECHECK_EVERY = 500


class _Prices:
    """genai-prices, made affordable per call without leaving it.

    `calc_price` takes about a millisecond a call (it resolves and validates the model's whole
    price structure each time), twenty times an insert. For a model whose price that day is per
    token only, the cost is the library's own per-million rates (at the tier the prompt size
    selects) times the counts; that sum is used only after it matched `calc_price` exactly for
    this provider, model and day, and is compared again every few hundred calls. On any
    difference the model is priced by `calc_price` alone from then on. Lookups that fail are
    remembered too, as the library does not cache them.

    The common case (a trusted model) is one dictionary lookup and the sum: ingest prices every
    model call it reads, and this was most of its time.
    """

    def __init__(self) -> None:
        self._misses: dict[tuple[str, str, str], str] = {}
        self._models: dict[_Key, _Rates | None] = {}
        self._trusted: dict[_Key, bool] = {}
        # Per (vendor, model as named, day) of the price data in use: the rates trusted for
        # the per-token sum, or the reason the model has no price.
        self._fast: dict[tuple[str | None, str | None, int], _Fast | str] = {}
        self._calls = 0
        self._get_snapshot: Any = _snapshot
        self._seen: Any = None  # the price data the version below names
        self._version = ""
        # (endpoint, model) -> the provider whose API it is, if its price list has the model
        self._at: dict[tuple[str, str | None], str | None] = {}

    def version(self) -> str:
        snapshot = self._get_snapshot()
        if snapshot is not self._seen:
            self._see(snapshot)
        return self._version

    def _see(self, snapshot: Any) -> None:
        """New price data (the first call, or `UpdatePrices` installed another snapshot)."""
        self._get_snapshot = _get_snapshot or _snapshot
        self._version = _version_of(snapshot.from_auto_update, snapshot.timestamp)
        self._seen = snapshot
        self._fast = {}
        self._at = {}

    def provider_at(self, endpoint: str, model: str | None) -> str | None:
        """The id of the first provider (the library's order) whose API address `endpoint`
        is, when its price list knows `model`; None when it is none of theirs, or it does not
        (the library's own lookup decides both)."""
        self.version()  # the price data in use, and what was found in older data forgotten
        snapshot = self._seen
        key = (endpoint, model)
        if key not in self._at:
            found = next((p for p in snapshot.providers if re.match(p.api_pattern, endpoint)), None)
            if found is not None and model:
                try:
                    snapshot.find_provider_model(model, found, None, None)
                except LookupError:
                    found = None
            self._at[key] = None if found is None else found.id
        return self._at[key]

    def price(self, vendor: str | None, model: str | None, usage: Usage, at: float) -> Price:
        snapshot = self._get_snapshot()
        if snapshot is not self._seen:
            self._see(snapshot)
        if not counts_fit(usage):
            return Price(None, COUNTS_UNFIT, None)
        # Only a named vendor and model are remembered, so a hit needs only the usage checked.
        found = self._fast.get((vendor, model, int(at // 86_400)))
        tokens_in, tokens_out, read, write = usage
        if (
            found is not None
            and tokens_in is not None
            and tokens_out is not None
            and (read or 0) + (write or 0) <= tokens_in
        ):
            if isinstance(found, str):
                return _new_price((None, found, self._version))
            self._calls += 1
            if self._calls % _RECHECK_EVERY:
                fast = _quick(found, usage)
                if fast is not None:
                    return _new_price((fast / PICO, None, self._version))
        reason = _unpriceable(vendor, model, usage)
        if reason is not None or vendor is None or model is None:
            return Price(None, reason, None)
        return self._checked(vendor, model, usage, at, self._version)

    def price_with(
        self, vendor: str | None, model: str | None, usage: Usage, at: float, extra: Extra
    ) -> Price:
        """A call with more than token counts to price: by the library alone, every time
        (such calls are few; the per-token sum knows none of their rates)."""
        self.version()
        if not counts_fit(usage) or not extra_fits(extra):
            return Price(None, COUNTS_UNFIT, None)
        reason = _unpriceable(vendor, model, usage)
        if reason is None and extra.cache_write_1h > (usage.cache_write or 0):
            reason = (
                f"one-hour cache writes ({extra.cache_write_1h}) exceed the cache writes "
                f"({usage.cache_write or 0})"
            )
        if reason is not None or vendor is None or model is None:
            return Price(None, reason, None)
        return self._checked(vendor, model, usage, at, self._version, extra)

    def _checked(
        self,
        vendor: str,
        model: str,
        usage: Usage,
        at: float,
        version: str,
        extra: Extra = NO_EXTRA,
    ) -> Price:
        """The library's price, and whether the per-token sum may stand in for it (never for
        a call with `extra`, whose rates the sum does not know)."""
        provider = _PROVIDER_OF.get(vendor.lower(), vendor.lower())
        name = model.lower()
        key: _Key = (provider, name, int(at // 86_400), version)
        miss = self._misses.get((provider, name, version))
        if miss is not None:
            self._fast[(vendor, model, key[2])] = miss
            return Price(None, miss, version)
        trusted = self._trusted.get(key)
        rates = None if trusted is False or any(extra) else self._rates(key, at)
        fast = None if rates is None else _linear(rates, usage)
        try:
            exact = _exact(provider, model, usage, at, extra)
        except LookupError as exc:
            reason = f"no price known: {exc}"
            self._misses[(provider, name, version)] = reason
            self._fast[(vendor, model, key[2])] = reason
            return Price(None, reason, version)
        fast_key = (vendor, model, key[2])
        if fast is not None:
            self._trusted[key] = Decimal(fast) / PICO == exact and trusted is not False
            if self._trusted[key] and rates is not None:
                self._fast[fast_key] = _fast_of(rates)
            else:
                self._fast.pop(fast_key, None)
        return Price(float(exact), None, version)

    def _rates(self, key: _Key, at: float) -> _Rates | None:
        if key not in self._models:
            self._models[key] = _rates_of(key, at)
        found: _Rates | None = self._models[key]
        return found


# A trusted model's rates, with the four base rates and the prompt size up to which no tier
# applies, so the common call is one sum (see `_quick`).
_Fast = tuple["_Rates", tuple[int | None, ...], int]


def _fast_of(rates: _Rates) -> _Fast:
    bases = tuple(None if rate is None else rate[0] for rate in rates)
    starts = [start for rate in rates if rate is not None for start, _ in rate[1]]
    return rates, bases, min(starts, default=2**63)


def _quick(found: _Fast, usage: Usage) -> int | None:
    """`_linear` for a prompt below every tier: the four counts times the base rates."""
    rates, (fresh_rate, read_rate, write_rate, out_rate), below = found
    total_in, out, read, write = usage
    total_in, read, write = total_in or 0, read or 0, write or 0
    if total_in > below:
        return _linear(rates, usage)
    fresh = total_in - read - write
    try:  # a rate of None times a count that is not zero: the library decides
        return (
            (fresh_rate * fresh if fresh else 0)  # type: ignore[operator]
            + (read_rate * read if read else 0)  # type: ignore[operator]
            + (write_rate * write if write else 0)  # type: ignore[operator]
            + (out_rate * out if out else 0)  # type: ignore[operator]
        )
    except TypeError:
        return None


def _linear(rates: _Rates, usage: Usage) -> int | None:
    """The per-token sum in pico-dollars (exact integers), or None when a count is of a kind
    the model has no per-token price for."""
    total_in, out, read, write = usage
    total_in, read, write = total_in or 0, read or 0, write or 0
    counts = (total_in - read - write, read, write, out or 0)
    cost = 0
    for rate, count in zip(rates, counts, strict=True):
        if not count:
            continue
        if rate is None:
            return None  # the library decides what an unpriced kind of token costs
        base, tiers = rate
        for start, tier_rate in tiers:  # highest first: the tier the prompt's size selects
            if total_in > start:
                base = tier_rate
                break
        cost += base * count
    return cost


# Per token kind: the base rate and the tiers (start, rate), highest start first, in
# pico-dollars per token; None for a kind the model has no price for.
_Rate = tuple[int, tuple[tuple[int, int], ...]]
_Rates = tuple[_Rate | None, ...]

# Prices a call's four counts cannot show: a model priced by these as well keeps the fast
# path (the counts are zero); one priced by anything else is priced by the library alone.
_ALSO_ALLOWED = {"cache_write_1h_mtok", "web_searches_kcount", "storage_searches_kcount"}


def _rates_of(key: _Key, at: float) -> _Rates | None:
    try:
        _, info = _snapshot().find_provider_model(key[1], None, key[0], None)
    except LookupError:
        return None
    if not _same_all_day(info):
        return None
    prices = info.get_prices(datetime.fromtimestamp(at, UTC))
    fields = {name: value for name, value in vars(prices).items() if value is not None}
    if not set(fields) <= set(_TOKEN_FIELDS) | _ALSO_ALLOWED:
        return None
    rates: list[_Rate | None] = []
    for name in _TOKEN_FIELDS:
        value = fields.get(name)
        if value is None:
            rates.append(None)
            continue
        tiers = getattr(value, "tiers", None)
        base = _pico(value.base if tiers is not None else value)
        steps = [(int(t.start), _pico(t.price)) for t in reversed(tiers or [])]
        if base is None or any(rate is None for _, rate in steps):
            return None
        rates.append((base, tuple((start, rate) for start, rate in steps if rate is not None)))
    return tuple(rates)


def _same_all_day(info: Any) -> bool:
    """Whether the model's price holds for a whole UTC day: it is unconditional, or changes
    only on a start date. A price by time of day (DeepSeek's off-peak hours) is not, and is
    priced by `calc_price` alone, as the rates are kept per day."""
    from genai_prices.types import ModelPrice, StartDateConstraint

    if isinstance(info.prices, ModelPrice):
        return True
    return all(
        each.constraint is None or isinstance(each.constraint, StartDateConstraint)
        for each in info.prices
    )


def _pico(per_million: Any) -> int | None:
    """USD per million tokens as whole pico-dollars per token; None if not whole."""
    value = Decimal(per_million) * 1_000_000
    return int(value) if value == value.to_integral_value() else None


_PRICES = _Prices()
