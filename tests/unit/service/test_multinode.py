"""Multi-node serving: the planner (module_utils/_multinode.py), the three flags it feeds, and the role's
check (the plan module's multinode option) run for real by ansible-playbook, in check mode, over a three-host local
inventory (the group -> rank -> flags path
an operator's inventory takes)."""

import json
import os
import sys

import pytest
import yaml

import ansible_run
from conftest import ROOT
from ansible_collections.blackwell.sglang.plugins.module_utils import _multinode as mn
from ansible_collections.blackwell.sglang.plugins.module_utils import _server_flags as sf

PAIR = ["gpu-a", "gpu-b"]


def test_single_node_when_no_group():
    plan = mn.plan_multinode([], "gpu-a", 8)
    assert plan == {"enabled": False, "nnodes": 1, "node_rank": 0, "leader": "gpu-a", "dist_init_addr": "",
                    "tp_per_node": 8, "members": ["gpu-a"]}


def test_ranks_follow_inventory_order_and_address_is_rank0():
    addresses = {"gpu-a": "10.0.0.11", "gpu-b": "10.0.0.12"}
    a = mn.plan_multinode(PAIR, "gpu-a", 16, addresses=addresses)
    b = mn.plan_multinode(PAIR, "gpu-b", 16, addresses=addresses)
    assert (a["node_rank"], b["node_rank"]) == (0, 1)
    assert a["dist_init_addr"] == b["dist_init_addr"] == "10.0.0.11:50000"
    assert a["tp_per_node"] == b["tp_per_node"] == 8
    assert a["leader"] == b["leader"] == "gpu-a"


def test_explicit_ranks_reorder_the_leader():
    plan = mn.plan_multinode(PAIR, "gpu-a", 16, ranks={"gpu-a": 1, "gpu-b": 0}, dist_init_port=29500)
    assert plan["node_rank"] == 1 and plan["leader"] == "gpu-b"
    assert plan["members"] == ["gpu-b", "gpu-a"]
    assert plan["dist_init_addr"] == "gpu-b:29500"       # no ansible_host: the inventory name


def test_ipv6_leader_is_bracketed():
    plan = mn.plan_multinode(PAIR, "gpu-b", 16, addresses={"gpu-a": "fd00::11"})
    assert plan["dist_init_addr"] == "[fd00::11]:50000"


