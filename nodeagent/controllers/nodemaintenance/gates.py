"""The gates' shell (``nodeMaintenance.gates``): what the pure decision gets as
``Inputs.gates``.

- ``podsReady`` is evaluated from the controllers' pod informer at each decision (no request
  of its own); a change of a matching pod's readiness wakes the maintenances in Drain.
- ``prometheus`` is an external system with no watch: it is read (``GET /api/v1/alerts``,
  bounded by ``timeout``, its answer by ``_MAX_BODY``) at most every ``interval`` seconds, and
  only while some decision said a reboot asked for waits for its admission
  (``Actions.gates_wanted``); none at all otherwise. Unreachable, hanging, an HTTP error or an
  answer that is not Prometheus's: the gate cannot be evaluated, and holds the fleet. Each
  change of its state wakes the maintenances in Drain.

Each evaluation sets ``nodeagent_gate{gate,state}`` (1 for open, closed or unknown: cannot be
evaluated).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from nodeagent.config.schema import GatesConfig, PrometheusGateConfig
from nodeagent.model.gates import (
    GATE_PROMETHEUS,
    GateState,
    GateStatus,
    PodsReady,
    alerts_gate,
    one_line,
    pod_ready,
    pods_ready_gate,
    unread,
)
from nodeagent.model.selectors import label_selector_from_dict

if TYPE_CHECKING:
    import aiohttp

__all__ = ["GateSink", "Gates", "read_alerts"]

log = logging.getLogger(__name__)

_MAX_BODY = 16 * 1024 * 1024
"""Bytes of an answer read at most: a larger one is not Prometheus's alerts list."""


class GateSink(Protocol):
    """Where each evaluation goes (``nodeagent_gate``)."""

    def set(self, state: GateState) -> None: ...


def alerts_url(base: str) -> str:
    return base.rstrip("/") + "/api/v1/alerts"


def _unknown(why: str) -> GateState:
    return GateState(GATE_PROMETHEUS, GateStatus.UNKNOWN, one_line(why))


def _session() -> aiohttp.ClientSession:
    import aiohttp  # here: agents that read no Prometheus never load it (some 10 MiB)

    return aiohttp.ClientSession()


async def read_alerts(session: aiohttp.ClientSession, cfg: PrometheusGateConfig) -> GateState:
    """One read of the Prometheus gate, within ``cfg.timeout`` whatever the server does."""
    import aiohttp

    assert cfg.url is not None
    url = alerts_url(cfg.url)
    pattern = re.compile(cfg.alert_filter) if cfg.alert_filter is not None else None
    try:
        async with asyncio.timeout(cfg.timeout):
            async with session.get(url, allow_redirects=False) as response:
                status = response.status
                body = bytearray()
                async for chunk in response.content.iter_chunked(64 * 1024):
                    body += chunk
                    if len(body) > _MAX_BODY:
                        return _unknown(f"{url} answered more than {_MAX_BODY} bytes")
    except TimeoutError:
        return _unknown(f"no answer from {url} within {cfg.timeout:g}s")
    except (aiohttp.ClientError, OSError) as e:
        return _unknown(f"cannot reach {url}: {e or type(e).__name__}")
    try:
        parsed: Any = json.loads(body)
    except ValueError:
        return _unknown(f"{url} answered HTTP {status} with no JSON (not Prometheus's API)")
    state = alerts_gate(
        parsed, pattern, filter_match_only=cfg.alert_filter_match_only, firing_only=cfg.firing_only
    )
    if status != 200 and state.status is not GateStatus.UNKNOWN:
        return _unknown(f"{url} answered HTTP {status}")
    if state.status is GateStatus.UNKNOWN:
        return _unknown(f"{url}: {state.reason}")
    return state


class Gates:
    """The configured gates of one leader's term: their states for each decision, and the
    Prometheus reader (:meth:`run`)."""

    def __init__(
        self,
        config: GatesConfig,
        *,
        sink: GateSink | None = None,
        on_change: Callable[[], None] = lambda: None,
        session: Callable[[], aiohttp.ClientSession] = _session,
    ) -> None:
        self._prometheus_config = config.prometheus if config.prometheus.url else None
        self._pods_ready = tuple(
            PodsReady(str(e["namespace"]), label_selector_from_dict(e["selector"]))
            for e in config.pods_ready
        )
        self._prometheus = unread(GATE_PROMETHEUS) if self._prometheus_config else None
        self._sink = sink
        self._on_change = on_change
        self._session = session
        self._wanted: set[str] = set()
        self._wake = asyncio.Event()
        self.reads = 0
        """Reads of Prometheus so far (tests wait on it)."""
        self._read = asyncio.Event()

    @property
    def configured(self) -> bool:
        return self._prometheus is not None or bool(self._pods_ready)

    def watches(self, pod: Mapping[str, Any]) -> bool:
        """Whether a podsReady entry matches ``pod``."""
        return any(e.matches(pod) for e in self._pods_ready)

    def readiness_changed(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
        """A pod some entry watches changed readiness (or came into or out of a selector)."""
        if not (self.watches(old) or self.watches(new)):
            return False
        return (self.watches(old), pod_ready(old)) != (self.watches(new), pod_ready(new))

    def states(self, pods: Callable[[], Iterable[Mapping[str, Any]]]) -> tuple[GateState, ...]:
        """Every gate's state now: Prometheus's as last read, podsReady's from ``pods`` (the
        pod informer's cache)."""
        out: list[GateState] = []
        if self._prometheus is not None:
            out.append(self._prometheus)
        if self._pods_ready:
            state = pods_ready_gate(self._pods_ready, pods())
            self._publish(state)
            out.append(state)
        return tuple(out)

    def want(self, key: str, wanted: bool) -> None:
        """Maintenance ``key`` is (or is no longer) a reboot waiting for its admission."""
        if wanted:
            self._wanted.add(key)
            self._wake.set()
        else:
            self._wanted.discard(key)

    def _publish(self, state: GateState) -> None:
        if self._sink is not None:
            self._sink.set(state)

    async def until_read(self, count: int) -> None:
        """Wait until Prometheus was read ``count`` times in all (tests)."""
        while self.reads < count:
            self._read.clear()
            await self._read.wait()

    async def run(self) -> None:
        """Read Prometheus while a reboot waits for its admission, every ``interval`` seconds
        at most, until cancelled; nothing without a Prometheus gate."""
        cfg = self._prometheus_config
        if cfg is None:
            return
        async with self._session() as session:
            while True:
                while not self._wanted:
                    self._wake.clear()
                    await self._wake.wait()
                state = await read_alerts(session, cfg)
                self.reads += 1
                self._read.set()
                self._publish(state)
                if state != self._prometheus:
                    if state.status is GateStatus.UNKNOWN:
                        log.warning("gate prometheus cannot be evaluated: %s", state.reason)
                    self._prometheus = state
                    self._on_change()
                # an external system with no watch: read again after the interval at most
                await asyncio.sleep(cfg.interval)
