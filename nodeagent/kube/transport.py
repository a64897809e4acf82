"""The official client's HTTP transport, without its `ApiClient`.

`kubernetes.client.rest.RESTClientObject` does what we need of the client on the wire: TLS and
client certificates from the `Configuration`, the urllib3 pool, proxies, socket options, JSON
bodies by content type. `ApiClient` adds the generated API's (de)serialisation of model
classes, which nodeagent never uses, and imports pydantic for it (6.7 MiB of an idle agent's
54). What we keep of it: the URL from the configured host, and the auth header from
`Configuration.auth_settings()`, asked again at most once a second (it calls the
configuration's refresh hook, which in a pod rereads the rotated ServiceAccount token).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote, urlencode

from kubernetes.client.configuration import Configuration
from kubernetes.client.rest import RESTClientObject, RESTResponse

from nodeagent import version
from nodeagent.kube.ratelimit import MonotonicClock

__all__ = ["Transport"]

# How long the auth header is reused. Asking for it runs the refresh hook, which re-applies the
# whole loaded config (the `host` setter scans os.environ for proxies): ~37 us a request, 6 % of
# a large drain's CPU. A header a second old is never one the hook had a reason to replace: the
# kubeconfig loader reloads a token with an expiry (exec plugin, gcp) from 5 min before it, the
# in-cluster loader rereads the ServiceAccount token file once a minute, other tokens are static.
_AUTH_REUSE = 1.0


class Transport:
    """Raw REST requests to the configured API server, on one connection pool."""

    def __init__(
        self, configuration: Configuration, *, clock: MonotonicClock = time.monotonic
    ) -> None:
        self.configuration = configuration
        self.rest = RESTClientObject(configuration)  # the official client's REST layer
        self.user_agent = f"nodeagent/{version()}"  # how the server's audit log names us
        self._clock = clock
        # (until when, the headers): requests run in threads, so the tuple is replaced whole;
        # two threads may both compute it when it lapses, which is harmless
        self._auth: tuple[float, tuple[tuple[str, str], ...]] = (float("-inf"), ())

    def request(
        self,
        method: str,
        path: str,
        query: Sequence[tuple[str, str]],
        headers: Mapping[str, str],
        body: Any,
        timeout: float | tuple[float, float | None],
    ) -> RESTResponse:
        """Send one request; the response is not read (the caller streams or reads it)."""
        url = self.configuration.host + path
        if query:
            url += "?" + urlencode(query, quote_via=quote)
        sent = {"User-Agent": self.user_agent, **headers}
        sent.update(self._auth_headers())
        response: RESTResponse = self.rest.request(  # type: ignore[no-untyped-call]
            method, url, headers=sent, body=body, _request_timeout=timeout
        )
        return response

    def _auth_headers(self) -> tuple[tuple[str, str], ...]:
        """The configuration's auth headers, as of at most `_AUTH_REUSE` seconds ago."""
        now = self._clock()
        until, auth = self._auth
        if now < until:
            return auth
        settings: Mapping[str, Mapping[str, Any]] = self.configuration.auth_settings()  # type: ignore[assignment]
        auth = tuple(
            (setting["key"], setting["value"])
            for setting in settings.values()
            if setting["in"] == "header" and setting["value"]
        )
        self._auth = (now + _AUTH_REUSE, auth)
        return auth

    def close(self) -> None:
        """Drop the pooled connections."""
        self.rest.close()
