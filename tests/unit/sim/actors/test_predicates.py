"""The sim's own scheduler predicates and responder order: examples of the scheduler's and the
server's, and agreement with the agent's implementations over random input (two
implementations written apart: where they differ, one of them is wrong)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from nodeagent.model.lifecycle.responders import sort_responders
from nodeagent.model.nodeselectors import node_selector_matches
from nodeagent.model.tolerations import tolerates
from nodeagent_testbed.sim.actors.predicates import any_tolerates, node_matches_terms
from nodeagent_testbed.sim.lifecycle_rules import server_order

NODE: dict[str, Any] = {
    "metadata": {"name": "node-1", "labels": {"zone": "a", "cores": "8", "gpu": ""}}
}


def term(*expressions: dict[str, Any], fields: tuple[dict[str, Any], ...] = ()) -> Any:
    return {
        "nodeSelectorTerms": [{"matchExpressions": list(expressions), "matchFields": [*fields]}]
    }


def test_tolerations_as_the_scheduler_reads_them() -> None:
    taint = {"key": "maintenance", "value": "soon", "effect": "NoSchedule"}
    assert any_tolerates([{"operator": "Exists"}], taint)  # everything
    assert any_tolerates([{"key": "maintenance", "operator": "Exists"}], taint)
    assert any_tolerates([{"key": "maintenance", "value": "soon"}], taint)  # Equal by default
    assert not any_tolerates([{"key": "maintenance", "value": "later"}], taint)
    assert not any_tolerates(
        [{"key": "maintenance", "operator": "Exists", "effect": "NoExecute"}], taint
    )
    assert not any_tolerates([{"key": "maintenance", "operator": "Gt"}], taint)
    assert not any_tolerates([], taint)


def test_node_selector_terms_as_the_scheduler_reads_them() -> None:
    assert node_matches_terms(term({"key": "zone", "operator": "In", "values": ["a", "b"]}), NODE)
    assert not node_matches_terms(term({"key": "zone", "operator": "NotIn", "values": ["a"]}), NODE)
    assert node_matches_terms(term({"key": "cores", "operator": "Gt", "values": ["4"]}), NODE)
    assert not node_matches_terms(term({"key": "gpu", "operator": "Lt", "values": ["1"]}), NODE)
    assert node_matches_terms(term({"key": "ssd", "operator": "DoesNotExist"}), NODE)
    name = {"key": "metadata.name", "operator": "In", "values": ["node-1"]}
    assert node_matches_terms(term(fields=(name,)), NODE)
    assert not node_matches_terms(term(), NODE)  # an empty term matches no node
    bad = {"key": "zone", "operator": "In", "values": []}
    either = {
        "nodeSelectorTerms": [
            term(bad)["nodeSelectorTerms"][0],
            {"matchExpressions": [{"key": "zone", "operator": "Exists"}]},
        ]
    }
    assert not node_matches_terms(term(bad), NODE) and node_matches_terms(either, NODE)
    assert not node_matches_terms(term({"key": "Bad Key", "operator": "Exists"}), NODE)


def test_responders_in_the_servers_order() -> None:
    targets = [
        {"name": "acme.io/mover", "priority": 10000},
        {"name": "imperative-eviction.k8s.io/evictor", "priority": 100},
        {"name": "zeta.io/keeper", "priority": 20000},
        {"name": "acme.com/mover", "priority": 10000},
    ]
    assert [t["name"] for t in server_order(targets)] == [
        "zeta.io/keeper",
        "acme.com/mover",
        "acme.io/mover",
        "imperative-eviction.k8s.io/evictor",
    ]


_keys = st.sampled_from(["zone", "cores", "gpu", "ssd", "example.com/rack", "Bad Key", "-x", ""])
_values = st.lists(
    st.sampled_from(["a", "b", "8", "4", "-3", "1_0", " 5", "", "99999999999999999999"]), max_size=3
)
_operators = st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Bogus", None])
_expressions = st.fixed_dictionaries(
    {"key": _keys, "operator": _operators}, optional={"values": _values}
)
_fields = st.fixed_dictionaries(
    {
        "key": st.sampled_from(["metadata.name", "metadata.uid"]),
        "operator": st.sampled_from(["In", "NotIn", "Exists"]),
        "values": st.lists(st.sampled_from(["node-1", "node-2"]), max_size=2),
    }
)
_terms = st.fixed_dictionaries(
    {},
    optional={
        "matchExpressions": st.lists(_expressions, max_size=3),
        "matchFields": st.lists(_fields, max_size=2),
    },
)
_labels = st.dictionaries(
    st.sampled_from(["zone", "cores", "gpu", "example.com/rack"]),
    st.sampled_from(["a", "8", "-3", ""]),
    max_size=4,
)
_taint_parts = st.sampled_from(["", "a", "b"])
_tolerations = st.fixed_dictionaries(
    {},
    optional={
        "key": _taint_parts,
        "operator": st.sampled_from(["Equal", "Exists", "Gt", ""]),
        "value": _taint_parts,
        "effect": st.sampled_from(["", "NoSchedule", "NoExecute"]),
    },
)


@given(st.lists(_terms, max_size=3), _labels)
def test_node_selectors_agree_with_the_agents(terms: list[Any], labels: dict[str, str]) -> None:
    node = {"metadata": {"name": "node-1", "labels": labels}}
    selector = {"nodeSelectorTerms": terms}
    assert node_matches_terms(selector, node) == node_selector_matches(selector, node)


@given(
    st.lists(_tolerations, max_size=3),
    st.fixed_dictionaries(
        {
            "key": _taint_parts,
            "value": _taint_parts,
            "effect": st.sampled_from(["NoSchedule", "NoExecute"]),
        }
    ),
)
def test_tolerations_agree_with_the_agents(tolerations: list[Any], taint: dict[str, str]) -> None:
    assert any_tolerates(tolerations, taint) == tolerates(tolerations, taint)


_names = st.sampled_from(
    [
        "acme.io/a",
        "acme.io/b",
        "io/a",
        "b.acme.io/a",
        "acme.com/a",
        "imperative-eviction.k8s.io/evictor",
    ]
)


@given(
    st.lists(
        st.fixed_dictionaries(
            {"name": _names, "priority": st.sampled_from([100, 10000, 20000, None])}
        ),
        max_size=6,
    )
)
def test_the_responder_order_agrees_with_the_agents(targets: list[dict[str, Any]]) -> None:
    def names(entries: Any) -> list[str]:
        return [f"{t['name']}@{t['priority']}" for t in entries]

    assert names(server_order(targets)) == names(sort_responders(targets))
