"""Logs an operator can follow: repeated warnings held back, the client's retries quiet."""

from __future__ import annotations

import logging

from nodeagent.observability.logs import RepeatedWarnings, setup


def _warning(
    msg: str, created: float, *args: object, name: str = "nodeagent.kube.leader"
) -> logging.LogRecord:
    record = logging.LogRecord(name, logging.WARNING, __file__, 1, msg, args, None)
    record.created = created
    return record


def test_a_repeated_warning_is_let_through_once_a_minute_saying_how_many_were_held() -> None:
    f = RepeatedWarnings(window=60)
    template = "cannot acquire lease %s/%s: %s"
    # each retry's exception is another (a connection's address in its text, say)
    shown = [
        f.filter(_warning(template, t, "ns", "lease", ConnectionRefusedError(f"refused {t}")))
        for t in range(0, 130, 2)
    ]
    # at 0 s, 60 s and 120 s; the 29 of each minute between held back, then 4 (122-128 s)
    assert [t for t, ok in zip(range(0, 130, 2), shown, strict=True) if ok] == [0, 60, 120]
    record = _warning(template, 180, "ns", "lease", ConnectionRefusedError("refused"))
    assert f.filter(record)
    assert record.getMessage() == (
        "cannot acquire lease ns/lease: refused (and 4 more like it in the last 60s)"
    )


def test_other_messages_and_lower_levels_are_not_held() -> None:
    f = RepeatedWarnings(window=60)
    assert f.filter(_warning("a %s", 0, 1))
    assert f.filter(_warning("b %s", 1, 1))  # another template
    assert f.filter(_warning("a %s", 2, 1, name="other"))  # another logger
    info = _warning("a %s", 3, 1)
    info.levelno = logging.INFO
    assert f.filter(info)
    assert not f.filter(_warning("a %s", 4, 1))


def test_warnings_of_one_template_about_other_things_are_each_said() -> None:
    """A template is not a message: "%s", or one line per maintenance's Warning Event, must not
    hold back what is said of another maintenance, node or resource."""
    f = RepeatedWarnings(window=60)
    template = "NodeMaintenance %s: %s: %s"
    assert f.filter(_warning(template, 0, "m-1", "GateUnavailable", "prometheus: refused"))
    assert f.filter(_warning(template, 1, "m-2", "GateUnavailable", "prometheus: refused"))
    assert f.filter(_warning(template, 2, "m-1", "ShutdownIgnored", "another boot"))
    assert f.filter(_warning("%s", 3, "final phase of node-1: deleting web"))
    assert f.filter(_warning("%s", 4, "final phase of node-2: deleting db"))
    assert not f.filter(_warning(template, 5, "m-1", "GateUnavailable", "prometheus: refused"))
    assert not f.filter(_warning("%s", 6, "final phase of node-2: deleting db"))


def test_warnings_about_many_things_are_not_remembered_past_their_window() -> None:
    f = RepeatedWarnings(window=60)
    for i in range(5000):
        assert f.filter(_warning("pod %s: refused", i, f"p-{i}"))
    assert len(f._seen) <= 1100
    # those still within their window are still held
    assert not f.filter(_warning("pod %s: refused", 5000, "p-4999"))


def test_the_official_clients_retry_warnings_are_quiet() -> None:
    setup("INFO")
    assert not logging.getLogger("urllib3.connectionpool").isEnabledFor(logging.WARNING)
    assert logging.getLogger("nodeagent").isEnabledFor(logging.INFO)
