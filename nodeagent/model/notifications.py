"""Notifications of a node's shutdown, as data: which events there are, what a webhook's body
says, whether a failed delivery is worth another attempt. Pure; the sender is
`nodeagent.notify`.

Templates are `string.Template`s (`${node}`), substituted once with the event's fields: a
value is never read as a template or code, whatever it holds. A template that is a mapping or
list gives a JSON body (every string in it substituted, then serialised, so the body is valid
JSON whatever the values); a template that is a string gives a plain-text body.
"""

from __future__ import annotations

import ipaddress
import json
import math
import re
import string
import urllib.parse
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from nodeagent.model.backoff import capped_exponential

__all__ = [
    "DRAIN_STARTED",
    "EVENTS",
    "LOCK_RELEASED",
    "NODE_BACK",
    "PLACEHOLDERS",
    "InvalidSetting",
    "Notification",
    "Notify",
    "check_header",
    "check_template",
    "check_url",
    "redact",
    "render",
    "retry_delay",
    "retryable",
]

DRAIN_STARTED = "drainStarted"  # the shutdown maintenance was created: the drain begins
LOCK_RELEASED = "lockReleased"  # the shutdown lock goes: drained, budget spent, or no API server
NODE_BACK = "nodeBack"  # after the reboot: the node is Ready and its maintenance completed
EVENTS = (DRAIN_STARTED, LOCK_RELEASED, NODE_BACK)
PLACEHOLDERS = ("event", "node", "maintenance", "reason", "time")

JSON = "application/json"
TEXT = "text/plain; charset=utf-8"

# RFC 9110 token: what a header name may be
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
# DNS labels of letters, digits, '-' (and '_', which internal names use), a trailing dot allowed
_LABEL = r"[0-9A-Za-z_]([0-9A-Za-z_-]{0,61}[0-9A-Za-z_])?"
_HOST = re.compile(rf"{_LABEL}(\.{_LABEL})*\.?")


class InvalidSetting(ValueError):
    """A webhook setting that cannot work; the message is one line, without the setting's
    name (the caller knows where it was)."""


@dataclass(frozen=True)
class Notification:
    event: str
    node: str
    maintenance: str  # "" when there is none (the lock went before one could be created)
    reason: str
    time: str  # RFC 3339, UTC: when it happened (not when it was sent)

    def fields(self) -> dict[str, str]:
        return asdict(self)


class Notify(Protocol):
    """Where the shutdown flow reports an event; returns at once (never waits on a delivery)."""

    def __call__(self, event: str, node: str, maintenance: str, reason: str) -> None: ...


def no_notifications(event: str, node: str, maintenance: str, reason: str) -> None:
    """The default `Notify`: nothing is configured."""


# -- templates -------------------------------------------------------------------------------


def check_template(template: object) -> None:
    """Raises `InvalidSetting` unless `template` is a string, or a mapping/list of JSON values
    whose strings are valid templates naming known placeholders only."""
    if isinstance(template, str):
        _check_string(template, "")
        return
    if not isinstance(template, Mapping | list):
        raise InvalidSetting(
            f"must be a string (a text body) or a mapping or list (a JSON body), got {template!r}"
        )
    _check_json(template, "")


