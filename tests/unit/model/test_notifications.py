"""Notifications as data: bodies, templates, URLs, headers, what is worth another attempt."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yarl
from hypothesis import given, settings
from hypothesis import strategies as st

from nodeagent.model import notifications as m

N = m.Notification(
    m.LOCK_RELEASED,
    "node-1",
    "nodeagent-shutdown-node-1-0123456789",
    "the node is drained",
    "2026-01-02T03:04:05Z",
)

texts = st.text(max_size=40)
notifications = st.builds(m.Notification, st.sampled_from(m.EVENTS), texts, texts, texts, texts)


def test_the_default_body_is_the_notification_as_a_json_object() -> None:
    body, content_type = m.render(None, N)
    assert content_type == "application/json"
    assert json.loads(body) == {
        "event": "lockReleased",
        "node": "node-1",
        "maintenance": "nodeagent-shutdown-node-1-0123456789",
        "reason": "the node is drained",
        "time": "2026-01-02T03:04:05Z",
    }


def test_a_slack_template() -> None:
    template = {"text": ":arrows_counterclockwise: ${node}: ${event} (${reason}) at $time"}
    m.check_template(template)
    body, content_type = m.render(template, N)
    assert content_type == "application/json"
    assert json.loads(body) == {
        "text": ":arrows_counterclockwise: node-1: lockReleased (the node is drained) "
        "at 2026-01-02T03:04:05Z"
    }


def test_a_string_template_is_a_text_body_and_dollar_dollar_a_dollar() -> None:
    body, content_type = m.render("$node costs $$0: ${event}", N)
    assert (body, content_type) == (b"node-1 costs $0: lockReleased", "text/plain; charset=utf-8")


def test_nested_templates_keep_numbers_and_keys() -> None:
    template = {"blocks": [{"type": "section", "n": 1, "ok": True, "x": None, "t": "${node}"}]}
    m.check_template(template)
    body, _ = m.render(template, N)
    assert json.loads(body) == {
        "blocks": [{"type": "section", "n": 1, "ok": True, "x": None, "t": "node-1"}]
    }


@given(notifications)
def test_the_default_body_round_trips(n: m.Notification) -> None:
    body, _ = m.render(None, n)
    assert json.loads(body) == n.fields()


@given(notifications, st.sampled_from(m.PLACEHOLDERS), texts, texts)
def test_values_go_in_literally_and_the_body_stays_json(
    n: m.Notification, field: str, before: str, after: str
) -> None:
    """Whatever a value holds (quotes, braces, `${node}`, newlines) it is inserted once, as
    text: never read as a template, never breaking the JSON around it."""
    b, a = before.replace("$", "$$"), after.replace("$", "$$")
    template: dict[str, Any] = {"k": [f"{b}${{{field}}}{a}"]}
    m.check_template(template)
    body, _ = m.render(template, n)
    assert json.loads(body) == {"k": [before + n.fields()[field] + after]}


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("${nodes}", "unknown placeholder ${nodes} (known: event, node, maintenance, reason"),
        ("$", "has a '$' that starts no placeholder"),
        ("${node", "has a '$' that starts no placeholder"),
        ({"a": {"b": ["x", "$evnt"]}}, ".a.b[1]: unknown placeholder ${evnt}"),
        ({1: "x"}, "key 1 is not a string"),
        ({"a": {1, 2}}, ".a: {1, 2} is not a JSON value"),
        ({"a": float("nan")}, ".a: nan is not a JSON number"),
        (3, "must be a string (a text body) or a mapping or list (a JSON body), got 3"),
    ],
)
def test_bad_templates_are_one_line_errors(template: object, message: str) -> None:
    with pytest.raises(m.InvalidSetting) as e:
        m.check_template(template)
    assert message in str(e.value)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize(
    "url",
    [
        "https://hooks.slack.com/services/T000/B000/XXXX",
        "http://127.0.0.1:8080/hook?token=a",
        "http://[::1]:9/x",
        "https://user:pw@example.com/",
        "http://xn--bcher-kva.example./",
        "http://nodeagent_hooks.internal:80",
    ],
)
def test_good_urls(url: str) -> None:
    assert m.check_url(url) == url


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("hooks.slack.com/services/x", "must start with http:// or https://"),
        ("ftp://example.com/", "must start with http:// or https:// (not ftp://)"),
        ("http:///path", "names no host"),
        ("http://[::1/x", "not a URL: Invalid IPv6 URL"),
        ("http://example.com:99999/", "not a URL: Port out of range"),
        ("http://example.com:0/", "port 0 is no port"),
        ("http://example.com/a b", "holds spaces or control characters"),
        ("http://example.com/\x00", "holds spaces or control characters"),
        ("http://example.com/#x", "a #fragment is never sent"),
        ("http://example.com\\@evil/", "a backslash is no part of a URL"),
        ("http://a..b/", "'a..b' is not a host name"),
        ("http://bücher.example/", "'bücher.example' is not a host name (ASCII labels; an IDN"),
        ("", "must be an http:// or https:// URL"),
        (42, "must be an http:// or https:// URL, got 42"),
    ],
)
def test_bad_urls_are_one_line_errors(url: object, message: str) -> None:
    with pytest.raises(m.InvalidSetting) as e:
        m.check_url(url)
    assert message in str(e.value)
    assert "\n" not in str(e.value)


@settings(max_examples=2000)
@given(st.text(max_size=60))
def test_a_url_that_passes_is_one_the_http_client_takes(text: str) -> None:
    for url in (text, f"http://{text}", f"https://h/{text}"):
        try:
            m.check_url(url)
        except m.InvalidSetting:
            continue
        parsed = yarl.URL(url)
        assert parsed.scheme in ("http", "https") and parsed.host


def test_logs_see_no_secret_of_the_url() -> None:
    assert m.redact("https://u:pw@hooks.slack.com/services/T/B/SECRET?x=1") == (
        "https://hooks.slack.com/..."
    )
    assert m.redact("http://[::1]:8080/secret") == "http://[::1]:8080/..."
    assert m.redact("http://[::1") == "<not a URL>"


def test_headers() -> None:
    m.check_header("Authorization", "Bearer x")
    for name, value, message in [
        ("Bad Name", "x", "'Bad Name' is not a header name"),
        ("X-A", "a\r\nInjected: 1", "X-A: the value must be one line"),
        ("X-A", 3, "X-A: the value must be a string, got int"),
    ]:
        with pytest.raises(m.InvalidSetting, match=message):
            m.check_header(name, value)


@pytest.mark.parametrize(
    ("status", "again"),
    [
        *[(None, True), (500, True), (503, True), (408, True), (429, True)],
        *[(400, False), (401, False), (404, False), (410, False), (301, False)],
    ],
)
def test_what_is_worth_another_attempt(status: int | None, again: bool) -> None:
    assert m.retryable(status) is again


def test_retry_delays_grow_and_are_capped() -> None:
    assert [m.retry_delay(f) for f in range(1, 7)] == [0.5, 1, 2, 4, 8, 8]
    assert m.retry_delay(10**6) == 8