@pytest.mark.parametrize("kwargs, needle", [
    ({"members": PAIR, "host": "gpu-c", "tp_size": 16}, "not a member"),
    ({"members": ["gpu-a"], "host": "gpu-a", "tp_size": 8}, "at least 2 hosts"),
    ({"members": ["gpu-a", "gpu-a"], "host": "gpu-a", "tp_size": 8}, "twice"),
    ({"members": PAIR, "host": "gpu-a", "tp_size": 12, "ranks": {}}, None),          # 12 / 2 is fine
    ({"members": ["a", "b", "c"], "host": "a", "tp_size": 16}, "does not divide over 3 nodes"),
    ({"members": PAIR, "host": "gpu-a", "tp_size": 16, "ranks": {"gpu-a": 0, "gpu-b": 0}}, "both have node rank 0"),
    ({"members": PAIR, "host": "gpu-a", "tp_size": 16, "ranks": {"gpu-b": 2}}, "outside 0..1"),
    ({"members": PAIR, "host": "gpu-a", "tp_size": 16, "ranks": {"gpu-b": "one"}}, "not an integer"),
    ({"members": PAIR, "host": "gpu-a", "tp_size": 16, "batch": ["gpu-a"]}, "gpu-b not in this play batch"),
    ({"members": PAIR, "host": "gpu-a", "tp_size": 16, "release_ids": {"gpu-a": "r1", "gpu-b": "r2"}},
     "different releases"),
    ({"members": PAIR, "host": "gpu-a", "tp_size": 16, "addresses": {"gpu-a": "127.0.0.1"}}, "only reachable"),
    ({"members": PAIR, "host": "gpu-a", "tp_size": 16, "dist_init_addr": "gpu-a"}, "needs host:port"),
    ({"members": PAIR, "host": "gpu-a", "tp_size": 16, "dist_init_addr": "10.0.0.1:notaport"}, "needs host:port"),
    ({"members": PAIR, "host": "gpu-a", "tp_size": 16, "dist_init_addr": "10.0.0.1:99999"}, "needs host:port"),
    ({"members": PAIR, "host": "gpu-a", "tp_size": 16, "dist_init_addr": "[fd00::1]"}, "needs host:port"),
    ({"members": PAIR, "host": "gpu-a", "tp_size": 16, "dist_init_addr": "fd00::1:5000"}, "write an IPv6 address as"),
    ({"members": PAIR, "host": "gpu-a", "tp_size": 16, "dist_init_addr": "127.0.0.1:5000"}, "only reachable"),
    ({"members": PAIR, "host": "gpu-a", "tp_size": 16, "addresses": {"gpu-a": "127.0.1.1"}}, "only reachable"),
    ({"members": PAIR, "host": "gpu-a", "tp_size": 16, "addresses": {"gpu-a": "LOCALHOST"}}, "only reachable"),
    ({"members": PAIR, "host": "gpu-a", "tp_size": 16, "addresses": {"gpu-a": "0.0.0.0"}}, "only reachable"),
    ({"members": PAIR, "host": "gpu-a", "tp_size": 16, "addresses": {"gpu-a": "localhost.localdomain"}},
     "only reachable"),
    ({"members": PAIR, "host": "gpu-a", "tp_size": 16, "dist_init_port": 70000}, "outside 1-65535"),
])
def test_bad_groups_fail_with_the_member_named(kwargs, needle):
    if needle is None:
        assert mn.plan_multinode(**kwargs)["tp_per_node"] == 6
        return
    with pytest.raises(mn.MultinodeError, match=needle):
        mn.plan_multinode(**kwargs)


def test_explicit_addresses_are_kept_as_written():
    for addr in ("gpu-a.ib.example:29500", "[fd00::11]:50000", "10.1.0.11:50000"):
        assert mn.plan_multinode(PAIR, "gpu-b", 16, dist_init_addr=addr)["dist_init_addr"] == addr


def test_release_ids_only_compare_defined_values():
    plan = mn.plan_multinode(PAIR, "gpu-b", 16, release_ids={"gpu-a": "r1", "gpu-b": None, "other": "r9"})
    assert plan["node_rank"] == 1


def test_flags_rendered_only_for_more_than_one_node():
    base = {"model_path": "/m", "tp_size": 16}
    assert "--nnodes" not in sf.render_server_args(dict(base, nnodes=1, node_rank=0, dist_init_addr=""))
    argv = sf.render_server_args(dict(base, nnodes=2, node_rank=1, dist_init_addr="10.0.0.11:50000"))
    assert argv[argv.index("--nnodes") + 1] == "2"
    assert argv[argv.index("--node-rank") + 1] == "1"
    assert argv[argv.index("--dist-init-addr") + 1] == "10.0.0.11:50000"
    with pytest.raises(sf.FlagError, match="needs --dist-init-addr"):
        sf.render_server_args(dict(base, nnodes=2, node_rank=0))
    with pytest.raises(sf.FlagError, match="rendered twice"):
        sf.render_server_args(dict(base, nnodes=2, node_rank=0, dist_init_addr="a:1", extra_args=["--nnodes", "2"]))


