from __future__ import annotations

from pathlib import Path

import pytest

from nodeagent.config import ConfigError, from_mapping, load


def test_defaults_are_valid() -> None:
    cfg = from_mapping({})
    assert cfg.shutdown.budget == 600.0
    assert cfg.leader.lease_duration > cfg.leader.renew_deadline > cfg.leader.retry_period


def test_camel_case_keys_and_types() -> None:
    cfg = from_mapping(
        {
            "nodeName": "node-1",
            "shutdown": {
                "budget": 120,
                "apiUnreachableReleaseAfter": 5,
                "logindDropin": "/tmp/x.conf",
            },
            "eviction": {
                "annotateInterceptors": [
                    {
                        "name": "mover.couchbase.com",
                        "podSelector": {"matchLabels": {"app": "db"}},
                        "annotationKey": "cao.couchbase.com/reschedule",
                    }
                ]
            },
        }
    )
    assert cfg.node_name == "node-1"
    assert cfg.shutdown.budget == 120.0
    assert cfg.shutdown.logind_dropin == Path("/tmp/x.conf")
    (i,) = cfg.eviction.annotate_interceptors
    assert (i.annotation_key, i.annotation_value) == ("cao.couchbase.com/reschedule", "true")


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"shutdown": {"budjet": 5}}, "shutdown.budjet: unknown setting"),
        ({"shutdown": {"budget": "10m"}}, "shutdown.budget: must be a number of seconds"),
        ({"shutdown": {"budget": 10, "safetyMargin": 10}}, "shutdown.safetyMargin"),
        ({"leader": {"renewDeadline": 20}}, "leader: must have"),
        ({"nodeName": "Node_1"}, "nodeName: 'Node_1' is not a valid node name"),
        (
            {"eviction": {"annotateInterceptors": [{"name": "x"}]}},
            "eviction.annotateInterceptors[0].podSelector: required",
        ),
        ({"colour": "blue"}, "colour: unknown setting"),
        ({"runNodeAgent": "no"}, "runNodeAgent: must be true or false"),
        ({"nodeConditions": "off"}, "nodeConditions: must be true or false"),
        (
            {"runNodeAgent": False, "runControllers": False},
            "runNodeAgent: false with runControllers: false leaves nothing to run",
        ),
    ],
)
def test_errors_name_the_field(raw: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        from_mapping(raw)


def test_a_controllers_only_agent_needs_no_node() -> None:
    cfg = from_mapping({"runNodeAgent": False})
    assert (cfg.run_node_agent, cfg.run_controllers, cfg.node_name) == (False, True, None)
    assert from_mapping({}).run_node_agent is True


def test_node_conditions_are_on_unless_turned_off() -> None:
    assert from_mapping({}).node_conditions is True
    assert from_mapping({"nodeConditions": False}).node_conditions is False


def test_load_names_the_file_and_takes_the_environment(tmp_path: Path) -> None:
    f = tmp_path / "agent.yaml"
    f.write_text("shutdown:\n  budget: -1\n")
    with pytest.raises(ConfigError, match=f"{f}: shutdown.budget: must be positive"):
        load(f, env={})
    f.write_text("kube: {maxConcurrentRequests: 4}\n")
    cfg = load(f, env={"NODE_NAME": "node-7", "KUBECONFIG": "/k"})
    assert (cfg.node_name, cfg.kube.kubeconfig, cfg.kube.max_concurrent_requests) == (
        "node-7",
        "/k",
        4,
    )
    with pytest.raises(ConfigError, match="cannot read"):
        load(tmp_path / "missing.yaml", env={})


def test_shutdown_drain_plan_is_validated_with_the_entry_named() -> None:
    cfg = from_mapping({"shutdown": {"drainPlan": [{"podPriority": 100}, {"podPriority": 1000}]}})
    assert [e["podPriority"] for e in cfg.shutdown.drain_plan] == [100, 1000]
    with pytest.raises(ConfigError, match=r"shutdown.drainPlan\[1\]"):
        from_mapping({"shutdown": {"drainPlan": [{"podPriority": 1000}, {"podPriority": 100}]}})


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"\xff\xfe\x00\x01binary", "not a text file"),
        (b"a: " + b"[" * 2000 + b"]" * 2000, "nested too deeply"),
        (b"kube:\n  requestTimeout: 5\n  requestTimeout: 6\n", "'requestTimeout' is given twice"),
        (b"observability:\n  logLevel: LOUD\n", "observability.logLevel: 'LOUD' is not one of"),
        (b"observability:\n  listen: not-an-address\n", "is not HOST:PORT"),
        (b"observability:\n  listen: 127.0.0.1:99999\n", "a port from 0 to 65535"),
        (b"shutdown:\n  budget: .inf\n", "shutdown.budget: must be a finite number"),
        (b"kube:\n  requestTimeout: 0\n", "kube.requestTimeout: must be positive"),
        (b"kube:\n  maxConcurrentRequests: 100000\n", "must be from 1 to 256"),
        (b"kube:\n  requestTimout: 5\n", "(known: kubeconfig, maxConcurrentRequests, "),
    ],
)
def test_bad_files_are_one_line_errors_naming_the_setting(
    tmp_path: Path, content: bytes, message: str
) -> None:
    f = tmp_path / "config.yaml"
    f.write_bytes(content)
    with pytest.raises(ConfigError) as info:
        load(f, env={})
    text = str(info.value)
    assert message in text and "\n" not in text and text.startswith(str(f))


def test_final_phase_keys_and_their_bounds() -> None:
    cfg = from_mapping(
        {"shutdown": {"finalPhase": {"gracePeriod": 20, "criticalPodsGracePeriod": 5}}}
    )
    assert (
        cfg.shutdown.final_phase.grace_period,
        cfg.shutdown.final_phase.critical_pods_grace_period,
    ) == (20.0, 5.0)
    assert from_mapping(
        {"shutdown": {"finalPhase": {"gracePeriod": 0, "criticalPodsGracePeriod": 0}}}
    )
    # the defaults fit a short budget (the phase is scaled down to half of it)
    assert from_mapping({"shutdown": {"budget": 20}}).shutdown.final_phase.grace_period == 30.0
    with pytest.raises(
        ConfigError,
        match=r"shutdown\.finalPhase: must have 0 <= criticalPodsGracePeriod <= gracePeriod",
    ):
        from_mapping({"shutdown": {"finalPhase": {"gracePeriod": 5, "criticalPodsGracePeriod": 6}}})
    with pytest.raises(
        ConfigError,
        match=r"finalPhase\.gracePeriod: 95s is longer than shutdown\.budget - shutdown\.safe"
        r"tyMargin \(90s\)",
    ):
        from_mapping({"shutdown": {"budget": 100, "finalPhase": {"gracePeriod": 95}}})
    with pytest.raises(ConfigError, match=r"shutdown\.finalPhase\.grace: unknown setting"):
        from_mapping({"shutdown": {"finalPhase": {"grace": 5}}})
