"""Unit tests marked `fake_time` run on an event loop whose time moves only when it would
otherwise wait (tests/faketime.py): timing is asserted exactly and no test sleeps."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

import pytest

from tests.faketime import FakeTimeLoop


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "fake_time: run on an event loop with a fake clock (tests/faketime.py)"
    )


def pytest_asyncio_loop_factories(
    config: pytest.Config, item: pytest.Item
) -> Mapping[str, Callable[[], asyncio.AbstractEventLoop]]:
    if item.get_closest_marker("fake_time") is not None:
        return {"fake_time": FakeTimeLoop}
    return {"asyncio": asyncio.new_event_loop}
