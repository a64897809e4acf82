from __future__ import annotations

from nodeagent.node.identity import local_addresses, match_by_address


def node(name: str, *addresses: str) -> dict[str, object]:
    return {
        "metadata": {"name": name},
        "status": {"addresses": [{"type": "InternalIP", "address": a} for a in addresses]},
    }


def test_match_by_address_ignores_loopback() -> None:
    nodes = [node("a", "10.0.0.1"), node("b", "10.0.0.2", "127.0.0.1")]
    assert match_by_address(nodes, {"10.0.0.2", "127.0.0.1"}) == ["b"]
    assert match_by_address(nodes, {"127.0.0.1"}) == []
    assert match_by_address(nodes, {"10.0.0.1", "10.0.0.2"}) == ["a", "b"]


def test_local_addresses_reads_netlink() -> None:
    assert "127.0.0.1" in local_addresses()