def test_flags_valid_in_the_recorded_059_parser():
    """The recorded SGLang 0.5.9 parser (tests/fixtures/service/parsers, dumped from the real ServerArgs) accepts
    the three flags with these values, and argparse rebuilt from it maps them to nnodes/node_rank/dist_init_addr."""
    from test_server_flags import load, rebuild_argparse
    spec, revision = load("0.5.9")
    argv = sf.render_server_args({"model_path": "/m", "tp_size": 16, "nnodes": 2, "node_rank": 1,
                                  "dist_init_addr": "10.0.0.11:50000"})
    sf.validate_args(argv, spec, revision)
    ns = rebuild_argparse("0.5.9").parse_args(argv)
    assert (ns.nnodes, ns.node_rank, ns.dist_init_addr) == ("2", "1", "10.0.0.11:50000")


# --- the role's tasks, for real --------------------------------------------------------------------------------

INVENTORY = {
    "all": {
        "vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable},
        "children": {
            "pair": {"hosts": {"gpu-a": {"ansible_host": "10.0.0.11"}, "gpu-b": {"ansible_host": "10.0.0.12"}}},
            "solo": {"hosts": {"gpu-c": {}}},
        },
    }
}


def _run(tmp_path, extra_vars, limit=None, inventory=None):
    out_dir = tmp_path / "plans"
    out_dir.mkdir(exist_ok=True)
    play = [{
        "name": "plan the multi-node server", "hosts": "all", "gather_facts": False,
        "tasks": [
            {"name": "role tasks", "ansible.builtin.include_role": {
                "name": "blackwell.sglang.sglang_service", "tasks_from": "check", "public": True}},
            {"name": "save", "ansible.builtin.copy": {
                "content": "{{ {'plan': __sglang_service_plan.multinode, 'argv': __sglang_service_plan.argv} | to_json }}",
                "dest": str(out_dir) + "/{{ inventory_hostname }}.json", "mode": "0644"},
             "delegate_to": "localhost", "check_mode": False},
        ],
    }]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play))
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(inventory or INVENTORY))
    # a host without a venv: check mode plans without reading the parser
    base = {"sglang_service_model_path": "/srv/models/none", "sglang_service_python": str(tmp_path / "no-venv" / "python"),
            "sglang_stack_has_target_gpu": False}
    res = ansible_run.playbook(tmp_path / "play.yml", tmp_path, inventory=tmp_path / "inventory.yml",
                               extra_vars=dict(base, **extra_vars), limit=limit, check=True, timeout=240)
    plans = {p.stem: json.loads(p.read_text()) for p in out_dir.glob("*.json")}
    return res, plans


@pytest.mark.slow
def test_role_plans_a_pair_from_the_inventory_group(tmp_path):
    res, plans = _run(tmp_path, {"sglang_stack_service_multinode_group": "pair", "sglang_stack_service_tp_size": 16},
                      limit="pair")
    assert res.returncode == 0, res.stdout + res.stderr
    a, b = plans["gpu-a"], plans["gpu-b"]
    assert (a["plan"]["node_rank"], b["plan"]["node_rank"]) == (0, 1)
    for host in (a, b):
        argv = host["argv"]
        assert argv[argv.index("--nnodes") + 1] == "2"
        assert argv[argv.index("--dist-init-addr") + 1] == "10.0.0.11:50000"
        assert host["plan"]["tp_per_node"] == 8
    assert b["plan"]["leader"] == "gpu-a"


@pytest.mark.slow
def test_role_single_node_renders_no_multinode_flags(tmp_path):
    res, plans = _run(tmp_path, {"sglang_stack_service_tp_size": 8}, limit="solo")
    assert res.returncode == 0, res.stdout + res.stderr
    assert plans["gpu-c"]["plan"]["enabled"] is False
    assert "--nnodes" not in plans["gpu-c"]["argv"]


@pytest.mark.slow
def test_role_refuses_half_a_server(tmp_path):
    res, plans = _run(tmp_path, {"sglang_stack_service_multinode_group": "pair", "sglang_stack_service_tp_size": 16},
                      limit="gpu-a")
    assert res.returncode != 0
    assert "gpu-b not in this play batch" in res.stdout + res.stderr
    assert plans == {}


