"""The classification table: real wire shapes from each vendor and the class they must get.

Every row names where its shape came from. Vendor docs first; where a vendor does not document
a signal (Anthropic's subscription `unified` headers, Claude Code / Codex output), the row cites
the public issue or source that shows the real bytes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from agent_harness.models.failures import Failure, FailureKind
from agent_harness.models.limits import next_midnight, parse_go_duration, parse_retry_after
from agent_harness.models.providers import classify_response

pytestmark = pytest.mark.unit

NOW = 1_767_225_600.0  # 2026-01-01T00:00:00Z

ANTHROPIC_ERRORS = "https://docs.anthropic.com/en/api/errors"
ANTHROPIC_RATE_LIMITS = "https://docs.anthropic.com/en/api/rate-limits"
ANTHROPIC_REFUSALS = (
    "https://docs.anthropic.com/en/docs/test-and-evaluate/strengthen-guardrails/"
    "handle-streaming-refusals"
)
ANTHROPIC_STREAMING = "https://docs.anthropic.com/en/docs/build-with-claude/streaming"
ANTHROPIC_UNIFIED = "https://github.com/anthropics/claude-code/issues/27508"
ANTHROPIC_UNIFIED_LATEST = "https://github.com/lidge-jun/opencodex/pull/3809"
ANTHROPIC_SPEND = (
    "https://learn.microsoft.com/en-us/microsoft-cloud/dev/dev-proxy/concepts/"
    "anthropic-529-overloaded-error"
)
OPENAI_ERRORS = "https://platform.openai.com/docs/guides/error-codes"
OPENAI_RATE_LIMITS = "https://platform.openai.com/docs/guides/rate-limits"
OPENAI_SPEND = "https://developers.openai.com/api/docs/guides/spend-limits"
OPENAI_ERRORS_FORUM = (
    "https://community.openai.com/t/api-error-codes-in-json-response-not-http-status/298219"
)
AZURE_CONTENT_FILTER = (
    "https://learn.microsoft.com/en-us/azure/ai-services/openai/concepts/content-filter"
)
GEMINI_TROUBLESHOOTING = "https://ai.google.dev/gemini-api/docs/troubleshooting"
GEMINI_RATE_LIMITS = "https://ai.google.dev/gemini-api/docs/rate-limits"
GEMINI_QUOTA_SHAPE = "https://github.com/google-gemini/gemini-cli/issues/8437"
GEMINI_SAFETY = "https://ai.google.dev/api/generate-content#PromptFeedback"
OPENROUTER_ERRORS = "https://openrouter.ai/docs/api/reference/errors-and-debugging"
LITELLM_BUDGET = "https://github.com/BerriAI/litellm/issues/14144"
DEEPSEEK_ERRORS = "https://api-docs.deepseek.com/quick_start/error_codes"
HTTP_SEMANTICS = "https://www.rfc-editor.org/rfc/rfc9110#field.retry-after"
VLLM_OPENAI_SERVER = "https://docs.vllm.ai/en/latest/serving/openai_compatible_server.html"


@dataclass(frozen=True)
class Row:
    name: str
    vendor: str
    status: int
    body: Any
    kind: FailureKind | None
    source: str
    headers: dict[str, str] = field(default_factory=dict)
    reset_at: float | None = None
    retry_after: float | None = None


def anthropic_error(etype: str, message: str, **extra: Any) -> dict[str, Any]:
    error: dict[str, Any] = {"type": etype, "message": message, **extra}
    return {"type": "error", "error": error, "request_id": "req_011CSHoEeqs5C35K2UUqR7Fy"}


def openai_error(message: str, etype: str, code: str | None) -> dict[str, Any]:
    return {"error": {"message": message, "type": etype, "param": None, "code": code}}


def google_error(code: int, status: str, message: str, details: list[Any]) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "status": status, "details": details}}


QUOTA = "type.googleapis.com/google.rpc.QuotaFailure"
RETRY = "type.googleapis.com/google.rpc.RetryInfo"
HTML_502 = (
    "<html><head><title>502 Bad Gateway</title></head><body><center><h1>502 Bad Gateway"
    "</h1></center><hr><center>nginx</center></body></html>"
)

ROWS: list[Row] = [
    # ---------------------------------------------------------------- Anthropic
    Row(
        "anthropic 429 with retry-after is a burst",
        "anthropic",
        429,
        anthropic_error("rate_limit_error", "Number of request tokens has exceeded your limit."),
        FailureKind.BURST,
        ANTHROPIC_RATE_LIMITS,
        headers={"retry-after": "20"},
        retry_after=20.0,
    ),
    Row(
        "anthropic 429 reads the RFC 3339 reset of the exhausted bucket",
        "anthropic",
        429,
        anthropic_error("rate_limit_error", "This request would exceed your rate limit."),
        FailureKind.BURST,
        ANTHROPIC_RATE_LIMITS,
        headers={
            "anthropic-ratelimit-tokens-remaining": "0",
            "anthropic-ratelimit-tokens-reset": "2026-01-01T00:00:30Z",
            "anthropic-ratelimit-requests-remaining": "12",
            "anthropic-ratelimit-requests-reset": "2026-01-01T00:00:02Z",
        },
        reset_at=NOW + 30,
    ),
    Row(
        "anthropic spend cap in error.details is a cap",
        "anthropic",
        429,
        anthropic_error(
            "rate_limit_error",
            "You have reached your monthly spend limit.",
            details={"error_code": "enforced_spend_limit_reached"},
        ),
        FailureKind.CAP,
        ANTHROPIC_SPEND,
    ),
    Row(
        "anthropic spend cap named only in the message is a cap",
        "anthropic",
        429,
        anthropic_error("rate_limit_error", "enforced_spend_limit_reached: usage paused"),
        FailureKind.CAP,
        ANTHROPIC_SPEND,
    ),
    Row(
        "anthropic credit balance too low (400) is a cap",
        "anthropic",
        400,
        anthropic_error(
            "invalid_request_error",
            "Your credit balance is too low to access the Anthropic API. Please go to Plans & "
            "Billing to upgrade or purchase credits.",
        ),
        FailureKind.CAP,
        ANTHROPIC_ERRORS,
    ),
    Row(
        "anthropic credit balance too low (429) is a cap, not a burst",
        "anthropic",
        429,
        anthropic_error("rate_limit_error", "Your credit balance is too low."),
        FailureKind.CAP,
        ANTHROPIC_ERRORS,
        headers={"retry-after": "5"},
    ),
    Row(
        "anthropic 402 billing_error is a cap",
        "anthropic",
        402,
        anthropic_error("billing_error", "There is an issue with your billing."),
        FailureKind.CAP,
        ANTHROPIC_ERRORS,
    ),
    Row(
        "anthropic workspace spend limit (400) is a cap",
        "anthropic",
        400,
        anthropic_error(
            "invalid_request_error",
            "You have reached your specified API usage limits. You will regain access on "
            "2026-02-01 at 00:00 UTC.",
        ),
        FailureKind.CAP,
        ANTHROPIC_ERRORS,
    ),
    Row(
        "anthropic 529 overloaded_error is overload",
        "anthropic",
        529,
        anthropic_error("overloaded_error", "Overloaded"),
        FailureKind.OVERLOAD,
        ANTHROPIC_ERRORS,
    ),
    Row(
        "anthropic unified 5h window rejected parks until its reset",
        "anthropic",
        429,
        anthropic_error("rate_limit_error", "This request would exceed your account's rate limit."),
        FailureKind.WINDOW,
        ANTHROPIC_UNIFIED,
        headers={
            "anthropic-ratelimit-unified-status": "rejected",
            "anthropic-ratelimit-unified-reset": str(int(NOW + 3600)),
            "anthropic-ratelimit-unified-5h-status": "rejected",
            "anthropic-ratelimit-unified-5h-reset": str(int(NOW + 3600)),
            "anthropic-ratelimit-unified-7d-status": "allowed",
            "anthropic-ratelimit-unified-7d-reset": str(int(NOW + 400000)),
        },
        reset_at=NOW + 3600,
    ),
    Row(
        "anthropic two rejected windows use the LATEST reset",
        "anthropic",
        429,
        anthropic_error("rate_limit_error", "This request would exceed your account's rate limit."),
        FailureKind.WINDOW,
        ANTHROPIC_UNIFIED_LATEST,
        headers={
            "anthropic-ratelimit-unified-5h-status": "rejected",
            "anthropic-ratelimit-unified-5h-reset": str(int(NOW + 600)),
            "anthropic-ratelimit-unified-7d-status": "rejected",
            "anthropic-ratelimit-unified-7d-reset": str(int(NOW + 3 * 86400)),
            "retry-after": "600",
        },
        reset_at=NOW + 3 * 86400,
    ),
    Row(
        "anthropic unified status rejected alone (no per-window headers) is a window",
        "anthropic",
        429,
        anthropic_error("rate_limit_error", "Rate limited"),
        FailureKind.WINDOW,
        ANTHROPIC_UNIFIED,
        headers={
            "anthropic-ratelimit-unified-status": "rejected",
            "anthropic-ratelimit-unified-reset": str(int(NOW + 7200)),
        },
        reset_at=NOW + 7200,
    ),
    Row(
        "anthropic 200 with stop_reason refusal is a refusal",
        "anthropic",
        200,
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "content": [{"type": "text", "text": "Hello.."}],
            "stop_reason": "refusal",
            "usage": {"input_tokens": 10, "output_tokens": 2},
        },
        FailureKind.REFUSAL,
        ANTHROPIC_REFUSALS,
    ),
    Row(
        "anthropic 200 end_turn is a success",
        "anthropic",
        200,
        {
            "id": "msg_2",
            "type": "message",
            "role": "assistant",
            "content": [{"type": "text", "text": "Done."}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 10, "output_tokens": 2},
        },
        None,
        ANTHROPIC_ERRORS,
    ),
    Row(
        "anthropic prompt is too long is context_too_long",
        "anthropic",
        400,
        anthropic_error(
            "invalid_request_error", "prompt is too long: 214312 tokens > 200000 maximum"
        ),
        FailureKind.CONTEXT_TOO_LONG,
        ANTHROPIC_ERRORS,
    ),
    Row(
        "anthropic 401 authentication_error is auth",
        "anthropic",
        401,
        anthropic_error("authentication_error", "invalid x-api-key"),
        FailureKind.AUTH,
        ANTHROPIC_ERRORS,
    ),
    Row(
        "anthropic 403 permission_error is auth",
        "anthropic",
        403,
        anthropic_error("permission_error", "Your API key does not have permission."),
        FailureKind.AUTH,
        ANTHROPIC_ERRORS,
    ),
    Row(
        "anthropic 400 invalid_request_error is bad_request",
        "anthropic",
        400,
        anthropic_error("invalid_request_error", "max_tokens: Field required"),
        FailureKind.BAD_REQUEST,
        ANTHROPIC_ERRORS,
    ),
    Row(
        "anthropic 413 request_too_large is bad_request",
        "anthropic",
        413,
        anthropic_error(
            "request_too_large", "Request exceeds the maximum allowed number of bytes."
        ),
        FailureKind.BAD_REQUEST,
        ANTHROPIC_ERRORS,
    ),
    Row(
        "anthropic 500 api_error is server",
        "anthropic",
        500,
        anthropic_error("api_error", "Internal server error"),
        FailureKind.SERVER,
        ANTHROPIC_ERRORS,
    ),
    Row(
        "anthropic overloaded error event inside a 200 stream is overload",
        "anthropic",
        200,
        "event: message_start\ndata: "
        + json.dumps({"type": "message_start", "message": {"id": "m", "usage": {}}})
        + "\n\nevent: error\ndata: "
        + json.dumps(anthropic_error("overloaded_error", "Overloaded"))
        + "\n\n",
        FailureKind.OVERLOAD,
        ANTHROPIC_STREAMING,
    ),
    # ---------------------------------------------------------------- OpenAI
    Row(
        "openai 429 rate_limit_exceeded waits for the Go-duration reset",
        "openai",
        429,
        openai_error(
            "Rate limit reached for gpt-4o in organization org-x on tokens per min (TPM): "
            "Limit 30000, Used 30000, Requested 900.",
            "tokens",
            "rate_limit_exceeded",
        ),
        FailureKind.BURST,
        OPENAI_RATE_LIMITS,
        headers={"x-ratelimit-reset-requests": "1.5s", "x-ratelimit-reset-tokens": "6m0s"},
        reset_at=NOW + 360,
        retry_after=360.0,
    ),
    Row(
        "openai 429 with retry-after honours it",
        "openai",
        429,
        openai_error("Rate limit reached for requests", "requests", "rate_limit_exceeded"),
        FailureKind.BURST,
        OPENAI_RATE_LIMITS,
        headers={"retry-after": "2", "x-ratelimit-reset-requests": "20ms"},
        retry_after=2.0,
    ),
    Row(
        "openai 429 Request too large can never pass by waiting",
        "openai",
        429,
        openai_error(
            "Request too large for gpt-4o in organization org-x on tokens per min (TPM): "
            "Limit 30000, Requested 45000. The input or output tokens must be reduced.",
            "tokens",
            "rate_limit_exceeded",
        ),
        FailureKind.CONTEXT_TOO_LONG,
        OPENAI_RATE_LIMITS,
    ),
    Row(
        "openai 429 insufficient_quota is a cap",
        "openai",
        429,
        openai_error(
            "You exceeded your current quota, please check your plan and billing details.",
            "insufficient_quota",
            "insufficient_quota",
        ),
        FailureKind.CAP,
        OPENAI_ERRORS,
    ),
    Row(
        "openai 400 billing_hard_limit_reached is a cap, not a bad request",
        "openai",
        400,
        openai_error(
            "Billing hard limit has been reached",
            "invalid_request_error",
            "billing_hard_limit_reached",
        ),
        FailureKind.CAP,
        OPENAI_ERRORS,
    ),
    Row(
        "openai 429 billing_not_active is a cap",
        "openai",
        429,
        openai_error(
            "Your account is not active, please check your billing details on our website.",
            "billing_not_active",
            "billing_not_active",
        ),
        FailureKind.CAP,
        OPENAI_ERRORS,
    ),
    Row(
        "a LiteLLM proxy's 429 budget_exceeded is a cap, not a burst",
        "openai",
        429,
        openai_error(
            "Budget has been exceeded! Current cost: 9.76, Max budget: 9.75",
            "budget_exceeded",
            "429",
        ),
        FailureKind.CAP,
        LITELLM_BUDGET,
    ),
    Row(
        "a LiteLLM proxy's 400 budget_exceeded is a cap, not a bad request",
        "openai",
        400,
        openai_error(
            "LiteLLM User: engineer-1, exceeded budget for model=gpt-4o",
            "budget_exceeded",
            "400",
        ),
        FailureKind.CAP,
        LITELLM_BUDGET,
    ),
    Row(
        "DeepSeek's 402 Insufficient Balance is a cap",
        "openai",
        402,
        openai_error("Insufficient Balance", "unknown_error", "invalid_request_error"),
        FailureKind.CAP,
        DEEPSEEK_ERRORS,
    ),
    Row(
        "openai 429 credit_balance_exhausted is a cap",
        "openai",
        429,
        openai_error(
            "Your credit balance is exhausted.", "insufficient_quota", "credit_balance_exhausted"
        ),
        FailureKind.CAP,
        OPENAI_ERRORS,
    ),
    Row(
        "openai 429 organization_spend_limit_exceeded is a cap",
        "openai",
        429,
        openai_error(
            "Organization spend limit reached.", "requests", "organization_spend_limit_exceeded"
        ),
        FailureKind.CAP,
        OPENAI_SPEND,
    ),
    Row(
        "openai 429 project_spend_limit_exceeded is a cap",
        "openai",
        429,
        openai_error("Project spend limit reached.", "requests", "project_spend_limit_exceeded"),
        FailureKind.CAP,
        OPENAI_SPEND,
    ),
    Row(
        "openai 400 context_length_exceeded",
        "openai",
        400,
        openai_error(
            "This model's maximum context length is 128000 tokens. However, your messages "
            "resulted in 131072 tokens.",
            "invalid_request_error",
            "context_length_exceeded",
        ),
        FailureKind.CONTEXT_TOO_LONG,
        OPENAI_ERRORS_FORUM,
    ),
    Row(
        "openai 400 invalid_prompt is a refusal",
        "openai",
        400,
        openai_error(
            "Invalid prompt: your prompt was flagged as potentially violating our usage policy.",
            "invalid_request_error",
            "invalid_prompt",
        ),
        FailureKind.REFUSAL,
        OPENAI_ERRORS,
    ),
    Row(
        "azure openai 400 content_filter is a refusal",
        "openai",
        400,
        openai_error(
            "The response was filtered due to the prompt triggering content management policy.",
            "invalid_request_error",
            "content_filter",
        ),
        FailureKind.REFUSAL,
        AZURE_CONTENT_FILTER,
    ),
    Row(
        "openai 200 finish_reason content_filter is a refusal",
        "openai",
        200,
        {
            "id": "c",
            "object": "chat.completion",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": ""},
                    "finish_reason": "content_filter",
                }
            ],
        },
        FailureKind.REFUSAL,
        AZURE_CONTENT_FILTER,
    ),
    Row(
        "openai 503 server_is_overloaded is overload",
        "openai",
        503,
        openai_error("The server is overloaded.", "server_error", "server_is_overloaded"),
        FailureKind.OVERLOAD,
        OPENAI_ERRORS,
    ),
    Row(
        "openai 503 engine is overloaded (no code) is overload",
        "openai",
        503,
        openai_error(
            "The engine is currently overloaded, please try again later", "server_error", None
        ),
        FailureKind.OVERLOAD,
        OPENAI_ERRORS,
    ),
    Row(
        "openai 500 is server",
        "openai",
        500,
        openai_error(
            "The server had an error while processing your request.", "server_error", None
        ),
        FailureKind.SERVER,
        OPENAI_ERRORS,
    ),
    Row(
        "openai 502 HTML page from a proxy is server",
        "openai",
        502,
        HTML_502,
        FailureKind.SERVER,
        OPENAI_ERRORS,
        headers={"content-type": "text/html"},
    ),
    Row(
        "openai 401 invalid_api_key is auth",
        "openai",
        401,
        openai_error(
            "Incorrect API key provided: sk-abc.", "invalid_request_error", "invalid_api_key"
        ),
        FailureKind.AUTH,
        OPENAI_ERRORS,
    ),
    # ---------------------------------------------------------------- Gemini
    Row(
        "gemini per-day free-tier quota is a window despite a short RetryInfo",
        "gemini",
        429,
        google_error(
            429,
            "RESOURCE_EXHAUSTED",
            "You exceeded your current quota, please check your plan and billing details.",
            [
                {
                    "@type": QUOTA,
                    "violations": [
                        {
                            "quotaMetric": "generativelanguage.googleapis.com/"
                            "generate_content_free_tier_requests",
                            "quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier",
                            "quotaDimensions": {"location": "global", "model": "gemini-2.5-pro"},
                        }
                    ],
                },
                {"@type": RETRY, "retryDelay": "24s"},
            ],
        ),
        FailureKind.WINDOW,
        GEMINI_QUOTA_SHAPE,
        reset_at=NOW + 8 * 3600,  # next midnight in America/Los_Angeles (PST, UTC-8)
    ),
    Row(
        "gemini per-minute quota is a burst using RetryInfo",
        "gemini",
        429,
        google_error(
            429,
            "RESOURCE_EXHAUSTED",
            "You exceeded your current quota. Please retry in 20.5s.",
            [
                {
                    "@type": QUOTA,
                    "violations": [
                        {"quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier"}
                    ],
                },
                {"@type": RETRY, "retryDelay": "20.5s"},
            ],
        ),
        FailureKind.BURST,
        GEMINI_RATE_LIMITS,
        retry_after=20.5,
        reset_at=NOW + 20.5,
    ),
    Row(
        "gemini per-minute and per-day both violated is a window",
        "gemini",
        429,
        google_error(
            429,
            "RESOURCE_EXHAUSTED",
            "You exceeded your current quota.",
            [
                {
                    "@type": QUOTA,
                    "violations": [
                        {"quotaId": "GenerateContentInputTokensPerModelPerMinute-FreeTier"},
                        {"quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier"},
                    ],
                },
                {"@type": RETRY, "retryDelay": "3s"},
            ],
        ),
        FailureKind.WINDOW,
        GEMINI_QUOTA_SHAPE,
        reset_at=NOW + 8 * 3600,
    ),
    Row(
        "gemini 503 UNAVAILABLE is overload",
        "gemini",
        503,
        google_error(503, "UNAVAILABLE", "The model is overloaded. Please try again later.", []),
        FailureKind.OVERLOAD,
        GEMINI_TROUBLESHOOTING,
    ),
    Row(
        "gemini 400 token count too big is context_too_long",
        "gemini",
        400,
        google_error(
            400,
            "INVALID_ARGUMENT",
            "The input token count (1200000) exceeds the maximum number of tokens allowed "
            "(1048576).",
            [],
        ),
        FailureKind.CONTEXT_TOO_LONG,
        GEMINI_TROUBLESHOOTING,
    ),
    Row(
        "gemini 400 other INVALID_ARGUMENT is bad_request",
        "gemini",
        400,
        google_error(400, "INVALID_ARGUMENT", "Invalid JSON payload received.", []),
        FailureKind.BAD_REQUEST,
        GEMINI_TROUBLESHOOTING,
    ),
    Row(
        "gemini 400 API_KEY_INVALID is auth",
        "gemini",
        400,
        google_error(
            400,
            "INVALID_ARGUMENT",
            "API key not valid. Please pass a valid API key.",
            [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID"}],
        ),
        FailureKind.AUTH,
        GEMINI_TROUBLESHOOTING,
    ),
    Row(
        "gemini 403 PERMISSION_DENIED is auth",
        "gemini",
        403,
        google_error(403, "PERMISSION_DENIED", "Your API key does not have permission.", []),
        FailureKind.AUTH,
        GEMINI_TROUBLESHOOTING,
    ),
    Row(
        "gemini 200 promptFeedback blockReason SAFETY is a refusal",
        "gemini",
        200,
        {"promptFeedback": {"blockReason": "SAFETY", "safetyRatings": []}},
        FailureKind.REFUSAL,
        GEMINI_SAFETY,
    ),
    Row(
        "gemini 500 INTERNAL is server",
        "gemini",
        500,
        google_error(500, "INTERNAL", "An internal error has occurred.", []),
        FailureKind.SERVER,
        GEMINI_TROUBLESHOOTING,
    ),
    # ---------------------------------------------------------------- OpenRouter
    Row(
        "openrouter 402 is a cap",
        "openrouter",
        402,
        {"error": {"code": 402, "message": "Insufficient credits. Add more using /credits"}},
        FailureKind.CAP,
        OPENROUTER_ERRORS,
    ),
    Row(
        "openrouter 429 is a burst",
        "openrouter",
        429,
        {"error": {"code": 429, "message": "Rate limit exceeded: free-models-per-min."}},
        FailureKind.BURST,
        OPENROUTER_ERRORS,
        headers={"retry-after": "7"},
        retry_after=7.0,
    ),
    Row(
        "openrouter 403 with moderation metadata is a refusal",
        "openrouter",
        403,
        {
            "error": {
                "code": 403,
                "message": "Input was flagged by moderation",
                "metadata": {
                    "reasons": ["violence"],
                    "flagged_input": "…",
                    "provider_name": "OpenAI",
                    "model_slug": "openai/gpt-4o",
                },
            }
        },
        FailureKind.REFUSAL,
        OPENROUTER_ERRORS,
    ),
    Row(
        "openrouter 401 is auth",
        "openrouter",
        401,
        {"error": {"code": 401, "message": "No auth credentials found"}},
        FailureKind.AUTH,
        OPENROUTER_ERRORS,
    ),
    Row(
        "openrouter error object inside a 200 body counts",
        "openrouter",
        200,
        {"error": {"code": 502, "message": "Provider returned error"}},
        FailureKind.SERVER,
        OPENROUTER_ERRORS,
    ),
    Row(
        "openrouter error inside an SSE chunk counts",
        "openrouter",
        200,
        'data: {"id":"gen-1","choices":[{"delta":{"content":"Hi"}}]}\n\n'
        'data: {"id":"gen-1","error":{"code":"server_error","message":"Provider disconnected"},'
        '"choices":[{"delta":{"content":""},"finish_reason":"error"}]}\n\n',
        FailureKind.SERVER,
        OPENROUTER_ERRORS,
    ),
    Row(
        "openrouter 503 no provider available is overload",
        "openrouter",
        503,
        {"error": {"code": 503, "message": "No endpoints found that can handle the request"}},
        FailureKind.OVERLOAD,
        OPENROUTER_ERRORS,
    ),
    # ---------------------------------------------------------------- generic
    Row(
        "generic 429 with an HTTP-date retry-after is a burst",
        "generic",
        429,
        "Too Many Requests",
        FailureKind.BURST,
        HTTP_SEMANTICS,
        headers={"Retry-After": "Thu, 01 Jan 2026 00:00:45 GMT"},
        retry_after=45.0,
    ),
    Row(
        "generic vLLM context overflow is context_too_long",
        "generic",
        400,
        {
            "object": "error",
            "message": "This model's maximum context length is 8192 tokens. However, you "
            "requested 9000 tokens.",
            "type": "BadRequestError",
            "code": 400,
        },
        FailureKind.CONTEXT_TOO_LONG,
        VLLM_OPENAI_SERVER,
    ),
    Row(
        "generic 503 is overload",
        "generic",
        503,
        "Service Unavailable",
        FailureKind.OVERLOAD,
        HTTP_SEMANTICS,
    ),
    Row(
        "generic 404 unknown model is bad_request",
        "generic",
        404,
        {"error": {"message": "The model `nope` does not exist.", "type": "NotFoundError"}},
        FailureKind.BAD_REQUEST,
        VLLM_OPENAI_SERVER,
    ),
    Row(
        "generic 502 HTML page is server",
        "generic",
        502,
        HTML_502,
        FailureKind.SERVER,
        HTTP_SEMANTICS,
    ),
]


def _body(value: Any) -> bytes:
    return value.encode() if isinstance(value, str) else json.dumps(value).encode()


def test_the_table_is_big_enough_and_every_row_cites_a_source() -> None:
    assert len(ROWS) >= 35
    assert all(row.source.startswith("https://") for row in ROWS)
    assert len({row.name for row in ROWS}) == len(ROWS)


@pytest.mark.parametrize("row", ROWS, ids=[row.name for row in ROWS])
def test_classification_table(row: Row) -> None:
    failure = classify_response(row.vendor, row.status, row.headers, _body(row.body), now=NOW)
    if row.kind is None:
        assert failure is None
        return
    assert isinstance(failure, Failure)
    assert failure.kind is row.kind, failure.describe()
    assert failure.vendor == row.vendor
    assert failure.message.strip()
    assert "\n" not in failure.describe()
    if row.reset_at is not None:
        assert failure.reset_at == pytest.approx(row.reset_at, abs=0.01)
    if row.retry_after is not None:
        assert failure.retry_after == pytest.approx(row.retry_after, abs=0.01)


def test_only_burst_overload_and_server_are_retryable() -> None:
    retryable = {k for k in FailureKind if Failure(k, "x", None, "m").retryable}
    assert retryable == {FailureKind.BURST, FailureKind.OVERLOAD, FailureKind.SERVER}


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("6m0s", 360.0), ("1.5s", 1.5), ("20ms", 0.02), ("1h2m3s", 3723.0), ("0s", 0.0)],
)
def test_go_durations(text: str, seconds: float) -> None:
    assert parse_go_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "soon", "6m0", "m6s", "1x"])
def test_not_go_durations(text: str) -> None:
    assert parse_go_duration(text) is None


def test_retry_after_ms_wins_over_retry_after() -> None:
    assert parse_retry_after({"retry-after-ms": "1500", "retry-after": "9"}, NOW) == 1.5


def test_html_proxy_page_message_is_its_title_not_markup() -> None:
    failure = classify_response("openai", 502, {}, HTML_502.encode(), now=NOW)
    assert failure is not None
    assert failure.message == "502 Bad Gateway"


def test_gemini_day_reset_follows_pacific_daylight_time() -> None:
    summer = 1_782_864_000.0  # 2026-07-01T00:00:00Z = 2026-06-30 17:00 PDT
    assert next_midnight(summer, "America/Los_Angeles") == summer + 7 * 3600
