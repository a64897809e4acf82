from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nodeagent.model.kubelet_shutdown import (
    EVENT_ON,
    GnsState,
    KubeletShutdownSettings,
    MalformedKubeletConfig,
    decide,
    event_message,
    kubelet_lock,
    parse_go_duration,
    settings_from_documents,
)


@dataclass(frozen=True)
class Inh:
    what: str = "shutdown"
    who: str = "kubelet"
    mode: str = "delay"
    pid: int = 42


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("0", 0.0),
        ("0s", 0.0),
        ("30s", 30.0),
        ("1m30s", 90.0),
        ("1.5h", 5400.0),
        ("250ms", 0.25),
        ("1h2m3s4ms", 3723.004),
        ("+10s", 10.0),
        ("-5s", -5.0),
        (".5s", 0.5),
        ("100us", 1e-4),
        ("100µs", 1e-4),
    ],
)
def test_go_durations(text: str, seconds: float) -> None:
    assert parse_go_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "30", "s", "1d", "1m 30s", "abc", "1.2.3s", "--1s"])
def test_not_go_durations(text: str) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_go_duration(text)


@given(
    h=st.integers(0, 1000),
    m=st.integers(0, 59),
    s=st.integers(0, 59),
    ms=st.integers(0, 999),
)
def test_duration_parts_add_up(h: int, m: int, s: int, ms: int) -> None:
    text = f"{h}h{m}m{s}s{ms}ms"
    assert parse_go_duration(text) == pytest.approx(h * 3600 + m * 60 + s + ms / 1000)


def test_settings_merge_later_files_win_per_field() -> None:
    got = settings_from_documents(
        [
            ("/c.yaml", {"shutdownGracePeriod": "30s", "shutdownGracePeriodCriticalPods": "10s"}),
            ("/d/10.conf", None),
            ("/d/20.conf", {"shutdownGracePeriod": "0s"}),
        ]
    )
    assert (got.grace_period, got.critical_grace_period) == (0.0, 10.0)
    assert not got.enabled
    assert got.source == "/c.yaml, /d/10.conf, /d/20.conf"


def test_by_priority_replaces_the_two_groups() -> None:
    doc = {
        "shutdownGracePeriod": "0s",
        "shutdownGracePeriodByPodPriority": [
            {"priority": 0, "shutdownGracePeriodSeconds": 20},
            {"priority": 2000000000, "shutdownGracePeriodSeconds": 10},
        ],
    }
    got = settings_from_documents([("/c.yaml", doc)])
    assert got.enabled
    assert got.by_priority == ((0, 20.0), (2000000000, 10.0))
    zero = {"shutdownGracePeriod": "30s", "shutdownGracePeriodByPodPriority": [{"priority": 1}]}
    assert not settings_from_documents([("/c.yaml", zero)]).enabled


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        ({"shutdownGracePeriod": 30}, "shutdownGracePeriod"),
        ({"shutdownGracePeriod": "thirty"}, "shutdownGracePeriod"),
        ({"shutdownGracePeriod": "-1s"}, "shutdownGracePeriod"),
        ({"shutdownGracePeriodCriticalPods": ["10s"]}, "shutdownGracePeriodCriticalPods"),
        ({"shutdownGracePeriodByPodPriority": "x"}, "shutdownGracePeriodByPodPriority"),
        ({"shutdownGracePeriodByPodPriority": [7]}, "shutdownGracePeriodByPodPriority[0]"),
        (
            {"shutdownGracePeriodByPodPriority": [{"priority": "high"}]},
            "shutdownGracePeriodByPodPriority[0].priority",
        ),
        (
            {"shutdownGracePeriodByPodPriority": [{"shutdownGracePeriodSeconds": -3}]},
            "shutdownGracePeriodByPodPriority[0].shutdownGracePeriodSeconds",
        ),
        (["a", "list"], "shutdownGracePeriod"),
        ("just text", "shutdownGracePeriod"),
    ],
)
def test_malformed_configs_name_file_and_field(doc: object, field: str) -> None:
    with pytest.raises(MalformedKubeletConfig) as e:
        settings_from_documents([("/var/lib/kubelet/config.yaml", doc)])
    text = str(e.value)
    assert text.startswith(f"/var/lib/kubelet/config.yaml: {field}")
    assert "\n" not in text


def test_only_the_kubelets_shutdown_delay_lock_counts() -> None:
    assert kubelet_lock([Inh()]) == Inh()
    assert kubelet_lock([Inh(what="sleep:shutdown")]) is not None
    assert kubelet_lock([Inh(who="nodeagent")]) is None
    assert kubelet_lock([Inh(mode="block")]) is None
    assert kubelet_lock([Inh(what="sleep")]) is None


ON = KubeletShutdownSettings(30.0, 10.0, source="/c.yaml")
OFF = KubeletShutdownSettings(source="/c.yaml")


def test_the_lock_wins_over_the_file() -> None:
    v = decide([Inh(pid=7)], OFF)
    assert (v.state, v.lock_pid) == (GnsState.ON, 7)
    assert "pid 7" in v.evidence
    assert decide([Inh()], None, "garbage").state is GnsState.ON


def test_without_the_lock_the_file_tells() -> None:
    assert decide([], ON).state is GnsState.ON
    assert "shutdownGracePeriod 30s" in decide([], ON).evidence
    assert decide([], OFF).state is GnsState.OFF
    assert decide(None, OFF).state is GnsState.OFF


def test_unknown_says_why() -> None:
    v = decide([], None, "/c.yaml: shutdownGracePeriod: 'x' is not a duration")
    assert v.state is GnsState.UNKNOWN
    assert "/c.yaml" in v.evidence
    assert decide(None, None).state is GnsState.UNKNOWN
    assert decide([], None).state is GnsState.UNKNOWN


@given(
    locks=st.lists(st.builds(Inh, who=st.sampled_from(["kubelet", "nodeagent", "x"]))),
    settings=st.none() | st.builds(KubeletShutdownSettings, st.floats(0, 100), st.floats(0, 10)),
)
def test_on_exactly_when_a_lock_or_the_settings_say_so(
    locks: list[Inh], settings: KubeletShutdownSettings | None
) -> None:
    v = decide(locks, settings)
    expected_on = kubelet_lock(locks) is not None or (settings is not None and settings.enabled)
    assert (v.state is GnsState.ON) == expected_on
    if settings is None and not expected_on:
        assert v.state is GnsState.UNKNOWN


def test_event_message_says_cost_and_fix() -> None:
    text = event_message(decide([Inh()], None))
    assert "2000000000" in text
    assert "PodDisruptionBudgets" in text
    assert "shutdownGracePeriod: 0" in text
    assert EVENT_ON == "KubeletGracefulShutdownOn"