def _check_json(value: object, path: str) -> None:
    if isinstance(value, str):
        _check_string(value, path)
    elif isinstance(value, Mapping):
        for k, v in value.items():
            if not isinstance(k, str):
                raise InvalidSetting(f"{_at(path)}key {k!r} is not a string")
            _check_json(v, f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _check_json(v, f"{path}[{i}]")
    elif value is not None and not isinstance(value, bool | int | float):
        raise InvalidSetting(f"{_at(path)}{value!r} is not a JSON value")
    elif isinstance(value, float) and not math.isfinite(value):
        raise InvalidSetting(f"{_at(path)}{value!r} is not a JSON number")


def _at(path: str) -> str:
    """Messages start with the path inside the template (`.text: `, `[0]: `), if any."""
    return f"{path}: " if path else ""


def _check_string(text: str, path: str) -> None:
    where = _at(path)
    t = string.Template(text)
    if not t.is_valid():
        raise InvalidSetting(
            f"{where}{text!r} has a '$' that starts no placeholder (write $$ for a dollar sign)"
        )
    unknown = [p for p in t.get_identifiers() if p not in PLACEHOLDERS]
    if unknown:
        raise InvalidSetting(
            f"{where}unknown placeholder ${{{unknown[0]}}} (known: {', '.join(PLACEHOLDERS)})"
        )


def render(template: object, n: Notification) -> tuple[bytes, str]:
    """The body and its content type. `template` None: the default JSON object of the
    notification's fields; else a template that `check_template` accepted."""
    fields = n.fields()
    if template is None:
        return json.dumps(fields).encode(), JSON
    if isinstance(template, str):
        return string.Template(template).substitute(fields).encode(), TEXT
    return json.dumps(_substitute(template, fields)).encode(), JSON


def _substitute(value: Any, fields: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        return string.Template(value).substitute(fields)
    if isinstance(value, Mapping):
        return {k: _substitute(v, fields) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, fields) for v in value]
    return value


# -- URLs and headers ------------------------------------------------------------------------


def check_url(url: object) -> str:
    """An absolute http:// or https:// URL with a host; raises `InvalidSetting`."""
    if not isinstance(url, str) or not url:
        raise InvalidSetting(f"must be an http:// or https:// URL, got {url!r}")
    if any(c.isspace() or not c.isprintable() for c in url):
        raise InvalidSetting(f"{redact(url)!r} holds spaces or control characters")
    if "\\" in url:
        # parsers disagree on it (WHATWG reads '/', RFC 3986 refuses it)
        raise InvalidSetting("a backslash is no part of a URL (write / or %5C)")
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port  # reading it checks it
    except ValueError as e:
        raise InvalidSetting(f"not a URL: {e}") from None
    if parts.scheme not in ("http", "https"):
        got = f" (not {parts.scheme}://)" if parts.scheme else ""
        raise InvalidSetting(f"must start with http:// or https://{got}")
    if not parts.hostname:
        raise InvalidSetting(f"{redact(url)!r} names no host")
    if not _HOST.fullmatch(parts.hostname) and not _ip(parts.hostname):
        raise InvalidSetting(
            f"{parts.hostname!r} is not a host name (ASCII labels; an IDN host as xn--...)"
        )
    if port == 0:
        raise InvalidSetting(f"{redact(url)!r}: port 0 is no port to send to")
    if parts.fragment:
        raise InvalidSetting(f"{redact(url)!r}: a #fragment is never sent")
    return url


def _ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def redact(url: str) -> str:
    """What logs may show of a webhook's URL: scheme, host and port. Webhook URLs often carry
    their secret in the path or query (Slack's do), or a password before the host."""
    try:
        parts = urllib.parse.urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "<not a URL>"
    if ":" in host:
        host = f"[{host}]"
    return f"{parts.scheme}://{host}{port}/..." if parts.scheme else "<not a URL>"


def check_header(name: object, value: object) -> None:
    """A header name (an HTTP token) and a value on one line; raises `InvalidSetting`."""
    if not isinstance(name, str) or not _TOKEN.fullmatch(name):
        raise InvalidSetting(f"{name!r} is not a header name")
    if not isinstance(value, str):
        raise InvalidSetting(f"{name}: the value must be a string, got {type(value).__name__}")
    if any(c in value for c in "\r\n\0"):
        raise InvalidSetting(f"{name}: the value must be one line")


# -- delivery --------------------------------------------------------------------------------


def retryable(status: int | None) -> bool:
    """Whether another attempt may succeed: no answer (`None`: refused, reset, timed out), a
    server error, 408 or 429. Any other status other than 2xx is the receiver saying no."""
    return status is None or status >= 500 or status in (408, 429)


def retry_delay(failures: int) -> float:
    """Seconds before the next attempt after `failures` failed ones: 0.5, 1, 2, ... up to 8."""
    return capped_exponential(0.5, 2.0, failures - 1, 8.0)
