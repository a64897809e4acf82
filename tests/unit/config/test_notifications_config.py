"""notifications.webhooks in the configuration: camelCase YAML in, one-line errors naming the
setting out."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nodeagent.config import ConfigError, Webhook, from_mapping, load
from nodeagent.model.notifications import EVENTS


def hooks(*webhooks: Any) -> dict[str, Any]:
    return {"notifications": {"webhooks": list(webhooks)}}


def test_none_by_default() -> None:
    assert from_mapping({}).notifications.webhooks == ()


def test_a_webhook_from_a_file(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(
        """
notifications:
  webhooks:
    - url: https://hooks.slack.com/services/T000/B000/XXXX
      events: [drainStarted, nodeBack]
      template: {text: "${node}: ${event} (${reason})"}
      headers: {X-Team: nodes}
      timeout: 2
      attempts: 5
    - url: http://127.0.0.1:8080/hook
"""
    )
    first, second = load(path, env={}).notifications.webhooks
    assert first == Webhook(
        url="https://hooks.slack.com/services/T000/B000/XXXX",
        events=frozenset({"drainStarted", "nodeBack"}),
        template={"text": "${node}: ${event} (${reason})"},
        headers={"X-Team": "nodes"},
        timeout=2.0,
        attempts=5,
    )
    assert second == Webhook(url="http://127.0.0.1:8080/hook")
    assert second.events == frozenset(EVENTS) and (second.timeout, second.attempts) == (5.0, 3)


def test_the_secret_stays_out_of_repr() -> None:
    (hook,) = from_mapping(
        hooks({"url": "https://h/SECRET", "headers": {"Authorization": "Bearer TOKEN"}})
    ).notifications.webhooks
    assert "SECRET" not in repr(hook) and "TOKEN" not in repr(hook)


@pytest.mark.parametrize(
    ("webhooks", "message"),
    [
        (
            [{"url": "hooks.slack.com/x"}],
            "notifications.webhooks[0].url: must start with http:// or https://",
        ),
        ([{"url": "http://[::1/x"}], "notifications.webhooks[0].url: not a URL: Invalid IPv6"),
        ([{"url": "http://h/ok"}, {}], "notifications.webhooks[1].url: required"),
        ([{"url": "http://h/", "event": ["nodeBack"]}], "notifications.webhooks[0].event: unknown"),
        ([{"url": "http://h/", "events": ["nodeDown"]}], "'nodeDown' is not an event (known:"),
        ([{"url": "http://h/", "events": []}], "webhooks[0].events: must be a list of one or more"),
        ([{"url": "http://h/", "template": "${host}"}], "template: unknown placeholder ${host}"),
        ([{"url": "http://h/", "template": {"a": ["$"]}}], "template.a[0]: '$' has a '$'"),
        ([{"url": "http://h/", "headers": ["X: y"]}], "webhooks[0].headers: must be a mapping"),
        ([{"url": "http://h/", "headers": {"X": 1}}], "headers: X: the value must be a string"),
        ([{"url": "http://h/", "timeout": 0}], "webhooks[0].timeout: must be positive"),
        ([{"url": "http://h/", "timeout": "5s"}], "webhooks[0].timeout: must be a number"),
        ([{"url": "http://h/", "attempts": 0}], "webhooks[0].attempts: must be from 1 to 10"),
        ([{"url": "http://h/"}] * 17, "notifications.webhooks: at most 16 webhooks, got 17"),
        ("http://h/", "notifications.webhooks: must be a list of webhooks"),
        (["http://h/"], "notifications.webhooks[0]: must be a mapping with at least url"),
    ],
)
def test_errors_are_one_line_naming_the_setting(webhooks: Any, message: str) -> None:
    with pytest.raises(ConfigError) as e:
        from_mapping({"notifications": {"webhooks": webhooks}}, "config.yaml")
    text = str(e.value)
    assert text.startswith("config.yaml: notifications"), text
    assert message in text, text
    assert "\n" not in text


def test_unknown_notifications_setting() -> None:
    with pytest.raises(ConfigError, match=r"notifications.slack: unknown setting \(known: webh"):
        from_mapping({"notifications": {"slack": {}}})
