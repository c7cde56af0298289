"""One HTTP exchange with a model endpoint, behind a Protocol so tests can inject their own.

The client only ever needs "send this request, give me the whole answer or say why not", so
a transport returns status, headers and body in one piece and turns every way the exchange
can break (timeout, refused, reset, protocol) into one `TransportFailed`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

from agent_harness.errors import HarnessError

if TYPE_CHECKING:
    import httpx


class TransportFailed(HarnessError):
    """The HTTP exchange itself failed: timeout, refused or reset connection."""

    def __init__(
        self, reason: Literal["timeout", "connect", "reset", "protocol"], url: str, detail: str
    ) -> None:
        self.reason = reason
        self.url = url
        super().__init__(f"{reason} talking to {url}: {detail}")


@dataclass(frozen=True)
class HttpRequest:
    """One request, ready to send. `stream` asks the endpoint for server-sent events."""

    method: str
    url: str
    headers: Mapping[str, str]
    json_body: Any
    timeout: float
    stream: bool = False


@dataclass(frozen=True)
class HttpResponse:
    """A whole answer: the body is read to its end before the client looks at it."""

    status: int
    headers: Mapping[str, str]
    body: bytes


class Transport(Protocol):
    """Sends one request and returns the whole response, or raises `TransportFailed`."""

    def send(self, request: HttpRequest) -> HttpResponse: ...


class HttpxTransport:
    """The default transport. The deadline covers the whole exchange, so a server that
    trickles a stream forever still ends at `timeout`."""

    def __init__(self, client: httpx.Client | None = None) -> None:
        import httpx

        self._httpx = httpx
        self._client = client or httpx.Client(follow_redirects=False)

    def close(self) -> None:
        self._client.close()

    def send(self, request: HttpRequest) -> HttpResponse:
        httpx = self._httpx
        deadline = time.monotonic() + request.timeout
        try:
            with self._client.stream(
                request.method,
                request.url,
                headers=dict(request.headers),
                json=request.json_body,
                timeout=httpx.Timeout(request.timeout),
            ) as response:
                chunks: list[bytes] = []
                for chunk in response.iter_bytes():
                    chunks.append(chunk)
                    if time.monotonic() > deadline:
                        raise TransportFailed(
                            "timeout", request.url, f"no complete answer in {request.timeout}s"
                        )
                return HttpResponse(response.status_code, dict(response.headers), b"".join(chunks))
        except httpx.TimeoutException as exc:
            raise TransportFailed(
                "timeout", request.url, f"no answer in {request.timeout}s ({type(exc).__name__})"
            ) from exc
        except httpx.ConnectError as exc:
            raise TransportFailed("connect", request.url, str(exc) or "connection refused") from exc
        except (httpx.ReadError, httpx.RemoteProtocolError, httpx.WriteError) as exc:
            raise TransportFailed(
                "reset", request.url, f"connection dropped mid-answer ({exc or type(exc).__name__})"
            ) from exc
        except httpx.HTTPError as exc:
            raise TransportFailed("protocol", request.url, str(exc) or type(exc).__name__) from exc