@pytest.mark.slow
def test_role_uses_per_host_ranks_and_refuses_a_missing_group(tmp_path):
    inventory = json.loads(json.dumps(INVENTORY))
    inventory["all"]["children"]["pair"]["hosts"]["gpu-a"]["sglang_service_node_rank"] = 1
    inventory["all"]["children"]["pair"]["hosts"]["gpu-b"]["sglang_service_node_rank"] = 0
    res, plans = _run(tmp_path, {"sglang_stack_service_multinode_group": "pair", "sglang_stack_service_tp_size": 16},
                      limit="pair", inventory=inventory)
    assert res.returncode == 0, res.stdout + res.stderr
    assert plans["gpu-a"]["plan"]["node_rank"] == 1
    assert plans["gpu-a"]["plan"]["dist_init_addr"] == "10.0.0.12:50000"

    (tmp_path / "missing").mkdir()
    res, plans = _run(tmp_path / "missing", {"sglang_stack_service_multinode_group": "paIr", "sglang_stack_service_tp_size": 16},
                      limit="pair")
    assert res.returncode != 0
    assert "has no such group" in res.stdout + res.stderr
    assert plans == {}


@pytest.mark.slow
def test_unit_of_a_multinode_rank_opens_the_rdma_devices(tmp_path):
    """The real unit template, rendered by ansible's template module with the role's defaults: a closed device
    policy on a multi-node rank also allows the InfiniBand verbs groups and rdma_cm; a single node does not."""
    role = os.path.join(ROOT, "roles", "sglang_service")
    facts = {
        "sglang_service_model_path": "/srv/models/qwen",
        "__sglang_service_argv": ["--model-path", "/srv/models/qwen", "--nnodes", "2", "--node-rank", "1"],
        "__sglang_service_backends": {"source": "probe"}, "__sglang_service_kv": {"dtype": "bf16", "reason": "test"},
        "__sglang_service_parser": {"revision": "0.5.9"}, "__sglang_service_device_closed": True,
        "__sglang_service_nvidia_groups": ["nvidia", "nvidia-uvm"], "__sglang_service_persistenced": False,
        "__sglang_service_nvidia_modprobe": False, "__sglang_service_model_path": "/srv/models/qwen",
        "__sglang_service_state_dir_name": "sglang", "__sglang_service_cache_dir_name": "sglang",
    }
    units = {}
    for name, rdma in (("rank", True), ("single", False)):
        extra = dict(facts, __sglang_service_rdma_groups=["infiniband_verbs"] if rdma else [],
                     __sglang_service_rdma_paths=["/dev/infiniband/rdma_cm"] if rdma else [])
        play = [{"name": "render", "hosts": "localhost", "connection": "local", "gather_facts": False,
                 # the role's defaults on top of the stack contract's (roles/sglang_stack), which they read
                 "vars_files": [os.path.join(role, "..", "sglang_stack", "defaults", "main.yml"),
                                os.path.join(role, "defaults", "main.yml")],
                 "tasks": [{"name": "render the unit", "ansible.builtin.template": {
                     "src": os.path.join(role, "templates", "sglang.service.j2"),
                     "dest": str(tmp_path / ("%s.service" % name)), "mode": "0644"}}]}]
        (tmp_path / "render.yml").write_text(yaml.safe_dump(play))
        res = ansible_run.playbook(tmp_path / "render.yml", tmp_path, extra_vars=extra, timeout=240)
        assert res.returncode == 0, res.stdout + res.stderr
        units[name] = (tmp_path / ("%s.service" % name)).read_text()
    assert "DevicePolicy=closed" in units["rank"]
    assert "DeviceAllow=char-infiniband_verbs rw" in units["rank"]
    assert "DeviceAllow=/dev/infiniband/rdma_cm rw" in units["rank"]
    assert "DeviceAllow=char-nvidia-uvm rw" in units["rank"]
    assert "infiniband" not in units["single"] and "DeviceAllow=char-nvidia rw" in units["single"]
    assert "--node-rank 1" in units["rank"]
