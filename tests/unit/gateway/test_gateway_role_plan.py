"""The role's plan stage through ansible-playbook (tags gateway_plan: no change, no smg needed): bad input fails
with a message naming the variable before anything is installed; a multi-node server becomes one worker (rank 0).

The hosts are fake inventory names on the local connection; only the checks run (the input check, the plan and the
module sglang_gateway_args, which finds no smg venv and checks what needs none).
"""

import json
import os
import subprocess
import sys

import pytest
import yaml

import ansible_run


def _run(tmp_path, inventory, extra_vars=None):
    play = [{"name": "gateway plan", "hosts": "sglang_gateways", "gather_facts": False, "tasks": [
        {"name": "role", "ansible.builtin.include_role": {"name": "blackwell.sglang.sglang_gateway", "public": True},
         "tags": ["gateway_plan"]},
        {"name": "save", "ansible.builtin.copy": {"content": "{{ {'workers': __sglang_gateway_workers, 'argv': __sglang_gateway_flags.argv} | to_json }}",
                                                  "dest": str(tmp_path / "plan.json"), "mode": "0644"},
         "tags": ["gateway_plan"]},
    ]}]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play))
    (tmp_path / "inv.yml").write_text(yaml.safe_dump(inventory))
    base = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
            "sglang_gateway_api_key": "k" * 32}
    base.update(extra_vars or {})
    res = ansible_run.playbook(tmp_path / "play.yml", tmp_path, inventory=tmp_path / "inv.yml", tags=["gateway_plan"],
                               extra_vars=base, timeout=240)
    plan = json.loads((tmp_path / "plan.json").read_text()) if (tmp_path / "plan.json").exists() else None
    return res, plan


def _inv(servers, gateways=("gw",), server_vars=None):
    return {"all": {"children": {
        "sglang_servers": {"hosts": {h: dict(ansible_host=addr, **(server_vars or {}).get(h, {})) for h, addr in servers},
                           "vars": {"sglang_stack_service_host": "0.0.0.0", "sglang_stack_service_port": 30000}},
        "sglang_gateways": {"hosts": {g: {} for g in gateways}},
        "pair": {"hosts": {"m1": {}, "m2": {}}},
    }}}


@pytest.mark.slow
def test_empty_worker_group_fails_naming_the_variable(tmp_path):
    inv = {"all": {"children": {"sglang_servers": {"hosts": {}}, "sglang_gateways": {"hosts": {"gw": {}}}}}}
    res, plan = _run(tmp_path, inv)
    assert res.returncode != 0 and plan is None
    assert "sglang_gateway_workers_group" in res.stdout + res.stderr


@pytest.mark.slow
def test_port_clash_on_a_worker_host_fails_naming_the_variable(tmp_path):
    inv = _inv([("gpu1", "10.0.0.1"), ("gpu2", "10.0.0.2")], gateways=("gpu1",))
    inv["all"]["children"]["sglang_gateways"]["hosts"] = {"gpu1": {"ansible_host": "10.0.0.1"}}
    res, plan = _run(tmp_path, inv, {"sglang_gateway_port": 30000})
    out = res.stdout + res.stderr
    assert res.returncode != 0 and plan is None
    assert "sglang_gateway_port" in out and "sglang_stack_service_port" in out


@pytest.mark.slow
def test_multinode_server_is_one_worker_and_argv_has_no_key(tmp_path):
    inv = _inv([("a", "10.0.0.1"), ("m1", "10.0.0.2"), ("m2", "10.0.0.3")],
               server_vars={"m1": {"sglang_stack_service_multinode_group": "pair"},
                            "m2": {"sglang_stack_service_multinode_group": "pair"}})
    res, plan = _run(tmp_path, inv, {"sglang_gateway_policy": "power_of_two"})
    assert res.returncode == 0, res.stdout[-3000:]
    assert [w["url"] for w in plan["workers"]] == ["http://10.0.0.1:30000", "http://10.0.0.2:30000"]
    assert plan["argv"][plan["argv"].index("--policy") + 1] == "power_of_two"
    assert "k" * 32 not in " ".join(plan["argv"])


