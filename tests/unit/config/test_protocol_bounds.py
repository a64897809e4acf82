"""Settings that would break the eviction protocol or a bound are refused: one line naming the
keys. The relations are checked against the code that relies on them (heartbeats and the
interceptor selection, the eviction backoff, the shutdown budget, the leader elector)."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import pytest
import yaml
from hypothesis import example, given
from hypothesis import strategies as st

from nodeagent.config import ConfigError, from_mapping
from nodeagent.config.checks import MAX_HEARTBEAT_DEADLINE
from nodeagent.kube.leader import LeaderElector, LeaseClient
from nodeagent.model.interceptors.heartbeats import MIN_HEARTBEAT_INTERVAL, heartbeat_interval
from nodeagent.model.interceptors.imperative import eviction_backoff
from nodeagent.model.interceptors.status import InterceptorStatus
from nodeagent.model.interceptors.turns import select_active
from nodeagent.model.shutdown import usable_budget

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def accepted(raw: dict[str, Any]) -> bool:
    try:
        from_mapping(raw)
    except ConfigError as e:
        assert "\n" not in str(e)
        return False
    return True


def refused(raw: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as info:
        from_mapping(raw)
    text = str(info.value)
    assert "\n" not in text
    return text


# --- eviction.heartbeatDeadline -----------------------------------------------------------------


@pytest.mark.parametrize("deadline", [-5, 0, 8, 60, 119.5])
def test_a_heartbeat_deadline_without_room_for_a_heartbeat_is_refused(deadline: float) -> None:
    text = refused({"eviction": {"heartbeatDeadline": deadline}})
    assert f"eviction.heartbeatDeadline ({deadline:g}s) must leave room for" in text
    assert (
        "heartbeat interval (60s) plus the minimum heartbeat spacing (60s): at least 120s" in text
    )


@pytest.mark.parametrize("deadline", [120, 300, 1200, MAX_HEARTBEAT_DEADLINE])
def test_heartbeat_deadlines_with_room_are_accepted(deadline: float) -> None:
    assert from_mapping({"eviction": {"heartbeatDeadline": deadline}}).eviction.heartbeat_deadline


def test_a_heartbeat_deadline_beyond_a_week_is_refused() -> None:
    text = refused({"eviction": {"heartbeatDeadline": 1e300}})
    assert text.startswith("configuration: eviction.heartbeatDeadline (1e+300s) must be at most")


def passed_over(deadline: float, gaps: list[timedelta]) -> bool:
    """Whether an active interceptor (with one after it) whose heartbeats come after each of
    `gaps` is passed over, judged as each comes in, before it is seen."""
    d = timedelta(seconds=deadline)
    status = InterceptorStatus("mover.example.com", heartbeat_time=T0, start_time=T0)
    at = T0
    for gap in gaps:
        at += gap
        sel = select_active(
            ["mover.example.com", "next.example.com"],
            status.name,
            (),
            {status.name: status},
            at,
            d,
            activated_at=T0,
        )
        if sel.handovers:
            return True
        status = status.heartbeat(at)
    return False


@example(60.0)
@example(119.999)
@example(120.0)
@example(500.0)
@given(st.floats(min_value=0, max_value=400) | st.floats(min_value=0, max_value=24 * 3600))
def test_an_accepted_deadline_never_passes_over_an_interceptor_that_heartbeats_in_its_interval(
    deadline: float,
) -> None:
    """Our interceptors heartbeat every heartbeat_interval(deadline) (the static pods' every
    minimum spacing). With an accepted deadline one late by just under a spacing, every time,
    is never passed over; with a refused one, one late by a spacing is."""
    interval = heartbeat_interval(timedelta(seconds=deadline))
    late = MIN_HEARTBEAT_INTERVAL - timedelta(microseconds=1)
    if accepted({"eviction": {"heartbeatDeadline": deadline}}):
        assert not passed_over(deadline, [interval + late] * 3)
    else:
        assert passed_over(deadline, [interval + MIN_HEARTBEAT_INTERVAL])


# --- eviction.backoffBase, backoffCap ---------------------------------------------------------


def test_a_backoff_base_above_its_cap_is_refused() -> None:
    text = refused({"eviction": {"backoffBase": 1000, "backoffCap": 900}})
    assert (
        "eviction.backoffBase (1000s) must be positive and at most eviction.backoffCap (900s)"
        in (text)
    )
    assert "eviction.backoffBase (0s)" in refused({"eviction": {"backoffBase": 0}})


@given(st.floats(min_value=-10, max_value=2000), st.floats(min_value=-10, max_value=2000))
def test_accepted_backoffs_start_at_the_base_and_never_pass_the_cap(
    base: float, cap: float
) -> None:
    ok = accepted({"eviction": {"backoffBase": base, "backoffCap": cap}})
    assert ok == (0 < base <= cap)
    if ok:
        delays = [eviction_backoff(n, base, cap) for n in range(1, 40)]
        assert delays[0] == base and max(delays) <= cap and delays == sorted(delays)


# --- shutdown.budget, safetyMargin --------------------------------------------------------------


def test_a_safety_margin_not_below_the_budget_is_refused() -> None:
    text = refused({"shutdown": {"budget": 60, "safetyMargin": 60}})
    assert "shutdown.safetyMargin (60s) must be at least 0 and less than shutdown.budget (60s)" in (
        text
    )


@given(st.floats(min_value=0.001, max_value=3600), st.floats(min_value=-10, max_value=4000))
def test_an_accepted_margin_leaves_a_usable_budget(budget: float, margin: float) -> None:
    ok = accepted({"shutdown": {"budget": budget, "safetyMargin": margin}})
    assert ok == (0 <= margin < budget)
    if ok:
        assert 0 < usable_budget(budget, margin) <= budget


# --- leader -----------------------------------------------------------------------------------


def test_a_renew_deadline_within_a_jittered_retry_is_refused() -> None:
    text = refused({"leader": {"retryPeriod": 2, "renewDeadline": 2.3, "leaseDuration": 15}})
    assert "leader.renewDeadline (2.3s) must be more than 1.2 times leader.retryPeriod (2s)" in text


@given(
    st.floats(min_value=-1, max_value=30),
    st.floats(min_value=-1, max_value=30),
    st.floats(min_value=-1, max_value=30),
)
def test_accepted_leader_timings_are_what_the_elector_takes(
    retry: float, renew: float, lease: float
) -> None:
    raw = {"leader": {"retryPeriod": retry, "renewDeadline": renew, "leaseDuration": lease}}
    client = cast(LeaseClient, object())
    try:
        LeaderElector(client, "ns", "lease", "me", lease, renew, retry)
    except ValueError:
        assert not accepted(raw)
    else:
        assert accepted(raw)


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ({"namespace": "Nodeagent_System"}, "leader.namespace: 'Nodeagent_System' is not a"),
        ({"namespace": "n" * 64}, "leader.namespace: "),
        ({"namespace": "a.b"}, "leader.namespace: 'a.b' is not a namespace name"),
        ({"leaseName": "-lease"}, "leader.leaseName: '-lease' is not a Lease name"),
    ],
)
def test_leader_names_must_be_names(setting: dict[str, str], message: str) -> None:
    assert message in refused({"leader": setting})


# --- kube.tokenRenewAfter, tokenExpiration, requestTimeout --------------------------------------


def test_a_token_renewed_with_less_life_left_than_a_request_may_take_is_refused() -> None:
    text = refused({"kube": {"tokenRenewAfter": 0.99, "tokenExpiration": 600}})
    assert text.startswith(
        "configuration: kube.tokenRenewAfter (0.99) leaves 6s of a kube.tokenExpiration (600s) "
        "token's life to renew it in, not more than kube.requestTimeout (30s)"
    )
    assert accepted({"kube": {"tokenRenewAfter": 0.9, "tokenExpiration": 600}})


# --- observability ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("listen", "probe", "ok"),
    [
        ("127.0.0.1:9873", "127.0.0.1:9873", False),
        ("127.0.0.1:9873", "0.0.0.0:9873", False),
        ("[::]:9873", "127.0.0.1:9873", False),
        ("127.0.0.1:9873", "127.0.0.2:9873", True),
        ("0.0.0.0:9873", "0.0.0.0:9874", True),
        ("127.0.0.1:0", "127.0.0.1:0", True),
    ],
)
def test_the_probe_listener_needs_a_port_of_its_own(listen: str, probe: str, ok: bool) -> None:
    raw = {"observability": {"listen": listen, "probeListen": probe}}
    if ok:
        assert accepted(raw)
    else:
        assert f"observability.probeListen ({probe}) must not take the port of" in refused(raw)


# --- eviction.annotateInterceptors: what the controllers would refuse only when they start ----


def interceptor(**kw: Any) -> dict[str, Any]:
    item = {"name": "mover.example.com", "podSelector": {}, "annotationKey": "example.com/move"}
    return {"eviction": {"annotateInterceptors": [{**item, **kw}]}}


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (interceptor(name="mover.k8s.io"), "[0].name: 'mover.k8s.io' k8s.io names are reserved"),
        (
            interceptor(podSelector={"matchLabels": {"app": "a b"}}),
            "[0].podSelector: ",
        ),
        (interceptor(annotationKey="bad key"), "[0].annotationKey: 'bad key' "),
        (
            {
                "eviction": {
                    "annotateInterceptors": [interceptor()["eviction"]["annotateInterceptors"][0]]
                    * 2
                }
            },
            "[1].name: mover.example.com is repeated",
        ),
    ],
)
def test_annotate_interceptors_are_checked_when_loaded(raw: dict[str, Any], message: str) -> None:
    assert "eviction.annotateInterceptors" + message in refused(raw)


# --- the command line -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"eviction": {"heartbeatDeadline": 8}}, "eviction.heartbeatDeadline (8s) must leave"),
        ({"eviction": {"backoffBase": 5, "backoffCap": 1}}, "eviction.backoffBase (5s) must be"),
    ],
)
def test_the_agent_exits_2_with_the_one_line(
    tmp_path: Path, config: dict[str, Any], message: str
) -> None:
    f = tmp_path / "config.yaml"
    f.write_text(yaml.safe_dump(config))
    done = subprocess.run(
        [sys.executable, "-m", "nodeagent", "run", "--config", str(f)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.startswith(f"nodeagent: {f}: {message}") and done.stderr.count("\n") == 1
