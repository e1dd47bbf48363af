"""The gateway's worker plan reads the servers' settings by their stack-contract names (roles/sglang_stack).

The inventories set SGLang's port, bind address and multi-node group once, as ``sglang_stack_service_*``; the
gateway reads another host's inventory through ``hostvars``, where role defaults are not visible, so the filter must
read the contract names (and still the ``sglang_service_*`` aliases an older inventory sets)."""

from ansible_collections.blackwell.sglang.plugins.filter.sglang_gateway import sglang_gateway_workers


def _plan(hostvars, groups):
    return sglang_gateway_workers(sorted(hostvars), hostvars, groups, 30000)


def test_contract_names_reach_the_plan():
    hostvars = {
        "a1": {"sglang_stack_service_port": 31000, "sglang_stack_service_host": "0.0.0.0",
               "sglang_stack_service_multinode_group": "pair", "sglang_service_node_rank": 0},
        "a2": {"sglang_stack_service_port": 31000, "sglang_stack_service_host": "0.0.0.0",
               "sglang_stack_service_multinode_group": "pair", "sglang_service_node_rank": 1},
        "b": {"sglang_stack_service_host": "127.0.0.1"},
    }
    plan = _plan(hostvars, {"pair": ["a1", "a2"]})
    servers = {s["host"]: s for s in plan["servers"]}
    assert servers["a1"]["service_port"] == 31000 and servers["a1"]["service_host"] == "0.0.0.0"
    assert servers["a1"]["multinode_members"] == ["a1", "a2"] and servers["a2"]["ranks"] == {"a1": 0, "a2": 1}
    assert servers["b"]["service_port"] is None and servers["b"]["multinode_members"] == []
    # one worker per multi-node server (its rank 0) plus the single box: the group read by its contract name
    assert sorted(w["host"] for w in plan["workers"]) == ["a1", "b"]


def test_a_retired_service_name_is_not_read():
    """sglang_service_port / _host are retired (the preflight refuses an inventory that sets one): the contract wins."""
    hostvars = {"c": {"sglang_service_port": 32000, "sglang_stack_service_port": 30000, "sglang_service_host": "10.0.0.5"}}
    (server,) = _plan(hostvars, {})["servers"]
    assert server["service_port"] == 30000 and server["service_host"] is None