@pytest.mark.slow
def test_empty_key_refused_on_a_public_gateway(tmp_path):
    res, plan = _run(tmp_path, _inv([("a", "10.0.0.1")]), {"sglang_gateway_api_key": ""})
    assert res.returncode != 0 and plan is None
    assert "sglang_gateway_api_key" in res.stdout + res.stderr


@pytest.mark.slow
def test_drain_and_undrain_without_gateways_do_nothing(tmp_path):
    """A fleet without a `sglang_gateways` group: the rollout's new include_role calls skip everything."""
    play = [{"name": "rollout turn", "hosts": "sglang_servers", "gather_facts": False, "tasks": [
        {"name": "drain", "ansible.builtin.include_role": {"name": "blackwell.sglang.sglang_gateway", "tasks_from": "drain"}},
        {"name": "undrain", "ansible.builtin.include_role": {"name": "blackwell.sglang.sglang_gateway", "tasks_from": "undrain"}},
    ]}]
    inv = {"all": {"children": {"sglang_servers": {"hosts": {"gpu1": {}, "gpu2": {}}}}}}
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play))
    (tmp_path / "inv.yml").write_text(yaml.safe_dump(inv))
    res = ansible_run.playbook(tmp_path / "play.yml", tmp_path, inventory=tmp_path / "inv.yml", timeout=240,
                               extra_vars={"ansible_connection": "local", "ansible_python_interpreter": sys.executable})
    assert res.returncode == 0, res.stdout[-3000:]
    assert "changed=0" in res.stdout and "failed=0" in res.stdout
    for task in ("Take the worker out of every gateway", "Put the worker back into every gateway"):
        after = res.stdout.split(task, 1)[1].split("TASK [", 1)[0]
        assert "skipping: [gpu1]" in after and "ok: [gpu1]" not in after and "changed: [gpu1]" not in after


def _smg_prefix():
    cand = os.environ.get("SGLANG_GATEWAY_TEST_SMG_PYTHON") or sys.executable
    res = subprocess.run([cand, "-c", "import smg.launch_router, sys; print(sys.prefix)"], capture_output=True, text=True,
                         timeout=60, check=False)
    return res.stdout.strip() if res.returncode == 0 else None


def _run_validate(tmp_path, extra):
    """plan + validate stages of the role against an existing venv with smg (nothing installed, nothing written)."""
    prefix = _smg_prefix()
    if not prefix:
        pytest.skip("needs a python with smg (SGLANG_GATEWAY_TEST_SMG_PYTHON)")
    play = [{"name": "gateway validate", "hosts": "sglang_gateways", "gather_facts": False, "tasks": [
        {"name": "role", "ansible.builtin.include_role": {"name": "blackwell.sglang.sglang_gateway"},
         "tags": ["gateway_plan", "gateway_validate"]}]}]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play))
    (tmp_path / "inv.yml").write_text(yaml.safe_dump(_inv([("a", "10.0.0.1")])))
    ev = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable, "sglang_gateway_api_key": "k" * 32,
          "sglang_gateway_venv": prefix}
    ev.update(extra)
    return ansible_run.playbook(tmp_path / "play.yml", tmp_path, inventory=tmp_path / "inv.yml",
                                tags=["gateway_plan", "gateway_validate"], extra_vars=ev)


@pytest.mark.slow
def test_policy_the_installed_smg_does_not_offer(tmp_path):
    res = _run_validate(tmp_path, {"sglang_gateway_policy": "fastest"})
    out = res.stdout + res.stderr
    assert res.returncode != 0
    assert "sglang_gateway_policy: fastest is not a routing policy of the installed smg 1.13.0" in out
    assert "cache_aware" in out


@pytest.mark.slow
def test_flag_the_installed_smg_refuses_and_good_settings_pass(tmp_path):
    res = _run_validate(tmp_path, {"sglang_gateway_extra_args": ["--no-such-flag"]})
    assert res.returncode != 0 and "unknown flag --no-such-flag" in res.stdout + res.stderr
    res = _run_validate(tmp_path, {"sglang_gateway_policy": "least_load"})
    assert res.returncode == 0, res.stdout[-3000:]
