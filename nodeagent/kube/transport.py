"""The official client's HTTP transport, without its `ApiClient`.

`kubernetes.client.rest.RESTClientObject` does what we need of the client on the wire: TLS and
client certificates from the `Configuration`, the urllib3 pool, proxies, socket options, JSON
bodies by content type. `ApiClient` adds the generated API's (de)serialisation of model
classes, which nodeagent never uses, and imports pydantic for it (6.7 MiB of an idle agent's
54). What we keep of it: the URL from the configured host, and the auth header from
`Configuration.auth_settings()` on every request (it calls the configuration's refresh hook,
which in a pod rereads the rotated ServiceAccount token).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote, urlencode

from kubernetes.client.configuration import Configuration
from kubernetes.client.rest import RESTClientObject, RESTResponse

from nodeagent import version

__all__ = ["Transport"]


class Transport:
    """Raw REST requests to the configured API server, on one connection pool."""

    def __init__(self, configuration: Configuration) -> None:
        self.configuration = configuration
        self.rest = RESTClientObject(configuration)  # the official client's REST layer
        self.user_agent = f"nodeagent/{version()}"  # how the server's audit log names us

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
        settings: Mapping[str, Mapping[str, Any]] = self.configuration.auth_settings()  # type: ignore[assignment]
        for setting in settings.values():
            if setting["in"] == "header" and setting["value"]:
                sent[setting["key"]] = setting["value"]
        response: RESTResponse = self.rest.request(  # type: ignore[no-untyped-call]
            method, url, headers=sent, body=body, _request_timeout=timeout
        )
        return response

    def close(self) -> None:
        """Drop the pooled connections."""
        self.rest.close()
