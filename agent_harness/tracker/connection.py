"""PyGithub's connection to the tracker, with the environment's HTTP settings read once.

`requests` reads the proxy and CA-bundle variables again for every request, walking the whole
environment twice each time: about 1.2 ms of the interpreter per request, a seventh of the
harness's own CPU per item (`benchmarks/bench_run.py`). A tracker talks to one host for its
whole life, so its connection reads them once, when it is made, with the same rules `requests`
applies (`HTTP(S)_PROXY`, `ALL_PROXY`, `NO_PROXY`, `REQUESTS_CA_BUNDLE`, `CURL_CA_BUNDLE`);
a variable changed after that is not seen by that connection.
"""

from __future__ import annotations

from typing import Any

from github.Requester import HTTPRequestsConnectionClass, HTTPSRequestsConnectionClass, Requester

# Where PyGithub keeps the connection class a Requester makes its connections with (the
# class attribute `__connectionClass`, name-mangled). Were it renamed, the tracker goes on
# with PyGithub's own classes: slower, never wrong.
_CLASS = "_Requester__connectionClass"


def _read_environment(connection: Any) -> None:
    url = f"{connection.protocol}://{connection.host}:{connection.port}/"
    merged = connection.session.merge_environment_settings(url, {}, None, connection.verify, None)
    connection.session.proxies = merged["proxies"]
    connection.verify = merged["verify"]
    connection.session.trust_env = False


class _HTTP(HTTPRequestsConnectionClass):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _read_environment(self)


class _HTTPS(HTTPSRequestsConnectionClass):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _read_environment(self)


def read_environment_once(requester: Requester) -> None:
    """Make `requester`'s connections read the environment's HTTP settings when made, not at
    every request."""
    made_with = getattr(requester, _CLASS, None)
    if made_with is HTTPRequestsConnectionClass:
        setattr(requester, _CLASS, _HTTP)
    elif made_with is HTTPSRequestsConnectionClass:
        setattr(requester, _CLASS, _HTTPS)
